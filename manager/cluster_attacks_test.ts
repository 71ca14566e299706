/**
 * Issue 18, one manager for several clusters: the tokens of one cluster (its agents, its monitor)
 * trying to read, bind, release or see what belongs to another, written first as the hostile
 * requests, then the refusal, that nothing changed, and that the other cluster is unharmed. Then
 * what the clusters share on purpose: a network allowed in both, its ports and tunnel endpoints.
 */
import assert from "node:assert/strict";
import {
  attempt,
  CLUSTER_TOKEN,
  CLUSTER_TOKENS,
  must,
  mustFail,
  net,
  type Reply,
  streamFeed,
  type TestApp,
  testApp,
  TOKEN,
} from "./test_support.ts";
import { ensureDefaultCluster } from "./service/clusters.ts";
import { keys } from "./model.ts";

const TOK = CLUSTER_TOKEN;

const BLUE = "tenants/acme/networks/blue";
const RED = "tenants/globex/networks/red";
const STABLE = "stable:acme:web-0";

/**
 * Clusters east (tenant acme) and west (acme and globex), each with a node named n1 and a
 * monitor; acme's network blue spans both, globex's red is west's only. Token north's cluster is
 * never registered.
 */
async function world(): Promise<TestApp> {
  const t = await testApp({
    tenants: ["acme", "globex"],
    tokens: CLUSTER_TOKENS,
  });
  must(await t.call("POST", "clusters", { name: "east", tenants: ["acme"] }), 201);
  must(await t.call("POST", "clusters", { name: "west", tenants: ["acme", "globex"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/globex/networks", net("red", "10.2.0.0/24")), 201);
  must(await t.call("PUT", "nodes/n1", { underlayIp: "192.0.2.1" }, TOK.eastN1), 201);
  must(await t.call("PUT", "nodes/n1", { underlayIp: "192.0.2.2" }, TOK.westN1), 201);
  return t;
}

/** The same stable port ID (namespace acme, pod web-0) put by n1 of each cluster. */
async function stablePorts(t: TestApp) {
  const pod = { namespace: "acme", name: "web-0" };
  const east = must(await t.call("PUT", `${BLUE}/ports/${STABLE}`, { pod }, TOK.eastN1), 201);
  const west = must(await t.call("PUT", `${BLUE}/ports/${STABLE}`, { pod }, TOK.westN1), 201);
  return { east, west };
}

// ---- names that never collide

Deno.test("clusters: the same node name in two clusters is two nodes, each its cluster's 'n1'", async () => {
  using t = await world();
  const all = must(await t.call("GET", "nodes"), 200).items;
  const byName = Object.fromEntries(all.map((n: { name: string }) => [n.name, n]));
  assert.equal(byName["n1@east"].underlayIp, "192.0.2.1");
  assert.equal(byName["n1@west"].underlayIp, "192.0.2.2");
  assert.equal(byName["n1@east"].cluster, "east");
  // Each agent reads its own node bare, the other cluster's (sharing acme) with its cluster.
  const seenByEast = must(await t.call("GET", "nodes", undefined, TOK.eastN1), 200).items;
  const eastNames = seenByEast.map((n: { name: string }) => n.name).sort();
  assert.deepEqual(eastNames, ["n1", "n1@west"]);
  const own = must(await t.call("GET", "nodes/n1", undefined, TOK.westN1), 200);
  assert.equal(own.underlayIp, "192.0.2.2");
  assert.equal(own.name, "n1");
  const east = must(await t.call("GET", "clusters/east"), 200);
  assert.deepEqual(east.nodes, ["n1"]);
  assert.deepEqual(east.credentials, { monitors: 1, nodes: ["n1"] });
  assert.ok(!JSON.stringify(east).includes(TOK.eastN1), "no token is ever answered");
});

Deno.test("clusters: the same stable pod ID in two clusters gets two ports, each bound to its own n1", async () => {
  using t = await world();
  const { east, west } = await stablePorts(t);
  assert.notEqual(east.ip, west.ip);
  assert.equal(east.id, STABLE);
  assert.equal(west.id, STABLE);
  assert.equal(east.node, "n1");
  assert.equal(west.node, "n1");
  // Asking again in each cluster answers each its own port: the same address as before.
  const pod = { namespace: "acme", name: "web-0" };
  const again = must(await t.call("PUT", `${BLUE}/ports/${STABLE}`, { pod }, TOK.westN1), 200);
  assert.equal(again.ip, west.ip);
  // The admin sees both, told apart by their cluster.
  const ports = must(await t.call("GET", `${BLUE}/ports`), 200).items;
  const ids = ports.map((p: { id: string; node: string }) => `${p.id} ${p.node}`).sort();
  assert.deepEqual(ids, [`${STABLE}@east n1@east`, `${STABLE}@west n1@west`]);
  // Each monitor finds its own pod's port by the pod, never the other cluster's.
  for (const [token, ip] of [[TOK.eastMon, east.ip], [TOK.westMon, west.ip]]) {
    const found = must(await t.call("GET", "ports?pod=acme/web-0", undefined, token), 200).items;
    assert.deepEqual(found.map((p: { ip: string; id: string }) => [p.ip, p.id]), [[ip, STABLE]]);
  }
});

// ---- attacks: a token of east against west

Deno.test("attack: east's monitor cannot release, unbind or read west's port (404, unchanged)", async () => {
  using t = await world();
  const { west } = await stablePorts(t);
  must(await t.call("DELETE", `${BLUE}/ports/${STABLE}`, undefined, TOK.eastN1), 204);
  const req = attempt(t);
  // With the east port gone, the same ID in east names nothing, though west has it.
  mustFail(
    await req("DELETE", `${BLUE}/ports/${STABLE}`, undefined, TOK.eastMon),
    404,
    "not_found",
  );
  mustFail(
    await req("POST", `${BLUE}/ports/${STABLE}/unbind`, undefined, TOK.eastMon),
    404,
    "not_found",
  );
  mustFail(await req("GET", `${BLUE}/ports/${STABLE}`, undefined, TOK.eastMon), 404, "not_found");
  mustFail(await req("DELETE", `${BLUE}/ports/${STABLE}`, undefined, TOK.eastN1), 404, "not_found");
  // Naming west's port by its cluster is refused outright.
  mustFail(
    await req("DELETE", `${BLUE}/ports/${STABLE}@west`, undefined, TOK.eastMon),
    403,
    "forbidden",
    { message: /own cluster/ },
  );
  const still = must(await t.call("GET", `${BLUE}/ports/${STABLE}`, undefined, TOK.westMon), 200);
  assert.equal(still.ip, west.ip);
});

Deno.test("attack: east's monitor sees none of west's ports, neither listed nor in the feed", async () => {
  using t = await world();
  const cursor = must(await t.call("GET", "feed", undefined, TOK.eastMon), 200).cursor;
  await stablePorts(t);
  const listed = must(await t.call("GET", "ports", undefined, TOK.eastMon), 200).items;
  assert.deepEqual(listed.map((p: { id: string; node: string }) => [p.id, p.node]), [[
    STABLE,
    "n1",
  ]]);
  const inNet = must(await t.call("GET", `${BLUE}/ports`, undefined, TOK.eastMon), 200).items;
  assert.equal(inNet.length, 1);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOK.eastMon),
    200,
  );
  const events = page.events.map((e: { type: string; port: { id: string } }) => e.port.id);
  assert.deepEqual(events, [STABLE]);
  // Nor west's nodes.
  const nodes = must(await t.call("GET", "nodes", undefined, TOK.eastMon), 200).items;
  assert.deepEqual(nodes.map((n: { name: string }) => n.name), ["n1"]);
  mustFail(await t.call("GET", "nodes/n1@west", undefined, TOK.eastMon), 403, "forbidden");
});

Deno.test("attack: east's agent cannot register, report for, bind to or query west's node", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(
    await req("PUT", "nodes/n1@west", { underlayIp: "192.0.2.66" }, TOK.eastN1),
    403,
    "forbidden",
  );
  mustFail(
    await req("PUT", "nodes/n1@west/conflicts", { entries: [] }, TOK.eastN1),
    403,
    "forbidden",
  );
  mustFail(await req("GET", "nodes/n1@west", undefined, TOK.eastN1), 403, "forbidden");
  mustFail(await req("GET", "ports?node=n1@west", undefined, TOK.eastN1), 403, "forbidden");
  mustFail(
    await req("PUT", `${BLUE}/ports/p1`, { node: "n1@west" }, TOK.eastN1),
    403,
    "forbidden",
  );
  mustFail(await req("GET", "ports?pod=acme@west/web-0", undefined, TOK.eastN1), 403, "forbidden");
  // west's record is what west's agent registered.
  const n = must(await t.call("GET", "nodes/n1@west"), 200);
  assert.equal(n.underlayIp, "192.0.2.2");
});

Deno.test("attack: a cluster's tokens reach only the tenants and networks it is allowed", async () => {
  using t = await world();
  const req = attempt(t);
  // globex is west's, not east's: east's agent may not make a port there, nor its monitor a network.
  mustFail(await req("PUT", `${RED}/ports/p1`, {}, TOK.eastN1), 403, "forbidden", {
    message: /cluster "east" is not allowed/,
  });
  mustFail(await req("GET", `${RED}/ports`, undefined, TOK.eastN1), 403, "forbidden");
  mustFail(
    await req("POST", "tenants/globex/networks", net("mine", "10.9.0.0/24"), TOK.eastMon),
    403,
    "forbidden",
  );
  mustFail(await req("DELETE", RED, undefined, TOK.eastMon), 403, "forbidden");
  mustFail(await req("PUT", "tenants/globex", undefined, TOK.eastMon), 403, "forbidden");
  mustFail(await req("DELETE", "tenants/globex", undefined, TOK.eastMon), 403, "forbidden");
  // Its own cluster's tenants it serves as the admin token did: their networks (public ones are
  // the admin's: the test below).
  must(await t.call("POST", "tenants/acme/networks", net("own", "10.8.0.0/24"), TOK.eastMon), 201);
  mustFail(await t.call("DELETE", "tenants/acme", undefined, TOK.eastMon), 409, "in_use");
  // A token of a cluster nobody registered reaches nothing.
  mustFail(await req("GET", "ports", undefined, TOK.northN1), 403, "forbidden", {
    message: /Cluster "north" is not registered/,
  });
  // Cluster administration is the admin's.
  mustFail(await req("POST", "clusters", { name: "evil" }, TOK.eastMon), 403, "forbidden");
  mustFail(await req("PATCH", "clusters/east", { tenants: ["*"] }, TOK.eastMon), 403, "forbidden");
  mustFail(await req("DELETE", "clusters/west", undefined, TOK.eastN1), 403, "forbidden");
  const mine = must(await t.call("GET", "clusters", undefined, TOK.eastMon), 200).items;
  assert.deepEqual(mine.map((c: { name: string }) => c.name), ["east"]);
});

Deno.test("attack: a tenant's VLAN network reaches only the clusters attached to its physnet", async () => {
  using t = await world();
  must(
    await t.call("POST", "physnets", { name: "dc1", vlanRanges: [{ start: 100, end: 199 }] }),
    201,
  );
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("vl", "10.3.0.0/24", {
        type: "vlan",
        physnet: "dc1",
      }),
    ),
    201,
  );
  mustFail(
    await t.call("PUT", "tenants/acme/networks/vl/ports/p1", {}, TOK.eastN1),
    403,
    "forbidden",
    {
      message: /physnet "dc1"/,
    },
  );
  must(await t.call("PATCH", "clusters/east", { physnets: ["dc1"] }), 200);
  must(await t.call("PUT", "tenants/acme/networks/vl/ports/p1", {}, TOK.eastN1), 201);
});

