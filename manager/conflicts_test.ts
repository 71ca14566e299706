/**
 * Conflicts in ports' status (service/conflicts.ts): the attacks first (a node speaking for
 * another, a tenant reporting, a node inventing a claim, naming its own or an unknown port), then
 * what a port shows, how a report replaces the last one, and how a tenant sees the other claimant.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { keys } from "./model.ts";
import { repairStore } from "./repair.ts";
import { reportConflicts } from "./service/conflicts.ts";
import { deleteNode } from "./service/nodes.ts";
import {
  failCommitsFrom,
  must,
  mustFail,
  net,
  type TestApp,
  testApp,
  TOKEN,
  unchanged,
} from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";
const GREEN = "tenants/globex/networks/green";

interface World {
  t: TestApp;
  /** acme's port on worker2 (blue). */
  remote: { networkId: string; id: string; ip: string; mac: string };
  /** acme's port on worker1 (blue): worker1's own. */
  own: { networkId: string; id: string; ip: string };
  /** globex's port on worker2 (its network green). */
  foreign: { networkId: string; id: string; ip: string };
}

async function world(): Promise<World> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/globex/networks", net("green", "10.200.0.0/24")), 201);
  must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.168.1.1" }, TOKEN.worker1), 201);
  must(await t.call("PUT", "nodes/worker2", { underlayIp: "192.168.1.2" }, TOKEN.worker2), 201);
  const remote = must(await t.call("PUT", `${BLUE}/ports/r1`, { node: "worker2" }), 201);
  const own = must(await t.call("PUT", `${BLUE}/ports/o1`, { node: "worker1" }), 201);
  const foreign = must(
    await t.call("PUT", `${GREEN}/ports/g1`, { node: "worker2" }, TOKEN.worker2),
    201,
  );
  return { t, remote, own, foreign };
}

function item(
  p: { networkId: string; id: string },
  more: Record<string, unknown> & { value: string },
) {
  return {
    networkId: p.networkId,
    tenant: "acme",
    id: p.id,
    field: "ip",
    reason: "local",
    ...more,
  };
}

async function portConflicts(t: TestApp, path: string, token?: string) {
  return must(await t.call("GET", path, undefined, token), 200).conflicts;
}

// ---- attacks

Deno.test("conflicts attack: a node cannot report for another node, a tenant not at all", async () => {
  const { t, remote } = await world();
  using _ = t;
  const report = { items: [item(remote, { value: remote.ip })] };
  await unchanged(t, async () => {
    mustFail(
      await t.call("PUT", "nodes/worker1/conflicts", report, TOKEN.worker2),
      403,
      "forbidden",
    );
    mustFail(await t.call("PUT", "nodes/worker1/conflicts", report, TOKEN.acme), 403, "forbidden");
    mustFail(
      await t.call("GET", "nodes/worker1/conflicts", undefined, TOKEN.acme),
      403,
      "forbidden",
    );
  });
  assert.equal(await portConflicts(t, `${BLUE}/ports/r1`), undefined);
});

Deno.test("conflicts attack: a node cannot invent a claim, nor mark its own, an unbound or an unknown port", async () => {
  const { t, remote, own } = await world();
  using _ = t;
  must(await t.call("PUT", `${BLUE}/ports/loose`, {}), 201);
  const loose = must(await t.call("GET", `${BLUE}/ports/loose`), 200);
  const forged = {
    items: [
      item(remote, { value: "10.1.0.77" }), // an address the port does not hold
      item(remote, { field: "mac", value: "02:00:00:00:00:99" }), // nor that MAC
      item(remote, { value: remote.ip, tenant: "globex" }), // another tenant's port of that ID
      item(own, { value: own.ip }), // the node's own port is no remote entry of it
      item(loose, { value: loose.ip }), // a port on no node is in no node's view
      item({ networkId: remote.networkId, id: "ghost" }, { value: "10.1.0.78" }),
      item({ networkId: "no-such-network", id: "r1" }, { value: remote.ip }),
    ],
  };
  const r = must(await t.call("PUT", "nodes/worker1/conflicts", forged, TOKEN.worker1), 200);
  assert.deepEqual(r.items, []);
  assert.equal(r.ignored, forged.items.length);
  for (const id of ["r1", "o1", "loose"]) {
    assert.equal(await portConflicts(t, `${BLUE}/ports/${id}`), undefined, id);
  }
  assert.deepEqual(
    must(await t.call("GET", `${BLUE}/ports`), 200).items.filter((p: { conflicts?: unknown }) =>
      p.conflicts
    ),
    [],
  );
  // Malformed reports are refused whole.
  await unchanged(t, async () => {
    mustFail(
      await t.call("PUT", "nodes/worker1/conflicts", {
        items: [{ ...item(remote, { value: remote.ip }), reason: "invalid" }],
      }, TOKEN.worker1),
      400,
      "invalid_request",
    );
    mustFail(
      await t.call("PUT", "nodes/worker1/conflicts", {
        items: Array.from({ length: 1001 }, () => item(remote, { value: remote.ip })),
      }, TOKEN.worker1),
      400,
      "invalid_request",
    );
  });
});

