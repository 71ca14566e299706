/**
 * MultiNetworkPolicy on a second interface, against the stand-in API server: the monitor turns the
 * policy into security groups at a real manager, agents on two simulated nodes with real Open
 * vSwitch compile them, and TCP payloads say who gets through. Pods have two interfaces (eth0 on
 * the default network, net1 on acme's "data"); the policy is for "data" only and lets pods
 * labelled role=client reach the server's TCP port 7000 and nothing else. Relabelling a pod moves
 * the access with it; deleting the policy opens net1 again and leaves no group behind.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import type { StackNode } from "../devstack/stack.ts";
import {
  eventually,
  type KubeCluster,
  networkReady,
  podWithPort,
  portsOfPod,
  startKubeCluster,
} from "./support/kube_cluster.ts";
import { nodeFlows, waitForFlow, waitForPeer } from "./support/flows.ts";
import { addressOf, ipNetnsName } from "./support/pods.ts";
import { tcpExchange } from "./support/traffic.ts";

const PORT = 7000;
/** The open egress group of the stand-in's cluster ("default"). */
const OPEN_EGRESS = "mnp-open-egress-default";
/** What a refused exchange waits before it says so (a bound, not a measure). */
const REFUSED = { seconds: 3 };

interface TestPod {
  name: string;
  netns: string;
  eth0: string;
  net1: string;
}

async function podOn(
  k: KubeCluster,
  node: StackNode,
  name: string,
  labels: Record<string, string>,
): Promise<TestPod> {
  const pod = await k.pod(node, {
    namespace: "acme",
    name,
    annotations: { "k8s.v1.cni.cncf.io/networks": "data" },
  });
  k.api.update("pods", "acme", name, (o) => (o.metadata.labels = labels));
  const added = await pod.cni.add();
  assert.equal(added.code, 0, `ADD ${name}: ${JSON.stringify(added.out)} ${added.stderr}`);
  return {
    name,
    netns: ipNetnsName(pod.cni.netns),
    eth0: addressOf(added.out, "eth0"),
    net1: addressOf(added.out, "net1"),
  };
}

const POLICY = {
  metadata: {
    name: "clients-only",
    namespace: "acme",
    annotations: { "k8s.v1.cni.cncf.io/policy-for": "data" },
  },
  spec: {
    podSelector: { matchLabels: { app: "server" } },
    policyTypes: ["Ingress"],
    ingress: [{
      from: [{ podSelector: { matchLabels: { role: "client" } } }],
      ports: [{ protocol: "TCP", port: PORT }],
    }],
  },
};

