/**
 * Floating addresses end to end (agent/README.md, "Floating addresses"): two simulated nodes whose
 * agents run BIRD 2, an "external router" netns as their BGP peer with a host behind it
 * (support/bgp_fabric.ts). A tenant takes an address of the admin's floating pool and binds it to
 * its pod's port: the node hosting the pod announces the /32, the host reaches the pod by TCP at
 * the floating address, and the pod's connections out reach the host from the floating address. The
 * pod is deleted and made again on the other node with the same port ID: the address follows it
 * (the router learns it from that node alone, and TCP works again). Hostile binds are refused;
 * unbinding withdraws it, and a released address waits out its quarantine.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { run } from "@knitter/common";
import {
  type Fabric,
  forgets,
  HOST,
  HOST_SUBNET,
  learns,
  ROUTER,
  speakBgp,
  startFabric,
} from "./support/bgp_fabric.ts";
import { startCapture } from "./support/capture.ts";
import {
  LEARN_MS,
  macOf,
  neighbourOwner,
  oneSandbox,
  podToHost,
  proxies,
  untilHostReaches,
} from "./support/floating_lan.ts";
import { addressesOf, ipNetnsName, knitterList, makePod, type Pod } from "./support/pods.ts";
import { tcpExchange } from "./support/traffic.ts";

const ACME = "acme-tenant-token-for-the-floating-test";
const GLOBEX = "globex-tenant-token-for-the-floating-test";
const { sandbox: SANDBOX, portId: PORT_ID } = oneSandbox(
  "f100d0000000000000000000000000ab",
  "pod-uid-floating-1",
);

Deno.test("e2e floating: an external host reaches a pod at its floating address by TCP and the pod reaches it from there; the address follows the pod to another node; hostile binds refused; unbound, withdrawn; released through quarantine", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    tokens: [
      { token: ACME, scope: "tenant", tenant: "acme" },
      { token: GLOBEX, scope: "tenant", tenant: "globex" },
    ],
  });
  const [n1, n2] = stack.nodes;
  const [ip1, ip2] = [n1, n2].map((n) => n.sim.underlayIp);
  const fabric = await startFabric(cleanup, [ip1, ip2]);
  for (const node of stack.nodes) await speakBgp(cleanup, node);
  for (const name of ["acme", "globex"]) await api(stack, "POST", "tenants", { name }, 201);
  await api(stack, "POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/28"] }, 201);
  for (const [tenant, name] of [["acme", "front"], ["globex", "back"]]) {
    await api(stack, "POST", `tenants/${tenant}/networks`, {
      name,
      cidr: "10.90.0.0/24",
      gateway: "10.90.0.1",
    }, 201);
  }
  let { fip, web } = await boundPod(stack, "ext");
  // globex's pod with the same address on the same node: it must never get acme's traffic.
  const other = await pod(n1, "other", "globex", "back", { containerId: "0ther" });
  assert.equal(other.ip, web.ip, "two tenants, one address: the test's point");

  await t.step("the router learns the floating /32 from the pod's node only", async () => {
    await learns(fabric, new Map([[`${fip}/32`, [ip1]]]));
  });

  await t.step(
    "the host reaches the pod by TCP at the floating address (a payload echoed whole), and only that pod",
    async () => {
      const cap = await startCapture(cleanup, ns(web), "eth0", `tcp and dst host ${web.ip}`, {
        count: 1,
        timeoutMs: 20_000,
      });
      const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 100_000);
      assert.ok(tcp.ok, `host to ${fip}: ${JSON.stringify(tcp)}`);
      assert.equal(tcp.received, 100_000);
      const seen = await cap.done(1000);
      assert.equal(seen.length, 1, `web saw the connection: ${seen}`);
      assert.match(seen[0], new RegExp(`${dots(HOST)}\\.\\d+ > ${dots(web.ip)}\\.`));
      const wrong = await tcpExchange(cleanup, fabric.host, ns(other), fip, 1000, { seconds: 3 });
      assert.equal(
        wrong.ok,
        false,
        `globex's pod with the same address answered: ${JSON.stringify(wrong)}`,
      );
    },
  );

  await t.step("the pod's connection to the host comes from the floating address", async () => {
    await podToHost(cleanup, fabric, ns(web), { host: HOST, from: fip });
  });

  await t.step(
    "attack: another tenant cannot bind the address, nor the owner bind it to another tenant's port",
    async () => {
      const before = await as(
        stack,
        ACME,
        "GET",
        `tenants/acme/floating-ips/${fip}`,
        undefined,
        200,
      );
      const theirs = await as(stack, GLOBEX, "POST", `tenants/globex/floating-ips/${fip}/bind`, {
        network: "back",
        port: `${other.args.K8S_POD_UID}-0ther-eth0`,
      }, 404);
      assert.doesNotMatch(JSON.stringify(theirs), /acme/);
      await as(stack, GLOBEX, "POST", `tenants/acme/floating-ips/${fip}/unbind`, undefined, 403);
      const mine =
        (await as(stack, ACME, "POST", "tenants/acme/floating-ips", { pool: "ext" }, 201))
          .address;
      await as(stack, ACME, "POST", `tenants/acme/floating-ips/${mine}/bind`, {
        network: "back",
        port: `${other.args.K8S_POD_UID}-0ther-eth0`,
      }, 404);
      await as(stack, ACME, "DELETE", `tenants/acme/floating-ips/${mine}`, undefined, 204);
      assert.deepEqual(
        await as(stack, ACME, "GET", `tenants/acme/floating-ips/${fip}`, undefined, 200),
        before,
      );
    },
  );

  await t.step(
    "the pod deleted and made again on the other node with the same port: the address follows",
    async () => {
      assert.equal((await web.del()).code, 0, "DEL web on n1");
      web = await pod(n2, "web", "acme", "front");
      await learns(fabric, new Map([[`${fip}/32`, [ip2]]]));
      const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 100_000);
      assert.ok(tcp.ok, `host to ${fip} on n2: ${JSON.stringify(tcp)}`);
      await podToHost(cleanup, fabric, ns(web), { host: HOST, from: fip });
    },
  );

  await t.step("unbound: withdrawn and no longer reached; released: in quarantine", async () => {
    await as(stack, ACME, "POST", `tenants/acme/floating-ips/${fip}/unbind`, undefined, 200);
    await forgets(fabric, [`${fip}/32`]);
    const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 1000, { seconds: 3 });
    assert.equal(tcp.ok, false, `host to the unbound ${fip}: ${JSON.stringify(tcp)}`);
    await as(stack, ACME, "DELETE", `tenants/acme/floating-ips/${fip}`, undefined, 204);
    const again = await as(stack, GLOBEX, "POST", "tenants/globex/floating-ips", {
      pool: "ext",
      address: fip,
    }, 409);
    assert.match(JSON.stringify(again), /quarantine until/);
  });

  for (const p of [web, other]) assert.equal((await p.del()).code, 0, `DEL ${p.name}`);
});

Deno.test("e2e floating without BGP: on a flat external network the hosting node answers ARP for the address; TCP both ways; after a move the other node answers and announces it by gratuitous ARP to a router that had the old node cached; unbound, no answer", async (t) => {
  await using cleanup = new Cleanup();
  const world = await flatWorld(cleanup, ["n1", "n2"]);
  const { stack, fabric, fip } = world;
  const [n1, n2] = stack.nodes;
  let web = world.web;

  await t.step(
    "n1 answers ARP for it; the host reaches the pod, the pod the host from it",
    async () => {
      await untilHostReaches(cleanup, fabric, ns(web), fip);
      assert.equal(await neighbourOwner(fabric, fip), await macOf(n1));
      const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 100_000);
      assert.ok(tcp.ok, `host to ${fip}: ${JSON.stringify(tcp)}`);
      await podToHost(cleanup, fabric, ns(web), { host: HOST, from: fip });
    },
  );

  await t.step(
    "moved to n2: the router, which still has n1's MAC cached for the address, learns n2's from n2's gratuitous ARP, and the host reaches the pod on n2",
    async () => {
      // A neighbour that keeps what it learned (as switches and hosts of an external network may
      // for minutes): n1's MAC stays valid for it until something tells it otherwise.
      await keepNeighbours(cleanup, fabric, web, fip);
      assert.equal(await neighbourOwner(fabric, fip), await macOf(n1));
      assert.equal((await web.del()).code, 0, "DEL web on n1");
      web = await pod(n2, "web", "acme", "front");
      await waitFor(
        "the router's entry for the address names n2",
        async () => await neighbourOwner(fabric, fip) === await macOf(n2),
        LEARN_MS,
      );
      const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 100_000);
      assert.ok(tcp.ok, `host to ${fip} on n2: ${JSON.stringify(tcp)}`);
      await podToHost(cleanup, fabric, ns(web), { host: HOST, from: fip });
    },
  );

  await t.step("unbound: no node answers ARP for it", async () => {
    await as(stack, ACME, "POST", `tenants/acme/floating-ips/${fip}/unbind`, undefined, 200);
    // The answer withdrawn before the router asks again (it would keep one for an hour).
    await waitFor(
      "n2 stops answering for the address",
      async () => !await proxies(n2, fip),
      LEARN_MS,
    );
    await run(["ip", "-n", fabric.router, "neigh", "flush", "dev", "eth0"]);
    const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 1000, { seconds: 3 });
    assert.equal(tcp.ok, false, `host to the unbound ${fip}: ${JSON.stringify(tcp)}`);
    assert.equal(await neighbourOwner(fabric, fip), undefined);
  });
  assert.equal((await web.del()).code, 0, "DEL web");
});

Deno.test("e2e floating: unbinding ends the pod's connections made with the address, also on an egress network (conntrack cleaned: no NAT outlives its binding)", async () => {
  await using cleanup = new Cleanup();
  const { stack, fabric, fip, web } = await flatWorld(cleanup, ["n1"], { egress: true });
  await waitFor(
    "the pod reaches the host from the floating address",
    async () => (await tcpExchange(cleanup, ns(web), fabric.host, HOST, 1000, { seconds: 2 })).ok,
    LEARN_MS,
  );
  // A stream of 10 s from the pod, unbound after 2 s: the rest would leave with the node's address
  // (egress), which the host's end of the connection does not know.
  const stream = tcpExchange(cleanup, ns(web), fabric.host, HOST, 200_000, {
    rate: 20_000,
    seconds: 15,
  });
  await new Promise((r) => setTimeout(r, 2000));
  await as(stack, ACME, "POST", `tenants/acme/floating-ips/${fip}/unbind`, undefined, 200);
  const r = await stream;
  assert.equal(r.ok, false, `the stream went on after the unbind: ${JSON.stringify(r)}`);
  // New connections leave by egress, from the node's address.
  const tcp = await tcpExchange(cleanup, ns(web), fabric.host, HOST, 1000);
  assert.ok(tcp.ok, `egress after the unbind: ${JSON.stringify(tcp)}`);
  assert.equal((await web.del()).code, 0, "DEL web");
});

/**
 * No BGP: the router on the nodes' LAN (192.0.2.0/24), the pool "lan" on it too (the router asks
 * ARP for its addresses), acme's network "front" (with `more`), and its pod web on the first node
 * with the pool's first address bound.
 */