// ---- what clusters share on purpose

Deno.test("clusters: an agent follows the other cluster's ports of a shared network, named by their cluster", async () => {
  using t = await world();
  const cursor = must(await t.call("GET", "feed", undefined, TOK.eastN1), 200).cursor;
  const { west } = await stablePorts(t);
  must(await t.call("PUT", `${RED}/ports/g1`, { node: "n1" }, TOK.westN1), 201);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOK.eastN1),
    200,
  );
  const seen = page.events.map((e: { port: { id: string; node: string; ip: string } }) =>
    `${e.port.id} ${e.port.node}`
  );
  // blue is east's too; red (globex) is not, so its port is not east's business.
  assert.deepEqual(seen, [`${STABLE} n1`, `${STABLE}@west n1@west`]);
  // A page of nothing east may see answers no events, and a cursor past them.
  must(await t.call("PUT", `${RED}/ports/g2`, { node: "n1" }, TOK.westN1), 201);
  const quiet = must(
    await t.call("GET", `feed?after=${page.cursor}&timeout=0`, undefined, TOK.eastN1),
    200,
  );
  assert.deepEqual(quiet.events, []);
  assert.notEqual(quiet.cursor, page.cursor);
  const listed = must(await t.call("GET", "ports", undefined, TOK.eastN1), 200).items;
  const wests = listed.filter((p: { id: string }) => p.id === `${STABLE}@west`);
  assert.equal(wests[0].ip, west.ip);
  // The default cluster (every tenant) sees both clusters' nodes as tunnel endpoints.
  const nodes = must(await t.call("GET", "nodes", undefined, TOKEN.worker1), 200).items;
  assert.deepEqual(nodes.map((n: { name: string }) => n.name).sort(), ["n1@east", "n1@west"]);
});

