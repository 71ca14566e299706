/**
 * Per-node BGP settings end to end (agent/README.md, "BGP advertisement"): a simulated node whose
 * agent runs in Kubernetes mode against the stand-in API server (a faithful stand-in speaking the
 * real wire protocol) with a `bgp` section that names neither ASN nor peers: both come from its
 * Node object (label bgp.knitter.io/asn, annotation bgp.knitter.io/peers). An "external router"
 * netns running BIRD 2 expects the node's ASN from the label; the session establishes and the
 * advertised network is learned; a changed annotation re-peers (a second router address), keeping
 * the session that did not change; a bad value keeps the session up and raises a Warning Event.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack, waitFor } from "../devstack/stack.ts";
import {
  forgets,
  learns,
  type PeerRouter,
  ROUTER,
  ROUTER2,
  ROUTER_ASN,
  speakBgp,
  startFabric,
  underlay6,
} from "./support/bgp_fabric.ts";
import { KubeApi } from "./support/kube_api.ts";
import { eventually } from "./support/kube_cluster.ts";
import { knitterList, makePod } from "./support/pods.ts";
import { api } from "./support/stack_api.ts";

const NODE_ASN = 65010;
const TOKEN = `kubelet-${crypto.randomUUID()}`;
const PEERS = "bgp.knitter.io/peers";

/** The annotation's value: these router addresses, hold time 3. */
const peers = (...addresses: string[]) =>
  JSON.stringify(addresses.map((address) => ({ address, asn: ROUTER_ASN, holdTime: 3 })));

Deno.test("e2e bgp: stand-in API server: the node's ASN and peer come from its Node; the session establishes and the route is learned; a changed annotation re-peers, keeping the unchanged session; a bad value keeps the session up and raises a Warning Event", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1"],
    manager: { bgp: { advertisableRanges: ["10.80.0.0/12"] } },
  });
  const [n1] = stack.nodes;
  const ip1 = n1.sim.underlayIp;
  const fabric = await startFabric(cleanup, [ip1], { asns: { [ip1]: NODE_ASN }, second: true });
  const socket = `${stack.dir}/kube-api.sock`;
  const kube = KubeApi.start({ tokens: { [TOKEN]: "system:node:n1" }, socket, bookmarkMs: 1000 });
  cleanup.defer(() => kube.close());
  for (const name of ["default", "acme"]) kube.create("namespaces", { metadata: { name } });
  kube.create("nodes", {
    metadata: {
      name: "n1",
      labels: { "bgp.knitter.io/asn": String(NODE_ASN) },
      annotations: { [PEERS]: peers(ROUTER) },
    },
  });
  const kubeconfig = await kube.writeKubeconfig(`${stack.dir}/n1.kubeconfig`, TOKEN);
  // Neither ASN nor peers in the file: the Node's keys give both.
  await speakBgp(cleanup, n1, {
    kubernetes: { kubeconfig, socket, hotplug: false },
    bgp: { nextHop6: underlay6(ip1) },
  });
  await api(stack, "POST", "tenants", { name: "acme" }, 201);
  await api(stack, "POST", "tenants/acme/networks", {
    name: "front",
    cidr: "10.80.0.0/24",
    gateway: "10.80.0.1",
    advertise: true,
  }, 201);
  const obj = kube.create("pods", {
    metadata: { name: "f1", namespace: "acme" },
    spec: { nodeName: "n1", containers: [{ name: "app", image: "app" }] },
  });
  const f1 = await makePod(n1, "f1", "acme", knitterList(["front"], [], "1.0.0"), {
    podUid: obj.metadata.uid,
  });
  const added = await f1.add();
  assert.equal(added.code, 0, `ADD f1: ${JSON.stringify(added.out)} ${added.stderr}`);

  const tor1 = fabric;
  const tor2 = fabric.second!;

  await t.step(
    "the session with the Node's peer establishes, with the Node's ASN, and the network is learned",
    async () => {
      await established(tor1, true);
      await learns(tor1, new Map([["10.80.0.0/24", [ip1]]]));
      await established(tor2, false);
    },
  );

  await t.step(
    "a peer added to the annotation comes up; the session that did not change stays",
    async () => {
      const before = await session(tor1);
      editNode(kube, (m) => m.annotations[PEERS] = peers(ROUTER, ROUTER2));
      await established(tor2, true);
      await learns(tor2, new Map([["10.80.0.0/24", [ip1]]]));
      const after = await session(tor1);
      // BIRD prints `since` from its monotonic clock: the same instant may read 1 ms apart. A
      // session dropped and made again would be seconds younger (BGP's connect delay).
      assert.ok(
        after?.established && before?.established &&
          Math.abs(clockMs(after.since) - clockMs(before.since)) <= 50,
        `the first session was not dropped: ${JSON.stringify({ before, after })}`,
      );
    },
  );

  await t.step(
    "the annotation changed to the other peer only: the first session goes, the second stays",
    async () => {
      const kept = await session(tor2);
      editNode(kube, (m) => m.annotations[PEERS] = peers(ROUTER2));
      await established(tor1, false);
      await forgets(tor1, ["10.80.0.0/24"]);
      assert.deepEqual(await session(tor2), kept, "the second session was not dropped");
      await learns(tor2, new Map([["10.80.0.0/24", [ip1]]]));
    },
  );

  await t.step(
    "bad input: a bad ASN keeps the session up and raises a Warning Event on the Node",
    async () => {
      const kept = await session(tor2);
      editNode(kube, (m) => m.labels["bgp.knitter.io/asn"] = "4294967296");
      const event = await eventually(
        "a Warning Event on the Node",
        () =>
          kube.list("events", "default").find((e) =>
            e.involvedObject.kind === "Node" && e.involvedObject.name === "n1" &&
            e.reason === "BGPSettingsInvalid"
          ),
      );
      assert.equal(event.type, "Warning");
      assert.match(event.message, /bgp\.knitter\.io\/asn: "4294967296".*write e\.g\./s);
      // Longer than the routers' hold time (3 s): a dropped session would show.
      await new Promise((r) => setTimeout(r, 4000));
      assert.deepEqual(await session(tor2), kept, "the session stayed up");
      await learns(tor2, new Map([["10.80.0.0/24", [ip1]]]));
    },
  );

  assert.equal((await f1.del()).code, 0, "DEL f1");
});

/** The router's session with the node (its BGP protocol node1). */
/** "HH:MM:SS.mmm" as milliseconds of the day. */
function clockMs(since: string): number {
  const [h, m, sec] = since.split(":").map(Number);
  return ((h * 60 + m) * 60 + sec) * 1000;
}

async function session(router: PeerRouter) {
  return (await router.sessions()).get("node1");
}

/** Waits until the router's session with the node is established, or not. */
async function established(router: PeerRouter, up: boolean): Promise<void> {
  let last: unknown;
  try {
    await waitFor(`the session ${up ? "up" : "down"}`, async () => {
      const s = await session(router);
      last = s;
      return s?.established === up;
    }, 60_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}: ${JSON.stringify(last)}`);
  }
}

function editNode(kube: KubeApi, edit: (m: Record<string, Record<string, string>>) => void) {
  kube.update("nodes", undefined, "n1", (o) => edit(o.metadata));
}