async function flatWorld(cleanup: Cleanup, nodes: string[], more: Record<string, unknown> = {}) {
  const stack = await startStack({
    cleanup,
    nodes,
    tokens: [{ token: ACME, scope: "tenant", tenant: "acme" }],
  });
  const fabric = await startFabric(cleanup, []);
  for (const node of stack.nodes) {
    await run(["ip", "-n", node.sim.netns, "route", "add", HOST_SUBNET, "via", ROUTER]);
  }
  await api(stack, "POST", "tenants", { name: "acme" }, 201);
  await api(stack, "POST", "floating-pools", { name: "lan", cidrs: ["192.0.2.200/29"] }, 201);
  await api(stack, "POST", "tenants/acme/networks", {
    name: "front",
    cidr: "10.90.0.0/24",
    gateway: "10.90.0.1",
    ...more,
  }, 201);
  return { stack, fabric, ...await boundPod(stack, "lan") };
}

/** acme takes an address of `pool` and binds it to its pod web, made on the first node. */
async function boundPod(stack: Stack, pool: string): Promise<{ fip: string; web: Added }> {
  const fip = (await as(stack, ACME, "POST", "tenants/acme/floating-ips", { pool }, 201))
    .address as string;
  const web = await pod(stack.nodes[0], "web", "acme", "front");
  await as(stack, ACME, "POST", `tenants/acme/floating-ips/${fip}/bind`, {
    network: "front",
    port: PORT_ID,
  }, 200);
  return { fip, web };
}