Deno.test("clusters: a tenant sees its ports of every cluster; deleting a cluster waits for its ports, then takes its nodes", async () => {
  using t = await world();
  await stablePorts(t);
  const acme = must(await t.call("GET", "ports", undefined, TOKEN.acme), 200).items;
  assert.equal(acme.length, 2);
  mustFail(await attempt(t)("DELETE", "clusters/west"), 409, "in_use", {
    message: /still has 1 port.*acme\/blue\/stable:acme:web-0@west/,
  });
  must(await t.call("DELETE", `${BLUE}/ports/${STABLE}`, undefined, TOK.westMon), 204);
  must(await t.call("DELETE", "clusters/west"), 204);
  mustFail(await t.call("GET", "clusters/west"), 404, "not_found");
  const nodes = must(await t.call("GET", "nodes"), 200).items;
  assert.deepEqual(nodes.map((n: { name: string }) => n.name), ["n1@east"]);
  mustFail(await t.call("GET", "nodes", undefined, TOK.westN1), 403, "forbidden", {
    message: /Cluster "west" is not registered/,
  });
  // east's port is untouched.
  must(await t.call("GET", `${BLUE}/ports/${STABLE}`, undefined, TOK.eastN1), 200);
  mustFail(await t.call("DELETE", "clusters/default"), 409, "conflict");
});

// ---- upgrade