Deno.test("stand-in API server: a MultiNetworkPolicy for the second network lets role=client pods reach one TCP port on net1 only, follows relabelling, and goes with the policy", async (t) => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  await networkReady(k, "data", "10.61.0.0/24");
  const server = await podOn(k, n1, "server", { app: "server" });
  const client = await podOn(k, n2, "client", { role: "client" });
  const other = await podOn(k, n1, "other", {});
  const tcp = (from: TestPod, to: string, opts = {}, port = PORT) =>
    tcpExchange(cleanup, from.netns, server.netns, to, 32_000, { port, ...opts });
  const allowed = async (from: TestPod, to: string, what: string) => {
    const r = await tcp(from, to);
    assert.ok(r.ok && r.received === r.sent, `${what}: ${JSON.stringify(r)}`);
  };
  const refused = async (from: TestPod, to: string, what: string, port = PORT) => {
    assert.equal((await tcp(from, to, REFUSED, port)).ok, false, what);
  };
  const groupsOf = async (pod: TestPod) => {
    const ports = (await k.stack.api("GET", `ports?pod=acme/${pod.name}`)).body.items;
    return Object.fromEntries(
      ports.map((p: { interface: string; securityGroups?: string[] }) => [
        p.interface,
        p.securityGroups ?? [],
      ]),
    );
  };

  const groupNames = async () =>
    ((await k.stack.api("GET", "tenants/acme/security-groups")).body.items as { name: string }[])
      .map((g) => g.name).sort();

  await t.step("without a policy every pod reaches the server on both interfaces", async () => {
    await allowed(other, server.net1, "other -> server net1");
    await allowed(client, server.net1, "client -> server net1");
  });

  k.api.create("multi-networkpolicies", POLICY);
  const groups = await eventually("the server's net1 port names the policy's groups", async () => {
    const g = await groupsOf(server);
    return g.net1?.length === 2 ? g : undefined;
  });

  await t.step("the policy becomes groups on the server's net1 port only", async () => {
    assert.deepEqual(groups.eth0, [], "eth0 names no group");
    assert.ok(groups.net1.includes(OPEN_EGRESS), `egress left open: ${groups.net1}`);
    const name = groups.net1.find((g: string) => g !== OPEN_EGRESS);
    assert.match(name, /^mnp-clients-only-data-[0-9a-f]{8}$/);
    const group = (await k.stack.api("GET", `tenants/acme/security-groups/${name}`)).body;
    assert.deepEqual(group.rules, [{
      direction: "ingress",
      protocol: "tcp",
      ports: String(PORT),
      peer: { cidr: `${client.net1}/32` },
    }]);
    assert.match(
      group.description,
      /^knitter-monitor@default: MultiNetworkPolicy acme\/clients-only/,
    );
    for (const pod of [client, other]) {
      assert.deepEqual(Object.values(await groupsOf(pod)).flat(), [], `${pod.name} unrestricted`);
    }
  });

  await waitForPeer(n1, "table=51", `nw_src=${client.net1}`, PORT);
  await t.step(
    "net1: the client gets through on its port only, the unlabelled pod not at all",
    async () => {
      await allowed(client, server.net1, "client -> server net1");
      await refused(client, server.net1, "client -> server net1, another port", PORT + 1);
      await refused(other, server.net1, "other -> server net1 (same node)");
    },
  );

  await t.step("eth0 is untouched for both, and the server's own connections pass", async () => {
    await allowed(other, server.eth0, "other -> server eth0");
    await allowed(client, server.eth0, "client -> server eth0");
    const out = await tcpExchange(cleanup, server.netns, other.netns, other.net1, 32_000, {
      port: PORT,
    });
    assert.ok(out.ok, `server -> other net1 (egress left open): ${JSON.stringify(out)}`);
  });

  await t.step(
    "relabelled, the watches expired meanwhile (410): the access follows the label",
    async () => {
      // The monitor hears of the new labels only from the fresh lists after its watches expired.
      const lists = k.monitor!.stats().lists;
      k.api.stallWatches();
      k.api.update("pods", "acme", "other", (o) => (o.metadata.labels = { role: "client" }));
      k.api.update("pods", "acme", "client", (o) => (o.metadata.labels = {}));
      assert.ok(k.api.expireWatches() > 0);
      await waitForPeer(n1, "table=51", `nw_src=${other.net1}`, PORT);
      await waitForFlow(n1, "table=51", [`nw_src=${client.net1}`], false);
      assert.ok(k.monitor!.stats().lists > lists, "the monitor listed again after the 410");
      await allowed(other, server.net1, "other (now role=client) -> server net1");
      await refused(client, server.net1, "client (label gone) -> server net1");
    },
  );

  await t.step("a monitor restart converges on the same groups, none duplicated", async () => {
    const before = await groupNames();
    await k.stopMonitor();
    const m = await k.startMonitor();
    await m.idle();
    await eventually(
      "the sweep after the restart done",
      () => (m.stats().queued === 0 ? true : undefined),
    );
    assert.deepEqual(await groupNames(), before);
    assert.deepEqual((await groupsOf(server)).net1, groups.net1);
  });

  await t.step("a restart whose pod list comes late strips no port meanwhile", async () => {
    await k.stopMonitor();
    k.api.hangLists(true, "pods");
    const starting = k.startMonitor();
    try {
      // Policies and the manager's ports are in; pods are not: the policies wait for them.
      const m = await eventually("the monitor with policies and ports listed", () => {
        const m = k.monitor;
        const listed = m?.watches().find((w) => w.what === "multi-networkpolicies")?.synced;
        return m && listed && m.portFeed().synced ? m : undefined;
      });
      await m.idle();
      assert.deepEqual((await groupsOf(server)).net1, groups.net1, "the server keeps its groups");
    } finally {
      k.api.hangLists(false);
    }
    await starting;
    await k.monitor!.idle();
    assert.deepEqual((await groupsOf(server)).net1, groups.net1);
  });

  await t.step("the policy deleted: net1 open again, no group of the monitor left", async () => {
    k.api.delete("multi-networkpolicies", "acme", "clients-only");
    await eventually("the monitor's groups gone", async () => {
      const r = await k.stack.api("GET", "tenants/acme/security-groups");
      return r.body.items.length === 0 ? true : undefined;
    });
    assert.deepEqual(Object.values(await groupsOf(server)).flat(), []);
    for (const node of [n1, n2]) {
      await eventually(`${node.name} without ACL flows`, async () => {
        const lines = await nodeFlows(node, "table=51");
        return lines.length === 0 ? true : undefined;
      });
    }
    await allowed(client, server.net1, "client -> server net1");
    await allowed(other, server.net1, "other -> server net1");
  });

  await t.step(
    "a policy deleted while the monitor is down: its groups go when it is back",
    async () => {
      k.api.create("multi-networkpolicies", POLICY);
      await eventually("the policy applied again", async () => {
        return (await groupsOf(server)).net1?.length === 2 ? true : undefined;
      });
      await k.stopMonitor();
      k.api.delete("multi-networkpolicies", "acme", "clients-only");
      await k.startMonitor();
      await eventually("no group of the monitor left", async () => {
        return (await groupNames()).length === 0 ? true : undefined;
      });
      assert.deepEqual(Object.values(await groupsOf(server)).flat(), []);
    },
  );
});

