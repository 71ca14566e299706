/**
 * The node's BGP settings from its own Node object (agent/README.md, "BGP advertisement"), against
 * the stand-in API server (a faithful stand-in speaking the real wire protocol: list and watch with
 * resourceVersion, 410) through the agent's real client, with a real BIRD 2 in a netns of the
 * test's: the Node's labels and annotations reach BIRD's configuration and BIRD reloads it (the
 * same BIRD, no restart); bad values keep the last good settings, are logged, raise a Warning
 * Event on the Node and are counted for the metric; removing the keys falls back to the file's values.
 */
import assert from "node:assert/strict";
import { createLogger, run } from "@knitter/common";
import { AgentConfigSchema } from "../agent/config.ts";
import { KubePods } from "../agent/kubernetes/kube_pods.ts";
import { NodeWatch } from "../agent/kubernetes/node_watch.ts";
import { speakerFor } from "../agent/bgp/bgp_speaker.ts";
import { NodeBgpFollower } from "../agent/bgp/node_bgp_follower.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { KubeApi } from "./support/kube_api.ts";
import { eventually } from "./support/kube_cluster.ts";

const TOKEN = "node-n1-token";
const PEERS = '[{"address":"192.0.2.1","asn":65000},{"address":"192.0.2.2","asn":65000}]';

async function setup(cleanup: Cleanup) {
  const api = KubeApi.start({ tokens: { [TOKEN]: "system:node:n1" }, bookmarkMs: 200 });
  cleanup.defer(() => api.close());
  api.create("namespaces", { metadata: { name: "default" } });
  api.create("nodes", { metadata: { name: "n1", labels: { "kubernetes.io/hostname": "n1" } } });
  const dir = await cleanup.tempDir();
  const ns = cleanup.name("bird");
  cleanup.netns(ns);
  await run(["ip", "netns", "add", ns]);
  await run(["ip", "-n", ns, "link", "set", "lo", "up"]);
  const kube = await KubePods.open({ kubeconfig: await api.writeKubeconfig(`${dir}/kc`, TOKEN) });
  cleanup.defer(() => Promise.resolve(kube.close()));
  const config = AgentConfigSchema.parse({
    nodeName: "n1",
    manager: { url: "http://127.0.0.1:1", token: "node-token-for-tests-0001" },
    underlayIp: "192.0.2.11",
    stateDir: dir,
    kubernetes: {},
    bgp: { localAsn: 65001, peers: [{ address: "192.0.2.9", asn: 65009 }] },
  });
  const log = createLogger("node bgp test", "error");
  const logged: string[] = [];
  const watchLog = {
    ...log,
    error: (msg: string, f?: Record<string, unknown>) => logged.push(`${msg} ${f?.errors}`),
  };
  const follower = new NodeBgpFollower({
    config,
    nodeName: "n1",
    warn: (node, reason, message) => kube.warnNode(node, reason, message),
    log: watchLog as typeof log,
  });
  const speaker = speakerFor(config, follower.startWith, log, {
    run: (argv, opts) => run(argv, { ...opts, netns: ns }),
    kill: (pid, signal) => Deno.kill(pid, signal),
  });
  cleanup.pidfile(`${dir}/bird.pid`);
  await speaker.start();
  cleanup.defer(() => speaker.stop());
  follower.attach(speaker);
  const watch = new NodeWatch(kube, "n1", (n) => follower.seen(n), log, {
    timeoutSeconds: 30,
    deadlineMs: 2000,
  });
  watch.start();
  cleanup.defer(() => watch.stop());
  const editNode = (edit: (meta: Record<string, Record<string, string>>) => void) =>
    api.update("nodes", undefined, "n1", (o) => {
      o.metadata.labels ??= {};
      o.metadata.annotations ??= {};
      edit(o.metadata);
    });
  const birdConf = () => Deno.readTextFile(`${dir}/bird.conf`);
  const pid = async () => (await Deno.readTextFile(`${dir}/bird.pid`)).trim();
  const protocols = async () =>
    (await run(["birdc", "-s", `${dir}/bird.ctl`, "show", "protocols"], { netns: ns })).stdout;
  return { api, speaker, follower, editNode, birdConf, pid, protocols, logged };
}

/** BIRD's configuration once it has `text` in it, and BIRD has reloaded it. */
async function configHas(t: Awaited<ReturnType<typeof setup>>, ...texts: string[]) {
  return await eventually(`BIRD's configuration has ${texts.join(", ")}`, async () => {
    await t.speaker.settled();
    const conf = await t.birdConf();
    return texts.every((x) => conf.includes(x)) ? conf : undefined;
  });
}