Deno.test("clusters: a store written before clusters keeps its nodes and ports in the default cluster, recorded at start", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  try {
    let before;
    {
      // What the manager before clusters wrote: bare node names and port IDs, no cluster record.
      using t = await testApp({ path, tenants: ["acme"] });
      must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
      must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.0.2.9" }, TOKEN.worker1), 201);
      before = must(
        await t.call(
          "PUT",
          `${BLUE}/ports/p1`,
          { pod: { namespace: "acme", name: "a" } },
          TOKEN.worker1,
        ),
        201,
      );
      await t.store.commit([], [{ type: "delete", key: keys.cluster("default") }]);
      assert.equal((await t.store.get(keys.cluster("default"))).value, null);
    }
    using t = await testApp({ path });
    assert.equal(await ensureDefaultCluster(t.ctx), true);
    assert.equal(await ensureDefaultCluster(t.ctx), false);
    const d = must(await t.call("GET", "clusters/default"), 200);
    assert.deepEqual([d.tenants, d.physnets, d.nodes], [["*"], ["*"], ["worker1"]]);
    // The old node token still reaches its node and port, by the same names.
    const p = must(await t.call("GET", `${BLUE}/ports/p1`, undefined, TOKEN.worker1), 200);
    assert.deepEqual([p.ip, p.node, p.id], [before.ip, "worker1", "p1"]);
    const again = must(
      await t.call(
        "PUT",
        `${BLUE}/ports/p1`,
        { pod: { namespace: "acme", name: "a" } },
        TOKEN.worker1,
      ),
      200,
    );
    assert.equal(again.ip, before.ip);
    const byPod =
      must(await t.call("GET", "ports?pod=acme/a", undefined, TOKEN.worker1), 200).items;
    assert.equal(byPod.length, 1);
    must(await t.call("DELETE", `${BLUE}/ports/p1`, undefined, TOKEN.worker1), 204);
  } finally {
    // The store's lock file beside it too (kv_store.ts keeps it: unlinking a lock races).
    for (const f of [path, `${path}.lock`]) await Deno.remove(f).catch(() => {});
  }
});

Deno.test("attack: an agent marks another cluster's port in conflict only on a network its cluster shares", async () => {
  using t = await world();
  const { west } = await stablePorts(t);
  const red = must(await t.call("PUT", `${RED}/ports/g1`, { node: "n1" }, TOK.westN1), 201);
  const item = (p: { networkId: string; tenant: string; mac: string }, id: string) => ({
    networkId: p.networkId,
    tenant: p.tenant,
    id,
    field: "mac",
    value: p.mac,
    reason: "remote",
  });
  // east's n1 names west's blue port as its feed shows it, and west's red port, unseen by east.
  const kept = must(
    await t.call("PUT", "nodes/n1/conflicts", {
      items: [item(west, `${STABLE}@west`), item(red, "g1@west")],
    }, TOK.eastN1),
    200,
  );
  assert.deepEqual(kept.items.map((i: { id: string }) => i.id), [`${STABLE}@west`]);
  assert.equal(kept.ignored, 1);
  const shown = must(await t.call("GET", `${RED}/ports/g1@west`), 200);
  assert.equal(shown.conflicts, undefined, "west's red port carries no mark from east");
  const marked = must(await t.call("GET", `${BLUE}/ports/${STABLE}@west`), 200);
  assert.deepEqual(marked.conflicts.map((c: { node: string }) => c.node), ["n1@east"]);
  // Each cluster's agents read the mark in their own names: east's node bare, west's port suffixed.
  const listed = (tok: string) =>
    t.call("GET", "ports", undefined, tok).then((r) =>
      must(r, 200).items.find((p: { networkId: string; mac: string }) => p.mac === west.mac)
    );
  const fromEast = await listed(TOK.eastN1);
  assert.equal(fromEast.id, `${STABLE}@west`);
  assert.deepEqual(fromEast.conflicts.map((c: { node: string }) => c.node), ["n1"]);
  const fromWest = await listed(TOK.westN1);
  assert.equal(fromWest.id, STABLE);
  assert.deepEqual(fromWest.conflicts.map((c: { node: string }) => c.node), ["n1@east"]);
});

Deno.test("clusters: an admin names another cluster's node or port by its suffix, never an unregistered cluster's", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(await req("PUT", "nodes/n9@ghost", { underlayIp: "192.0.2.9" }), 404, "not_found", {
    message: /Cluster "ghost".*POST \/api\/v1\/clusters/,
  });
  mustFail(await req("PUT", `${BLUE}/ports/x@ghost`, {}), 404, "not_found");
  // A port made by the admin in west is west's: its agent reads it bare, east's monitor not at all.
  const made = must(await t.call("PUT", `${BLUE}/ports/x@west`, { node: "n1@west" }), 201);
  assert.deepEqual([made.id, made.node, made.cluster], ["x@west", "n1@west", "west"]);
  const seen = must(await t.call("GET", `${BLUE}/ports/x`, undefined, TOK.westMon), 200);
  assert.deepEqual([seen.id, seen.node], ["x", "n1"]);
  mustFail(await t.call("GET", `${BLUE}/ports/x`, undefined, TOK.eastMon), 404, "not_found");
});

