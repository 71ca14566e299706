/**
 * The policy reconciler's control-plane decisions against an in-memory manager
 * (mnp_manager_fake.ts): fail closed when a policy's group cannot be written, open groups only
 * for ports with no groups to start from, network defaults followed while selected and given back
 * after, no port ever made, each cluster's groups its own, no group on another tenant's private
 * network, and an event that failed is sent again.
 */
import assert from "node:assert/strict";
import { createLogger, type Port } from "@knitter/common";
import { ManagerFake } from "./mnp_manager_fake.ts";
import { PolicyGroups } from "./mnp_groups.ts";
import { PolicyReconciler } from "./mnp_reconciler.ts";
import type { MultiNetworkPolicy, PolicyPort } from "./mnp_types.ts";
import { Tenants } from "./namespaces.ts";

const log = createLogger("mnp-test", "error");
const EAST = new PolicyGroups("east");

function pod(namespace: string, name: string, labels: Record<string, string>) {
  return { metadata: { namespace, name, uid: `u-${name}`, labels } };
}

function port(p: { name: string; tenant: string; net: string; ip: string }): Port {
  return {
    id: `${p.name}-${p.net}`,
    tenant: p.tenant,
    network: p.net.replace(/^n-/, ""),
    networkTenant: p.net === "n-pub" ? "admin" : p.net === "n-secret" ? "globex" : p.tenant,
    networkId: p.net,
    ip: p.ip,
    pod: { namespace: p.tenant, name: p.name, uid: `u-${p.name}` },
    interface: "net1",
  } as Port;
}

/** acme (web, client c1 on data and pub) and globex (g1 on its private secret). */
function world() {
  const m = new ManagerFake();
  for (const t of ["acme", "globex", "admin"]) m.tenants.add(t);
  m.networks.push(
    { id: "n-data", tenant: "acme", name: "data" },
    { id: "n-pub", tenant: "admin", name: "pub", public: true },
    { id: "n-secret", tenant: "globex", name: "secret" },
  );
  m.namespaces.push(pod("", "acme", {}), pod("", "globex", {}));
  m.pods.push(
    pod("acme", "web", { app: "web" }),
    pod("acme", "c1", { role: "client" }),
    pod("globex", "g1", { role: "client" }),
  );
  m.ports.push(
    port({ name: "web", tenant: "acme", net: "n-data", ip: "10.0.0.10" }),
    port({ name: "c1", tenant: "acme", net: "n-data", ip: "10.0.0.4" }),
    port({ name: "web", tenant: "acme", net: "n-pub", ip: "10.9.0.10" }),
    port({ name: "g1", tenant: "globex", net: "n-secret", ip: "10.5.0.20" }),
  );
  const reconciler = (names = EAST) =>
    new PolicyReconciler(
      m.asKube(),
      m.asManager(),
      new Tenants(m.asManager(), log),
      m.sources(),
      names,
      1000,
      log,
    );
  return { m, r: reconciler(), reconciler };
}

/** web may be reached from role=client pods on `ports` (every port when none). */
function clientsOnly(policyFor = "data", ports?: PolicyPort[]): MultiNetworkPolicy {
  return {
    metadata: {
      namespace: "acme",
      name: "clients-only",
      uid: "u-p",
      annotations: { "k8s.v1.cni.cncf.io/policy-for": policyFor },
    },
    spec: {
      podSelector: { matchLabels: { app: "web" } },
      ingress: [{ from: [{ podSelector: { matchLabels: { role: "client" } } }], ports }],
    },
  };
}

const groupsOf = (m: ManagerFake, id = "web-n-data") => m.port("acme", id)?.securityGroups;
const G = EAST.nameOf(clientsOnly(), { tenant: "acme", name: "data" });
const OPEN_EGRESS = EAST.open.egress.name;

Deno.test("fail closed: a policy's group past 64 rules is written with none, stays on its ports and is not deleted", async () => {
  const { m, r } = world();
  m.policies.push(clientsOnly());
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), [G, OPEN_EGRESS]);
  const many = Array.from({ length: 65 }, (_, i) => ({ protocol: "TCP", port: 1000 + i }));
  m.policies[0] = clientsOnly("data", many);
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), [G, OPEN_EGRESS], "the port keeps the policy's group");
  assert.deepEqual(m.groups.get(`acme/${G}`)?.rules, [], "no rule: ingress closed");
  assert.match(m.events.at(-1)!.message, /65 rules, more than the 64/);
});

Deno.test("fail closed: a group the manager refuses to change keeps its last rules and its ports", async () => {
  const { m, r } = world();
  m.policies.push(clientsOnly());
  await r.reconcile("acme");
  const before = m.groups.get(`acme/${G}`)!.rules;
  m.refuse.add(G);
  m.policies[0] = clientsOnly("data", [{ protocol: "TCP", port: 80 }]);
  await r.reconcile("acme");
  assert.ok(m.groups.has(`acme/${G}`), "not deleted");
  assert.deepEqual(m.groups.get(`acme/${G}`)!.rules, before);
  assert.deepEqual(groupsOf(m), [G, OPEN_EGRESS]);
  assert.match(m.events.at(-1)!.message, /refused security group .*keeps its last rules/);
});

Deno.test("open groups: only on a port with no groups to start from; a port's own groups are not widened", async () => {
  const { m, r } = world();
  m.groups.set("acme/own", { tenant: "acme", name: "own", rules: [] } as never);
  m.ports[0] = { ...m.ports[0], securityGroups: ["own"] };
  m.policies.push(clientsOnly());
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), ["own", G], "no open egress beside its own group");
  m.policies.length = 0;
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), ["own"]);
});