Deno.test("stand-in API server: the Node's BGP labels and annotations reach BIRD, reloaded in place; removed, the file's values come back", async () => {
  await using cleanup = new Cleanup();
  const t = await setup(cleanup);
  await configHas(t, "local as 65001;", "neighbor 192.0.2.9 as 65009;");
  const first = await t.pid();
  t.editNode((m) => {
    m.labels["bgp.knitter.io/asn"] = "65010";
    m.labels["bgp.knitter.io/router-id"] = "192.0.2.111";
    m.annotations["bgp.knitter.io/peers"] = PEERS;
    m.annotations["bgp.knitter.io/communities"] = "65010:7";
  });
  const conf = await configHas(
    t,
    "local as 65010;",
    "router id 192.0.2.111;",
    "protocol bgp peer_192_0_2_1 {",
    "neighbor 192.0.2.2 as 65000;",
    "bgp_community.add((65010,7));",
  );
  assert.ok(!conf.includes("192.0.2.9"), "the file's peer is replaced by the Node's");
  assert.match(await t.protocols(), /peer_192_0_2_1\s+BGP/);
  assert.match(await t.protocols(), /peer_192_0_2_2\s+BGP/);
  assert.equal(await t.pid(), first, "BIRD reloaded, not restarted");
  t.editNode((m) => {
    for (const k of Object.keys(m.labels)) if (k.startsWith("bgp.")) delete m.labels[k];
    m.annotations = {};
  });
  await configHas(t, "local as 65001;", "neighbor 192.0.2.9 as 65009;", "router id 192.0.2.11;");
  assert.doesNotMatch(await t.protocols(), /peer_192_0_2_1/);
  assert.equal(await t.pid(), first);
  assert.deepEqual(t.follower.errors, []);
});

Deno.test("stand-in API server: bad input: a bad key on the Node keeps the last good settings, is logged, raises a Warning Event on the Node and is kept for the metric", async () => {
  await using cleanup = new Cleanup();
  const t = await setup(cleanup);
  t.editNode((m) => {
    m.labels["bgp.knitter.io/asn"] = "65010";
    m.annotations["bgp.knitter.io/peers"] = PEERS;
  });
  await configHas(t, "local as 65010;", "neighbor 192.0.2.1 as 65000;");
  const good = await t.birdConf();
  const bad: [string, (m: Record<string, Record<string, string>>) => void, RegExp][] = [
    [
      "an ASN out of range",
      (m) => m.labels["bgp.knitter.io/asn"] = "4294967296",
      /bgp\.knitter\.io\/asn: "4294967296"/,
    ],
    [
      "peers that are not JSON",
      (m) => m.annotations["bgp.knitter.io/peers"] = "[{192.0.2.1",
      /bgp\.knitter\.io\/peers: the value is not JSON/,
    ],
    [
      "peers that are not addresses",
      (m) => m.annotations["bgp.knitter.io/peers"] = '[{"address":"tor-1","asn":65000}]',
      /must be an IP address/,
    ],
    [
      "a router ID that is not IPv4",
      (m) => m.labels["bgp.knitter.io/router-id"] = "fd00--1",
      /router-id.*must be an IPv4 address/,
    ],
  ];
  const restore = (m: Record<string, Record<string, string>>) => {
    m.labels = { "bgp.knitter.io/asn": "65010" };
    m.annotations = { "bgp.knitter.io/peers": PEERS };
  };
  for (const [what, edit, message] of bad) {
    t.editNode(edit);
    const event = await eventually(
      `a Warning Event on the Node for ${what}`,
      () =>
        t.api.list("events", "default").find((e) =>
          e.involvedObject.kind === "Node" && e.involvedObject.name === "n1" &&
          e.type === "Warning" && message.test(e.message)
        ),
    );
    assert.equal(event.reason, "BGPSettingsInvalid");
    assert.match(event.message, /write e\.g\./, "says what to write");
    assert.match(event.message, /the last good settings stay/i);
    assert.ok(t.logged.some((l) => message.test(l)), `logged: ${t.logged.join("\n")}`);
    // What the metric knitter_agent_bgp_invalid_keys reads (agent/metrics_test.ts).
    assert.equal(t.follower.errors.length, 1);
    assert.match(t.follower.errors[0].key, /^bgp\.knitter\.io\/(asn|peers|router-id)$/);
    await t.speaker.settled();
    assert.equal(await t.birdConf(), good, `${what}: BIRD keeps the last good settings`);
    // The Node changes for another reason (kubelet's status, a label): the error is not raised
    // again; the watch hands the changes over in order, so by the fix this one was seen.
    t.editNode((m) => m.labels["example.com/touched"] = what.replaceAll(" ", "-"));
    t.editNode(restore);
    await eventually(`${what} fixed`, () => t.follower.errors.length === 0 || undefined);
    const raised = t.api.list("events", "default").filter((e) => message.test(e.message));
    assert.equal(raised.length, 1, `${what}: one Event`);
    assert.equal(t.logged.filter((l) => message.test(l)).length, 1, `${what}: logged once`);
  }
  assert.equal(await t.birdConf(), good);
});