Deno.test("clusters: a delete racing its agents' PUTs leaves either the cluster or none of its ports", async () => {
  for (let round = 0; round < 5; round++) {
    using t = await world();
    const puts = Array.from(
      { length: 20 },
      (_, i) => t.call("PUT", `${BLUE}/ports/r${i}`, { node: "n1" }, TOK.westN1),
    );
    const deleted = await t.call("DELETE", "clusters/west");
    await Promise.all(puts);
    const left = must(await t.call("GET", `${BLUE}/ports`), 200).items
      .filter((p: { cluster?: string }) => p.cluster === "west");
    if (deleted.status === 204) {
      assert.deepEqual(left, [], `round ${round}: no port of the deleted cluster is left`);
      mustFail(await t.call("GET", "clusters/west"), 404, "not_found");
    } else {
      assert.equal(deleted.status, 409, JSON.stringify(deleted.body));
      const west = must(await t.call("GET", "clusters/west"), 200);
      assert.equal(west.deletingSince, undefined, "a refused delete leaves the cluster as it was");
      must(await t.call("PUT", `${BLUE}/ports/after`, { node: "n1" }, TOK.westN1), 201);
    }
  }
});

Deno.test("clusters: a change of what a cluster may use expires its agents' feed, and their new list shows it", async () => {
  using t = await world();
  must(await t.call("PUT", `${RED}/ports/g1`, { node: "n1" }, TOK.westN1), 201);
  const { cursor } = must(await t.call("GET", "feed", undefined, TOK.eastN1), 200);
  const before = must(await t.call("GET", "ports", undefined, TOK.eastN1), 200).items;
  assert.ok(!before.some((p: { network: string }) => p.network === "red"));
  // west's tokens are untouched by east's change.
  const westCursor = must(await t.call("GET", "feed", undefined, TOK.westN1), 200).cursor;
  must(await t.call("PATCH", "clusters/east", { tenants: ["acme", "globex"] }), 200);
  mustFail(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOK.eastN1),
    410,
    "feed_expired",
    { message: /change of this token's cluster/ },
  );
  must(await t.call("GET", `feed?after=${westCursor}&timeout=0`, undefined, TOK.westN1), 200);
  const after = must(await t.call("GET", "ports", undefined, TOK.eastN1), 200).items;
  assert.deepEqual(
    after.filter((p: { network: string }) => p.network === "red").map((p: { id: string }) => p.id),
    ["g1@west"],
  );
  const fresh = must(await t.call("GET", "feed", undefined, TOK.eastN1), 200).cursor;
  must(await t.call("GET", `feed?after=${fresh}&timeout=0`, undefined, TOK.eastN1), 200);
});

Deno.test("attack: east's tokens see none of globex's routers and security groups, neither listed nor in the feed", async () => {
  using t = await world();
  const routed = (tenant: string, name: string, third: number) =>
    t.call("POST", `tenants/${tenant}/networks`, {
      ...net(name, `10.${third}.0.0/24`),
      gateway: `10.${third}.0.1`,
    });
  must(await routed("globex", "green", 4), 201);
  must(await routed("globex", "olive", 6), 201);
  must(await routed("acme", "teal", 5), 201);
  must(await routed("acme", "navy", 7), 201);
  const cursors = {
    east: must(await t.call("GET", "feed", undefined, TOK.eastN1), 200).cursor,
    west: must(await t.call("GET", "feed", undefined, TOK.westN1), 200).cursor,
  };
  const secret = { name: "secret", networks: ["olive", "green"] };
  must(await t.call("POST", "tenants/globex/routers", secret), 201);
  const vault = {
    name: "vault",
    rules: [{
      direction: "ingress",
      protocol: "tcp",
      ports: "5432",
      peer: { cidr: "10.9.9.0/24" },
    }],
  };
  must(await t.call("POST", "tenants/globex/security-groups", vault), 201);
  must(
    await t.call("POST", "tenants/acme/routers", { name: "own", networks: ["navy", "teal"] }),
    201,
  );
  must(await t.call("POST", "tenants/acme/security-groups", { name: "web", rules: [] }), 201);

  const names = (items: { tenant: string; name: string }[]) =>
    items.map((x) => `${x.tenant}/${x.name}`).sort();
  for (const token of [TOK.eastN1, TOK.eastMon]) {
    const routers = must(await t.call("GET", "routers", undefined, token), 200).items;
    assert.deepEqual(names(routers), ["acme/own"], "east's routers");
    const groups = must(await t.call("GET", "security-groups", undefined, token), 200).items;
    assert.deepEqual(names(groups), ["acme/web"], "east's security groups");
  }
  const page = must(
    await t.call("GET", `feed?after=${cursors.east}&timeout=0`, undefined, TOK.eastN1),
    200,
  );
  const text = JSON.stringify(page.events);
  for (const leak of ["secret", "vault", "10.9.9.0", "10.4.0.0", "globex"]) {
    assert.ok(!text.includes(leak), `east's feed names ${leak}: ${text}`);
  }
  assert.deepEqual(
    page.events.map((e: { type: string }) => e.type).sort(),
    ["router", "securityGroup"],
  );
  // west serves globex: it sees them.
  const west = must(await t.call("GET", "routers", undefined, TOK.westN1), 200).items;
  assert.deepEqual(names(west), ["acme/own", "globex/secret"]);
  const westPage = must(
    await t.call("GET", `feed?after=${cursors.west}&timeout=0`, undefined, TOK.westN1),
    200,
  );
  assert.equal(westPage.events.length, 4);
});