Deno.test("conflicts attack: a report replaces only the reporting node's record", async () => {
  const { t, remote, own } = await world();
  using _ = t;
  must(
    await t.call(
      "PUT",
      "nodes/worker1/conflicts",
      { items: [item(remote, { value: remote.ip })] },
      TOKEN.worker1,
    ),
    200,
  );
  // worker2 reports its own view (a conflict on worker1's port), then clears it: worker1's stays.
  must(
    await t.call(
      "PUT",
      "nodes/worker2/conflicts",
      { items: [item(own, { value: own.ip })] },
      TOKEN.worker2,
    ),
    200,
  );
  must(await t.call("PUT", "nodes/worker2/conflicts", { items: [] }, TOKEN.worker2), 200);
  const c = await portConflicts(t, `${BLUE}/ports/r1`);
  assert.deepEqual(c.map((x: { node: string }) => x.node), ["worker1"]);
  assert.equal(await portConflicts(t, `${BLUE}/ports/o1`), undefined);
});

// ---- what a port shows

Deno.test("conflicts: the port shows who leaves it out, on what, since when, until the node clears it", async () => {
  const { t, remote } = await world();
  using _ = t;
  const report = {
    items: [item(remote, { value: remote.ip, with: { tenant: "acme", id: "gone-pod" } })],
  };
  const first = must(await t.call("PUT", "nodes/worker1/conflicts", report, TOKEN.worker1), 200);
  assert.equal(first.ignored, 0);
  const since = first.items[0].since;
  const want = [{
    node: "worker1",
    field: "ip",
    value: remote.ip,
    reason: "local",
    with: { tenant: "acme", id: "gone-pod" },
    since,
  }];
  assert.deepEqual(await portConflicts(t, `${BLUE}/ports/r1`), want);
  assert.deepEqual(await portConflicts(t, `${BLUE}/ports/r1`, TOKEN.acme), want);
  const listed = (path: string) =>
    t.call("GET", path).then((r) => must(r, 200).items.find((p: { id: string }) => p.id === "r1"));
  assert.deepEqual((await listed(`${BLUE}/ports`)).conflicts, want);
  assert.deepEqual((await listed("ports?tenant=acme")).conflicts, want);
  assert.deepEqual(
    must(await t.call("GET", "nodes/worker1/conflicts", undefined, TOKEN.worker1), 200).items
      .map((i: { since: string }) => i.since),
    [since],
  );

  // Reported again unchanged: the same since. Cleared: gone everywhere.
  await new Promise((r) => setTimeout(r, 5));
  const again = must(await t.call("PUT", "nodes/worker1/conflicts", report, TOKEN.worker1), 200);
  assert.equal(again.items[0].since, since);
  must(await t.call("PUT", "nodes/worker1/conflicts", { items: [] }, TOKEN.worker1), 200);
  assert.equal(await portConflicts(t, `${BLUE}/ports/r1`), undefined);
  assert.equal((await listed(`${BLUE}/ports`)).conflicts, undefined);
  assert.deepEqual(
    must(await t.call("GET", "nodes/worker1/conflicts", undefined, TOKEN.worker1), 200).items,
    [],
  );
});

Deno.test("conflicts: an entry no longer shown once its port is released; forgetting the node drops its record", async () => {
  const { t, remote } = await world();
  using _ = t;
  must(
    await t.call(
      "PUT",
      "nodes/worker1/conflicts",
      { items: [item(remote, { field: "mac", value: remote.mac.toUpperCase() })] },
      TOKEN.worker1,
    ),
    200,
  );
  assert.equal((await portConflicts(t, `${BLUE}/ports/r1`))[0].value, remote.mac);
  must(await t.call("DELETE", `${BLUE}/ports/r1`), 204);
  // The same ID again, with another address and MAC: the old claim does not match it.
  must(await t.call("PUT", `${BLUE}/ports/r1`, { node: "worker2" }), 201);
  assert.equal(await portConflicts(t, `${BLUE}/ports/r1`), undefined);
  must(await t.call("DELETE", "nodes/worker1"), 204);
  assert.deepEqual(must(await t.call("GET", "nodes/worker1/conflicts"), 200).items, []);
});