/** The router keeps its neighbour entries on the LAN valid for an hour once learned. */
async function keepNeighbours(
  cleanup: Cleanup,
  fabric: Fabric,
  web: Added,
  fip: string,
): Promise<void> {
  await run([
    ...["ip", "netns", "exec", fabric.router, "sysctl", "-qw"],
    "net.ipv4.neigh.eth0.base_reachable_time_ms=3600000",
    "net.ipv4.neigh.eth0.gc_stale_time=3600",
  ]);
  // Learned again with those times (the entry made before had the defaults').
  await run(["ip", "-n", fabric.router, "neigh", "flush", "dev", "eth0"]);
  await waitFor(
    "the router learns the floating address again",
    async () => (await tcpExchange(cleanup, fabric.host, ns(web), fip, 1000, { seconds: 2 })).ok,
    LEARN_MS,
  );
}

const dots = (ip: string) => ip.replaceAll(".", "\\.");

interface Added extends Pod {
  ip: string;
}

async function pod(
  node: StackNode,
  name: string,
  tenant: string,
  network: string,
  sandbox: { containerId: string; podUid?: string } = SANDBOX,
): Promise<Added> {
  const p = await makePod(node, name, tenant, knitterList([network], [], "1.0.0"), sandbox);
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const [ip] = addressesOf(r.out).map((a) => a.address.split("/")[0]);
  return Object.assign(p, { ip });
}

function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}

async function api(stack: Stack, method: string, path: string, body: unknown, status: number) {
  const r = await stack.api(method, path, body);
  assert.equal(r.status, status, `${method} ${path}: ${JSON.stringify(r.body)}`);
}

/** A request with a tenant's token: asserts the status, answers the body. */
async function as(
  stack: Stack,
  token: string,
  method: string,
  path: string,
  body: unknown,
  status: number,
  // deno-lint-ignore no-explicit-any
): Promise<any> {
  const r = await fetch(`${stack.managerUrl}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.equal(r.status, status, `${method} ${path}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}