// ---- review findings: what a cluster's tokens read of other tenants

Deno.test("attack: east's tokens see no router of globex (not east's tenant), listed or in the feed; west's do", async () => {
  using t = await world();
  const cursors = new Map<string, string>();
  for (const tok of [TOK.eastN1, TOK.eastMon, TOK.westN1, TOK.westMon]) {
    cursors.set(tok, must(await t.call("GET", "feed", undefined, tok), 200).cursor);
  }
  const green = net("green", "10.4.0.0/24", { gateway: "10.4.0.1" });
  must(await t.call("POST", "tenants/globex/networks", green), 201);
  must(await t.call("POST", "tenants/globex/routers", { name: "gx-r", networks: ["green"] }), 201);
  const routerNames = (items: { name: string }[]) => items.map((r) => r.name);
  const feedRouters = async (tok: string) => {
    const page = must(
      await t.call("GET", `feed?after=${cursors.get(tok)}&timeout=0`, undefined, tok),
      200,
    );
    return page.events.filter((e: { type: string }) => e.type === "router")
      .map((e: { router: { name: string } }) => e.router.name);
  };
  for (const tok of [TOK.eastN1, TOK.eastMon]) {
    assert.deepEqual(
      routerNames(must(await t.call("GET", "routers", undefined, tok), 200).items),
      [],
    );
    assert.deepEqual(await feedRouters(tok), []);
  }
  for (const tok of [TOK.westN1, TOK.westMon]) {
    assert.deepEqual(
      routerNames(must(await t.call("GET", "routers", undefined, tok), 200).items),
      ["gx-r"],
    );
    assert.deepEqual(await feedRouters(tok), ["gx-r"]);
  }
  // A network of globex's allowed to east by name lets east's agents see the routers on it.
  must(await t.call("PATCH", "clusters/east", { networks: ["globex/green"] }), 200);
  const seen = must(await t.call("GET", "routers", undefined, TOK.eastN1), 200).items;
  assert.deepEqual(routerNames(seen), ["gx-r"]);
});

Deno.test("attack: east's monitor makes or changes networks only within east's reach; public networks and segment IDs outside the tenant ranges are the admin's", async () => {
  using t = await world();
  for (const [name, start] of [["dc1", 100], ["dc2", 200]] as const) {
    must(
      await t.call("POST", "physnets", { name, vlanRanges: [{ start, end: start + 99 }] }),
      201,
    );
  }
  must(await t.call("PATCH", "clusters/east", { physnets: ["dc1"] }), 200);
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("far", "10.6.0.0/24", {
        type: "vlan",
        physnet: "dc2",
      }),
    ),
    201,
  );
  const req = attempt(t);
  const ACME_NETS = "tenants/acme/networks";
  // A flat network on a physnet east's nodes are not attached to.
  mustFail(
    await req(
      "POST",
      ACME_NETS,
      net("flat2", "10.7.0.0/24", { type: "flat", physnet: "dc2" }),
      TOK.eastMon,
    ),
    403,
    "forbidden",
    { message: /physnet "dc2"/ },
  );
  // A VLAN ID outside the ranges handed to tenants, on east's own physnet.
  mustFail(
    await req(
      "POST",
      ACME_NETS,
      net("v4000", "10.7.1.0/24", { type: "vlan", physnet: "dc1", segmentId: 4000 }),
      TOK.eastMon,
    ),
    403,
    "forbidden",
    { field: "segmentId" },
  );
  // A public network (its addresses would then be refused to every other tenant's networks).
  mustFail(
    await req("POST", ACME_NETS, net("wide", "172.16.0.0/12", { public: true }), TOK.eastMon),
    403,
    "forbidden",
    { field: "public" },
  );
  // Nor change or delete acme's network on dc2, which east may not use.
  mustFail(
    await req("PATCH", `${ACME_NETS}/far`, { description: "mine" }, TOK.eastMon),
    403,
    "forbidden",
  );
  mustFail(await req("DELETE", `${ACME_NETS}/far`, undefined, TOK.eastMon), 403, "forbidden");
  // Within its reach it makes what its cluster's resources ask for.
  const vl = must(
    await t.call(
      "POST",
      ACME_NETS,
      net("vl", "10.7.2.0/24", { type: "vlan", physnet: "dc1" }),
      TOK.eastMon,
    ),
    201,
  );
  assert.ok(vl.segmentId >= 100 && vl.segmentId <= 199, `${vl.segmentId}`);
  must(await t.call("PATCH", `${ACME_NETS}/vl`, { description: "ok" }, TOK.eastMon), 200);
  // The admin still may.
  must(await t.call("POST", ACME_NETS, net("wide", "172.16.0.0/12", { public: true })), 201);
});