Deno.test("stand-in API server: MultiNetworkPolicy groups go beside a port's own, follow namespace labels for peers, and what cannot be applied is a Warning event on the policy", async (t) => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: [] });
  await k.startMonitor();
  for (const ns of ["acme", "globex"]) {
    k.namespace(ns);
    await k.stack.api("PUT", `tenants/${ns}`); // as the agent does for a namespace's first pod
  }
  // Ports on the public default network "pods", as the agent would make them; no data plane.
  const labelled = async (name: string, namespace: string, labels: Record<string, string>) => {
    await podWithPort(k, name, { namespace });
    k.api.update("pods", namespace, name, (o) => (o.metadata.labels = labels));
    return (await portsOfPod(k, name, namespace))[0];
  };
  const server = await labelled("server", "acme", { app: "server" });
  const g1 = await labelled("g1", "globex", { role: "client" });
  const a1 = await labelled("a1", "acme", { role: "client" });
  const acme = (path: string, method = "GET", body?: unknown) =>
    k.stack.api(method, `tenants/acme/${path}`, body);
  assert.equal((await acme("security-groups", "POST", { name: "mine", rules: [] })).status, 201);
  const mine = await acme(`networks/pods/ports/${server.id}`, "PUT", { securityGroups: ["mine"] });
  assert.equal(mine.status, 200, JSON.stringify(mine.body));
  const serverGroups = async () =>
    (await acme(`networks/pods/ports/${server.id}`)).body.securityGroups ?? [];
  const rulesOf = async (name: string) => (await acme(`security-groups/${name}`)).body.rules;

  k.api.create("multi-networkpolicies", {
    metadata: {
      name: "from-blue",
      namespace: "acme",
      annotations: { "k8s.v1.cni.cncf.io/policy-for": "pods" },
    },
    spec: {
      podSelector: { matchLabels: { app: "server" } },
      ingress: [{
        from: [{
          namespaceSelector: { matchLabels: { team: "blue" } },
          podSelector: { matchLabels: { role: "client" } },
        }],
        ports: [{ protocol: "TCP", port: 80 }],
      }],
    },
  });
  const groups = await eventually("the server's port names the policy's groups", async () => {
    const g = await serverGroups();
    return g.length === 2 ? g : undefined;
  });
  const [own, policyGroup] = groups;
  await t.step(
    "the port keeps its own group; the policy's come after it, no open group",
    async () => {
      assert.equal(own, "mine");
      assert.match(policyGroup, /^mnp-from-blue-pods-[0-9a-f]{8}$/);
      assert.equal(groups.length, 2, `its own group keeps egress as it was: ${groups}`);
      assert.deepEqual(await rulesOf(policyGroup), [], "no namespace is team=blue yet");
    },
  );

  await t.step("a namespace labelled team=blue: its role=client pods become peers", async () => {
    k.api.update("namespaces", undefined, "globex", (o) => (o.metadata.labels = { team: "blue" }));
    const rules = await eventually("the rule from g1", async () => {
      const r = await rulesOf(policyGroup);
      return r.length > 0 ? r : undefined;
    });
    assert.deepEqual(rules, [
      { direction: "ingress", protocol: "tcp", ports: "80", peer: { cidr: `${g1.ip}/32` } },
    ]);
  });

  await t.step("what cannot be applied is said on the policy, once", async () => {
    k.api.create("multi-networkpolicies", {
      metadata: {
        name: "sctp",
        namespace: "acme",
        annotations: { "k8s.v1.cni.cncf.io/policy-for": "pods" },
      },
      spec: { podSelector: {}, ingress: [{ ports: [{ protocol: "SCTP", port: 9 }] }] },
    });
    k.api.create("multi-networkpolicies", {
      metadata: { name: "nowhere", namespace: "acme" },
      spec: { podSelector: {} },
    });
    const events = await eventually("two Warning events", () => {
      const e = k.api.list("events", "acme").filter((e) =>
        e.involvedObject.kind === "MultiNetworkPolicy" &&
        e.reason === "MultiNetworkPolicyNotApplied"
      );
      return e.length === 2 ? e : undefined;
    });
    const about = (name: string) => events.find((e) => e.involvedObject.name === name)!;
    assert.equal(about("sctp").type, "Warning");
    assert.match(
      about("sctp").message,
      /spec\.ingress\[0\]\.ports\[0\]\.protocol: SCTP is not supported/,
    );
    assert.match(about("nowhere").message, /no annotation "k8s\.v1\.cni\.cncf\.io\/policy-for"/);
    await k.monitor!.idle();
    assert.equal(k.api.list("events", "acme").length, events.length, "no repeat");
  });

  await t.step(
    "the policies deleted: the port names its own group only, and only it is left",
    async () => {
      for (const name of ["from-blue", "sctp", "nowhere"]) {
        k.api.delete("multi-networkpolicies", "acme", name);
      }
      await eventually("the monitor's groups gone", async () => {
        const names = (await acme("security-groups")).body.items.map((g: { name: string }) =>
          g.name
        );
        return names.length === 1 ? names : undefined;
      });
      assert.deepEqual(await serverGroups(), ["mine"]);
    },
  );

  await t.step(
    "a group of the monitor's name that the tenant made is left alone, and said",
    async () => {
      const made = await acme("security-groups", "POST", { name: OPEN_EGRESS, rules: [] });
      assert.equal(made.status, 201);
      k.api.create("multi-networkpolicies", {
        metadata: {
          name: "clash",
          namespace: "acme",
          annotations: { "k8s.v1.cni.cncf.io/policy-for": "pods" },
        },
        // a1 names no group of its own: it would need the open egress group.
        spec: { podSelector: { matchLabels: { role: "client" } }, ingress: [{}] },
      });
      const event = await eventually(
        "the clash said on the policy",
        () => k.api.list("events", "acme").find((e) => e.involvedObject.name === "clash"),
      );
      assert.match(
        event.message,
        new RegExp(`"${OPEN_EGRESS}" exists and was not made by this cluster's monitor`),
      );
      const groups = await eventually("the policy's group on a1's port", async () => {
        const g = (await acme(`networks/pods/ports/${a1.id}`)).body.securityGroups ?? [];
        return g.length === 1 ? g : undefined;
      });
      assert.match(groups[0], /^mnp-clash-pods-/, "egress stays closed rather than open theirs");
      assert.deepEqual(await serverGroups(), ["mine"]);
      const theirs = (await acme(`security-groups/${OPEN_EGRESS}`)).body;
      assert.deepEqual([theirs.rules, theirs.description], [[], undefined], "untouched");
    },
  );

  await t.step(
    "a policy for another tenant's private network makes no group there, and says so",
    async () => {
      const made = await k.stack.api("POST", "tenants/globex/networks", {
        name: "secret",
        cidr: "10.77.0.0/24",
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const before = (await acme("security-groups")).body.items.length;
      k.api.create("multi-networkpolicies", {
        metadata: {
          name: "snoop",
          namespace: "acme",
          annotations: { "k8s.v1.cni.cncf.io/policy-for": "globex/secret" },
        },
        spec: { podSelector: {}, ingress: [{}] },
      });
      const event = await eventually(
        "the refusal said on the policy",
        () => k.api.list("events", "acme").find((e) => e.involvedObject.name === "snoop"),
      );
      assert.match(event.message, /"globex\/secret" is tenant "globex"'s private network/);
      await k.monitor!.idle();
      assert.equal((await acme("security-groups")).body.items.length, before, "no group made");
    },
  );
});