Deno.test("network defaults: followed while selected, and a port with no list of its own goes back to none", async () => {
  const { m, r, reconciler } = world();
  for (const d of ["d1", "d2"]) {
    m.groups.set(`acme/${d}`, { tenant: "acme", name: d, rules: [] } as never);
  }
  m.networks[0].defaults = ["d1"];
  m.policies.push(clientsOnly());
  await r.reconcile("acme");
  const marker = EAST.defaults.name;
  assert.deepEqual(groupsOf(m), ["d1", marker, G], "defaults stay in force, no open group");
  m.networks[0].defaults = ["d2"];
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), ["d2", marker, G], "the network's new defaults");
  // A restart in between: nothing in memory, the marker on the port says what it had.
  m.policies.length = 0;
  await reconciler().reconcile("acme");
  assert.equal(groupsOf(m), undefined, "no list of its own, as before");
  assert.ok(!m.groups.has(`acme/${marker}`) && !m.groups.has(`acme/${G}`), "groups deleted");
});

Deno.test("ports: never made; a released port stays released, a group gone missing is said", async () => {
  const { m, r } = world();
  m.policies.push(clientsOnly());
  const released = m.ports.splice(0, 1)[0];
  const sources = m.sources();
  const stale = {
    ...sources,
    forPod: (uid: string) => [...sources.forPod(uid), ...(uid === "u-web" ? [released] : [])],
  };
  const r2 = new PolicyReconciler(
    m.asKube(),
    m.asManager(),
    new Tenants(m.asManager(), log),
    stale,
    EAST,
    1000,
    log,
  );
  await r2.reconcile("acme");
  assert.equal(m.port("acme", "web-n-data"), undefined, "not made again");
  assert.equal(m.events.length, 0, "a released port is no problem");
  m.ports.unshift(released);
  m.vanish.add(OPEN_EGRESS);
  await r.reconcile("acme");
  assert.match(m.events.at(-1)!.message, /refused the groups of port web-n-data.*does not exist/);
});

Deno.test("clusters: each monitor names, marks and deletes only its own groups", async () => {
  const { m, r, reconciler } = world();
  const west = reconciler(new PolicyGroups("west"));
  m.policies.push(clientsOnly());
  await west.reconcile("acme");
  const westG = new PolicyGroups("west").nameOf(clientsOnly(), { tenant: "acme", name: "data" });
  assert.notEqual(westG, G);
  m.policies.length = 0;
  await r.reconcile("acme"); // east: no policy; west's groups are not its own
  assert.ok(m.groups.has(`acme/${westG}`), "west's group left alone");
  assert.ok(groupsOf(m)!.includes(westG));
});

Deno.test("policy-for: another tenant's private network makes no group and is said; a public one is fine", async () => {
  const { m, r } = world();
  m.policies.push(clientsOnly("globex/secret"));
  await r.reconcile("acme");
  assert.equal([...m.groups.keys()].filter((k) => k.startsWith("acme/")).length, 0);
  assert.match(m.events.at(-1)!.message, /"globex\/secret" is tenant "globex"'s private network/);
  m.policies[0] = clientsOnly("pub");
  await r.reconcile("acme");
  assert.equal(groupsOf(m, "web-n-pub")?.length, 2);
});

Deno.test("events: one that failed is sent again on the next run", async () => {
  const { m, r } = world();
  m.policies.push(clientsOnly("globex/secret"));
  m.failEvents = 1;
  await assert.rejects(() => r.reconcile("acme"), /events unavailable/);
  await r.reconcile("acme");
  assert.equal(m.events.length, 1);
});

Deno.test("fail closed: a policy whose policy-for cannot be worked out any more keeps its groups on its ports", async () => {
  const { m, r } = world();
  m.policies.push(clientsOnly());
  await r.reconcile("acme");
  m.policies[0] = clientsOnly("Data/x/y");
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), [G, OPEN_EGRESS], "kept while the annotation is wrong");
  assert.ok(m.groups.has(`acme/${G}`));
  assert.match(m.events.at(-1)!.message, /policy-for: "Data\/x\/y" is not/);
  m.policies[0] = clientsOnly("nosuch");
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), [G, OPEN_EGRESS], "kept while its network cannot be found");
  m.policies.length = 0;
  await r.reconcile("acme");
  assert.equal(groupsOf(m), undefined, "the policy deleted: its groups go");
});

Deno.test("upgrade: groups of the monitor's first mark (no cluster) leave the ports it manages and go", async () => {
  const { m, r } = world();
  const legacy = (name: string) =>
    m.groups.set(`acme/${name}`, {
      tenant: "acme",
      name,
      description: "knitter-monitor: MultiNetworkPolicy acme/clients-only for network acme/data",
      rules: [],
    } as never);
  legacy("mnp-clients-only-data-00000000");
  legacy("mnp-open-egress");
  m.groups.set("acme/d1", { tenant: "acme", name: "d1", rules: [] } as never);
  m.networks[0].defaults = ["d1"];
  // web: selected under the first version; c1: its defaults pinned by it, no longer selected.
  m.ports[0] = {
    ...m.ports[0],
    securityGroups: ["mnp-clients-only-data-00000000", "mnp-open-egress"],
  };
  m.ports[1] = { ...m.ports[1], securityGroups: ["d1", "mnp-clients-only-data-00000000"] };
  m.policies.push(clientsOnly());
  await r.reconcile("acme");
  assert.deepEqual(groupsOf(m), ["d1", EAST.defaults.name, G]);
  assert.equal(groupsOf(m, "c1-n-data"), undefined, "no list of its own, as before");
  assert.ok(!m.groups.has("acme/mnp-open-egress"), "the first version's groups deleted");
  assert.ok(!m.groups.has("acme/mnp-clients-only-data-00000000"));
});