Deno.test("clusters: a network of another tenant allowed to a cluster by name is its agents' to use; the tenant's other networks are not", async () => {
  using t = await world();
  must(await t.call("POST", "tenants/globex/networks", net("other", "10.5.0.0/24")), 201);
  must(await t.call("PATCH", "clusters/east", { networks: ["globex/red"] }), 200);
  const port = must(await t.call("PUT", `${RED}/ports/p1`, { node: "n1" }, TOK.eastN1), 201);
  assert.deepEqual([port.id, port.node, port.cluster], ["p1", "n1", "east"]);
  must(await t.call("GET", RED, undefined, TOK.eastN1), 200);
  must(await t.call("GET", `${RED}/ports/p1`, undefined, TOK.eastN1), 200);
  must(await t.call("DELETE", `${RED}/ports/p1`, undefined, TOK.eastN1), 204);
  const req = attempt(t);
  const OTHER = "tenants/globex/networks/other";
  mustFail(await req("PUT", `${OTHER}/ports/p1`, { node: "n1" }, TOK.eastN1), 403, "forbidden");
  mustFail(await req("GET", `${OTHER}/ports`, undefined, TOK.eastN1), 403, "forbidden");
  mustFail(await req("GET", OTHER, undefined, TOK.eastN1), 403, "forbidden");
  // Nor what is globex's alone: its tenant routes.
  mustFail(await req("GET", "tenants/globex/networks", undefined, TOK.eastMon), 403, "forbidden");
});