Deno.test("conflicts: a tenant sees the other claimant only when it is its own port", async () => {
  const { t, foreign } = await world();
  using _ = t;
  must(
    await t.call("PUT", "nodes/worker1/conflicts", {
      items: [{
        networkId: foreign.networkId,
        tenant: "globex",
        id: foreign.id,
        field: "ip",
        value: foreign.ip,
        reason: "local",
        with: { tenant: "acme", id: "acme-pod" },
      }],
    }, TOKEN.worker1),
    200,
  );
  const asGlobex = await portConflicts(t, `${GREEN}/ports/g1`, TOKEN.globex);
  assert.equal(asGlobex.length, 1);
  assert.equal(asGlobex[0].with, undefined);
  assert.equal(asGlobex[0].node, "worker1");
  const asAdmin = must(await t.call("GET", "ports?node=worker2"), 200).items
    .find((p: { id: string }) => p.id === "g1").conflicts;
  assert.deepEqual(asAdmin[0].with, { tenant: "acme", id: "acme-pod" });
  // acme never sees globex's port, conflict or not.
  mustFail(await t.call("GET", `${GREEN}/ports/g1`, undefined, TOKEN.acme), 404, "not_found");
});

Deno.test("conflicts: forgetting a node drops its record in the node's own commit", async () => {
  const { t, remote } = await world();
  using _ = t;
  must(
    await t.call(
      "PUT",
      "nodes/worker1/conflicts",
      { items: [item(remote, { value: remote.ip })] },
      TOKEN.worker1,
    ),
    200,
  );
  // The store answers one commit, then fails: the node's own commit takes its report along; the
  // report's entries, which go after it, stay for `check --repair`.
  const restore = failCommitsFrom(t, 2);
  try {
    mustFail(await t.call("DELETE", "nodes/worker1"), 503, "store_unavailable");
  } finally {
    restore();
  }
  mustFail(await t.call("GET", "nodes/worker1"), 404, "not_found");
  assert.equal((await t.store.get(keys.conflicts("worker1"))).value, null);
  assert.equal(await portConflicts(t, `${BLUE}/ports/r1`), undefined);
  assert.deepEqual(must(await t.call("GET", "nodes/worker1/conflicts"), 200).items, []);
  assert.match(
    (await checkStore(t.store)).problems.join(),
    /1 entry\(ies\) of generation .*its drop was interrupted/,
  );
  await repairStore(t.store);
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("conflicts: another replica's reports are answered at once (the records read again when one changed)", async () => {
  const { t, remote } = await world();
  using _ = t;
  // Another manager on the same store: its own context, so none of this one's memory.
  const replica = { ...t.ctx };
  const report = (items: ReturnType<typeof item>[]) =>
    reportConflicts(replica, {
      node: "worker1",
      report: { items } as Parameters<typeof reportConflicts>[1]["report"],
    });
  assert.equal(await portConflicts(t, `${BLUE}/ports/r1`), undefined);
  await report([item(remote, { value: remote.ip })]);
  assert.equal((await portConflicts(t, `${BLUE}/ports/r1`))[0].field, "ip");
  await report([item(remote, { field: "mac", value: remote.mac })]);
  assert.equal((await portConflicts(t, `${BLUE}/ports/r1`))[0].field, "mac");
  await report([]);
  assert.equal(await portConflicts(t, `${BLUE}/ports/r1`), undefined);
  await report([item(remote, { value: remote.ip })]);
  assert.equal((await portConflicts(t, `${BLUE}/ports/r1`)).length, 1);
  await deleteNode(replica, "worker1");
  assert.equal(await portConflicts(t, `${BLUE}/ports/r1`), undefined);
});

Deno.test("conflicts: a report kept by an older manager (its entries inline) is read, and the next one replaces it", async () => {
  const { t, remote } = await world();
  using _ = t;
  const since = "2026-11-01T00:00:00.000Z";
  const old = { ...item(remote, { value: remote.ip }), since };
  await t.store.commit([], [{
    type: "set",
    key: keys.conflicts("worker1"),
    value: { node: "worker1", updatedAt: since, items: [old] },
  }]);
  assert.deepEqual(
    must(await t.call("GET", "nodes/worker1/conflicts"), 200).items,
    [old],
  );
  assert.equal((await portConflicts(t, `${BLUE}/ports/r1`))[0].since, since);
  const both = [
    item(remote, { value: remote.ip }),
    item(remote, { field: "mac", value: remote.mac }),
  ];
  must(await t.call("PUT", "nodes/worker1/conflicts", { items: both }, TOKEN.worker1), 200);
  const now = must(await t.call("GET", "nodes/worker1/conflicts"), 200).items;
  assert.deepEqual(now.map((i: { field: string }) => i.field), ["ip", "mac"]);
  assert.equal(now[0].since, since, "the entry that stays keeps its since");
  assert.deepEqual((await checkStore(t.store)).problems, []);
});