Deno.test("clusters: a delete mark left behind (a delete that died after marking) is cleared by the next refused delete, and the cluster takes ports again", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/p1`, { node: "n1" }, TOK.westN1), 201);
  // What a manager that died between its mark and its second scan left in the store.
  const west = (await t.store.get<Record<string, unknown>>(keys.cluster("west"))).value!;
  const stale = { ...west, deletingSince: "2026-01-01T00:00:00.000Z" };
  assert.ok(
    (await t.store.commit([], [{ type: "set", key: keys.cluster("west"), value: stale }])).ok,
  );
  mustFail(
    await t.call("PUT", `${BLUE}/ports/p2`, { node: "n1" }, TOK.westN1),
    409,
    "conflict",
  );
  mustFail(await t.call("DELETE", "clusters/west"), 409, "in_use", { message: /still has 1 port/ });
  const after = must(await t.call("GET", "clusters/west"), 200);
  assert.equal(after.deletingSince, undefined, "the refused delete clears the stale mark");
  must(await t.call("PUT", `${BLUE}/ports/p2`, { node: "n1" }, TOK.westN1), 201);
});

Deno.test("clusters: a delete racing node registrations leaves no node of the deleted cluster", async () => {
  for (let round = 0; round < 5; round++) {
    using t = await world();
    const puts = Array.from(
      { length: 20 },
      (_, i) => t.call("PUT", `nodes/r${i}@west`, { underlayIp: `192.0.2.${100 + i}` }),
    );
    const deleted = await t.call("DELETE", "clusters/west");
    const answers = await Promise.all(puts);
    for (const a of answers) assert.ok([201, 404, 409].includes(a.status), JSON.stringify(a));
    const left = must(await t.call("GET", "nodes"), 200).items
      .filter((n: { cluster?: string }) => n.cluster === "west");
    assert.equal(deleted.status, 204, JSON.stringify(deleted.body));
    assert.deepEqual(left, [], `round ${round}: no node of the deleted cluster is left`);
  }
});

Deno.test("clusters: a node registration that read its cluster before the delete's mark and commits after the delete listed its nodes is refused", async () => {
  using t = await world();
  // deno-lint-ignore no-explicit-any
  const store = t.ctx.store as any;
  const get = store.get.bind(store);
  const list = store.list.bind(store);
  let release!: () => void;
  const go = new Promise<void>((r) => release = r);
  let paused = false;
  let hooking = false;
  // The registration stops after its cluster check, before it reads and writes its node ...
  store.get = async (key: unknown[]) => {
    if (!paused && key[0] === "node" && key[1] === "late@west") {
      paused = true;
      await go;
    }
    return get(key);
  };
  const reg = t.call("PUT", "nodes/late@west", { underlayIp: "192.0.2.99" });
  while (!paused) await new Promise((r) => setTimeout(r, 1));
  // ... and goes on, to its commit, once the delete has listed the cluster's nodes.
  store.list = (prefix: unknown[], ...rest: unknown[]) => {
    const it = list(prefix, ...rest);
    if (!hooking || prefix.length !== 1 || prefix[0] !== "node") return it;
    hooking = false;
    return (async function* () {
      const entries = [];
      for await (const e of it) entries.push(e);
      release();
      await reg;
      yield* entries;
    })();
  };
  hooking = true;
  const deleted = await t.call("DELETE", "clusters/west");
  const registered = await reg;
  const left = must(await t.call("GET", "nodes"), 200).items
    .filter((n: { cluster?: string }) => n.cluster === "west");
  if (deleted.status === 204) {
    assert.deepEqual(
      left,
      [],
      `the late node is left of the deleted cluster: ${registered.status}`,
    );
  } else {
    assert.equal(registered.status, 201);
  }
});

Deno.test("attack: a cluster's monitor reads no address history, not even its own tenants' (their other clusters' ports are in it)", async () => {
  using t = await testApp({
    tenants: ["acme"],
    historyRetentionDays: 30,
    tokens: [{ token: TOK.eastMon, scope: "monitor", cluster: "east" }],
  });
  must(await t.call("POST", "clusters", { name: "east", tenants: ["acme"] }), 201);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const { ip } = must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  const HISTORY = `tenants/acme/history?ip=${ip}`;
  mustFail(await attempt(t)("GET", HISTORY, undefined, TOK.eastMon), 403, "forbidden");
  assert.equal(must(await t.call("GET", HISTORY), 200).items.length, 1);
  assert.equal(must(await t.call("GET", HISTORY, undefined, TOKEN.acme), 200).items.length, 1);
});

Deno.test("attack: followers of two clusters asking from one cursor at once never share a page", async () => {
  using t = await world();
  const cursors = {
    east: must(await t.call("GET", "feed", undefined, TOK.eastN1), 200).cursor,
    west: must(await t.call("GET", "feed", undefined, TOK.westN1), 200).cursor,
  };
  must(await t.call("PUT", `${RED}/ports/g1`, { node: "n1" }, TOK.westN1), 201);
  must(await t.call("PUT", `${BLUE}/ports/b1`, { node: "n1" }, TOK.westN1), 201);
  // Both read the same events after the same position: each page is made for its own cluster.
  const [east, west, eastAgain] = await Promise.all([
    t.call("GET", `feed?after=${cursors.east}&timeout=0`, undefined, TOK.eastN1),
    t.call("GET", `feed?after=${cursors.west}&timeout=0`, undefined, TOK.westN1),
    t.call("GET", `feed?after=${cursors.east}&timeout=0`, undefined, TOK.eastN1),
  ]);
  const ids = (r: Reply) => must(r, 200).events.map((e: { port: { id: string } }) => e.port.id);
  assert.deepEqual(ids(east), ["b1@west"]);
  assert.deepEqual(ids(eastAgain), ["b1@west"]);
  assert.deepEqual(ids(west), ["g1", "b1"]);
});

// ---- issue 32: the same, streamed (feed_streams.ts)

Deno.test("attack: east's agent streaming the feed gets none of globex's ports or groups; west's stream does", async () => {
  using t = await world();
  const cursors = {
    east: must(await t.call("GET", "feed", undefined, TOK.eastN1), 200).cursor,
    west: must(await t.call("GET", "feed", undefined, TOK.westN1), 200).cursor,
  };
  const east = await streamFeed(t, TOK.eastN1, cursors.east);
  const west = await streamFeed(t, TOK.westN1, cursors.west);
  assert.deepEqual((await east.next()).events, []);
  assert.deepEqual((await west.next()).events, []);
  // globex's things first (only west may see them), then a port of blue (both clusters').
  must(await t.call("PUT", `${RED}/ports/g1`, { node: "n1" }, TOK.westN1), 201);
  must(await t.call("POST", "tenants/globex/security-groups", { name: "vault", rules: [] }), 201);
  must(await t.call("PUT", `${BLUE}/ports/b1`, { node: "n1" }, TOK.westN1), 201);

  const eastPage = await east.next();
  const text = JSON.stringify(eastPage);
  for (const leak of ["g1", "vault", "globex", "10.2.0."]) {
    assert.ok(!text.includes(leak), `east's stream names ${leak}: ${text}`);
  }
  assert.deepEqual(
    eastPage.events.map((e: { port: { id: string; node: string } }) =>
      `${e.port.id} ${e.port.node}`
    ),
    ["b1@west n1@west"],
  );
  const westSeen: string[] = [];
  while (!westSeen.includes("port b1")) {
    for (const e of (await west.next()).events) {
      westSeen.push(`${e.type} ${e[e.type].id ?? e[e.type].name}`);
    }
  }
  assert.deepEqual(westSeen, ["port g1", "securityGroup vault", "port b1"]);
  await east.cancel();
  await west.cancel();
});

Deno.test("clusters: a change of what a cluster may use ends its agents' streams with feed_expired; west's streams go on", async () => {
  using t = await world();
  const east = await streamFeed(
    t,
    TOK.eastN1,
    must(await t.call("GET", "feed", undefined, TOK.eastN1), 200).cursor,
  );
  const west = await streamFeed(
    t,
    TOK.westN1,
    must(await t.call("GET", "feed", undefined, TOK.westN1), 200).cursor,
  );
  await east.next();
  await west.next();
  must(await t.call("PATCH", "clusters/east", { tenants: ["acme", "globex"] }), 200);
  must(await t.call("PUT", `${BLUE}/ports/b1`, { node: "n1" }, TOK.westN1), 201);
  const last = await east.next();
  assert.equal(last.error.code, "feed_expired");
  assert.match(last.error.message, /cluster "east" may use changed/);
  assert.equal(await east.next(), undefined, "the stream ends after its error line");
  const page = await west.next();
  assert.deepEqual(page.events.map((e: { port: { id: string } }) => e.port.id), ["b1"]);
  await west.cancel();
});
