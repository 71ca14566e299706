/**
 * Address history (service/history.ts): who held an address or MAC when, written in the commits
 * that allocate, release, unbind and bind ports; served to the owning tenant only; pruned after
 * the retention. Time is an injected clock: no test sleeps.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { keys } from "./model.ts";
import { queryHistory, sweepHistory } from "./service/history.ts";
import { createContext } from "./server.ts";
import { deletePort } from "./service/ports/mod.ts";
import { must, mustFail, net, type TestApp, testApp, TOKEN, unchanged } from "./test_support.ts";

const NET = "tenants/acme/networks/blue";
const DAY = 86_400_000;
const T0 = Date.parse("2026-11-20T10:00:00Z");

/** A clock the test moves by hand. */
function manualClock(start = T0) {
  let ms = start;
  return {
    now: () => ms,
    set: (to: number) => void (ms = to),
    iso: (at: number) => new Date(at).toISOString(),
  };
}

async function historyAt(
  t: TestApp,
  tenant: string,
  query: Record<string, string>,
  token: string = TOKEN.admin,
) {
  const q = new URLSearchParams(query).toString();
  return must(await t.call("GET", `tenants/${tenant}/history?${q}`, undefined, token), 200).items;
}

async function keysUnder(t: TestApp, prefix: readonly (string | number)[]): Promise<string[]> {
  const out: string[] = [];
  for await (const e of t.store.list(prefix)) out.push(e.key.join("/"));
  return out;
}

/** A holding of acme's port `p` on network blue, as answered, less its times. */
function holdingOnBlue(
  p: { id: string; networkId: string; ip: string; mac: string },
  binding: Record<string, unknown>,
) {
  const { id: port, networkId, ip, mac } = p;
  return {
    tenant: "acme",
    network: "blue",
    networkTenant: "acme",
    networkId,
    port,
    ip,
    mac,
    ...binding,
  };
}

async function noProblems(t: TestApp) {
  assert.deepEqual((await checkStore(t.store)).problems, []);
}

Deno.test("history: allocate, release, quarantine, reuse by another port; each time names its holder", async () => {
  const clock = manualClock();
  using t = await testApp({
    tenants: ["acme"],
    quarantineSeconds: 60,
    historyRetentionDays: 30,
    clock: clock.now,
  });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const podA = { namespace: "acme", name: "a", uid: "uid-a" };
  const a = must(
    await t.call("PUT", `${NET}/ports/pa`, { pod: podA, node: "worker1", interface: "eth0" }),
    201,
  );
  clock.set(T0 + 10_000);
  must(await t.call("DELETE", `${NET}/ports/pa`), 204);
  // In quarantine: nobody gets it, and nobody holds it.
  clock.set(T0 + 40_000);
  mustFail(await t.call("PUT", `${NET}/ports/pb`, { ip: a.ip }), 409, "address_taken", {
    message: /quarantine/,
  });
  clock.set(T0 + 80_000);
  const podB = { namespace: "acme", name: "b", uid: "uid-b" };
  const b = must(
    await t.call("PUT", `${NET}/ports/pb`, { ip: a.ip, pod: podB, node: "worker2" }),
    201,
  );
  assert.equal(b.ip, a.ip);
  assert.equal(b.mac, a.mac, "the derived MAC comes back with its address");

  const at = (ms: number) => historyAt(t, "acme", { ip: a.ip, at: clock.iso(ms) });
  const [first] = await at(T0 + 5_000);
  assert.deepEqual(first, {
    ...holdingOnBlue(a, { pod: podA, node: "worker1", interface: "eth0" }),
    from: clock.iso(T0),
    to: clock.iso(T0 + 10_000),
    ended: "released",
  });
  assert.deepEqual(await at(T0 + 40_000), [], "in quarantine nobody held it");
  assert.deepEqual(await at(T0 - 1), [], "before the first holder, nobody");
  const [second] = await at(T0 + 90_000);
  assert.equal(second.port, "pb");
  assert.deepEqual(second.pod, podB);
  assert.equal(second.node, "worker2");
  assert.equal(second.from, clock.iso(T0 + 80_000));
  assert.equal(second.to, undefined, "pb holds it still");
  // The end is exclusive: at the release's instant, the next holder (none yet) answers.
  assert.deepEqual(await at(T0 + 10_000), []);

  // All of it, and ranges; the MAC says the same.
  const all = await historyAt(t, "acme", { ip: a.ip });
  assert.deepEqual(all.map((s: { port: string }) => s.port), ["pa", "pb"]);
  assert.deepEqual(await historyAt(t, "acme", { mac: a.mac.toUpperCase() }), all);
  const range = (from: number, to: number) =>
    historyAt(t, "acme", { ip: a.ip, from: clock.iso(from), to: clock.iso(to) });
  assert.deepEqual(await range(T0 + 20_000, T0 + 70_000), []);
  assert.deepEqual(
    (await range(T0 + 5_000, T0 + 85_000)).map((s: { port: string }) => s.port),
    ["pa", "pb"],
  );
  assert.deepEqual((await range(T0 + 85_000, T0 + DAY)).map((s: { port: string }) => s.port), [
    "pb",
  ]);
  await noProblems(t);
});

Deno.test("history: an allocation stores no holding of its own; the port record is the live one, answered by address and MAC", async () => {
  const clock = manualClock();
  using t = await testApp({
    tenants: ["acme", "globex"],
    historyRetentionDays: 30,
    clock: clock.now,
  });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(
    await t.call("POST", "tenants/acme/networks", net("pub", "10.2.0.0/24", { public: true })),
    201,
  );
  const pod = { namespace: "acme", name: "a", uid: "ua" };
  const a = must(
    await t.call("PUT", `${NET}/ports/pa`, { pod, node: "worker1", interface: "eth0" }),
    201,
  );
  clock.set(T0 + 1000);
  const fixed = must(await t.call("PUT", `${NET}/ports/pf`, { mac: "02:00:00:00:00:99" }), 201);
  const g = must(await t.call("PUT", "tenants/globex/networks/pub/ports/g", {}, TOKEN.globex), 201);
  // Issue 32: the allocation's commit writes no key of history (nor a network's pools for MACs).
  assert.deepEqual(await keysUnder(t, ["history"]), []);
  assert.deepEqual(await keysUnder(t, ["history_network"]), []);
  const live = {
    ...holdingOnBlue(a, { pod, node: "worker1", interface: "eth0" }),
    from: clock.iso(T0),
  };
  const asked: Record<string, string>[] = [
    { ip: a.ip },
    { mac: a.mac },
    { ip: a.ip, at: clock.iso(T0 + 500) },
  ];
  for (const q of asked) {
    assert.deepEqual(await historyAt(t, "acme", q), [live], JSON.stringify(q));
  }
  assert.deepEqual(await historyAt(t, "acme", { ip: a.ip, at: clock.iso(T0 - 1) }), []);
  assert.deepEqual(
    (await historyAt(t, "acme", { mac: fixed.mac })).map((s: { port: string }) => s.port),
    ["pf"],
  );
  // A tenant's holding on another tenant's public network: its own, and the admin's view.
  assert.deepEqual(
    (await historyAt(t, "globex", { ip: g.ip }, TOKEN.globex)).map((s: { port: string }) => s.port),
    ["g"],
  );
  assert.deepEqual(await historyAt(t, "acme", { ip: g.ip }), [], "acme does not see globex's");
  assert.deepEqual(await historyAt(t, "globex", { ip: a.ip }, TOKEN.globex), []);
  const all = must(await t.call("GET", `history?ip=${g.ip}`), 200).items;
  assert.deepEqual(all.map((s: { port: string; tenant: string }) => [s.tenant, s.port]), [[
    "globex",
    "g",
  ]]);
  // Released, it is stored once, ended.
  clock.set(T0 + 2000);
  must(await t.call("DELETE", `${NET}/ports/pa`), 204);
  assert.equal((await keysUnder(t, keys.historyOf("ip", a.ip))).length, 1);
  assert.deepEqual(await historyAt(t, "acme", { ip: a.ip }), [
    { ...live, to: clock.iso(T0 + 2000), ended: "released" },
  ]);
  await noProblems(t);
});

Deno.test("history: the two ports of a claim (a live migration) both hold its address, each answered", async () => {
  const clock = manualClock();
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 30, clock: clock.now });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const c = must(await t.call("POST", `${NET}/claims`, { name: "vm1" }, TOKEN.acme), 201);
  must(
    await t.call("PUT", `${NET}/ports/src`, { claim: "vm1", node: "worker1" }, TOKEN.worker1),
    201,
  );
  clock.set(T0 + 1000);
  must(
    await t.call("PUT", `${NET}/ports/dst`, { claim: "vm1", node: "worker2" }, TOKEN.worker2),
    201,
  );
  const held = async () =>
    (await historyAt(t, "acme", { ip: c.ip })).map((s: HeldSpan) => [s.port, s.node, s.from, s.to]);
  assert.deepEqual(await held(), [
    ["src", "worker1", clock.iso(T0), undefined],
    ["dst", "worker2", clock.iso(T0 + 1000), undefined],
  ]);
  clock.set(T0 + 2000);
  must(await t.call("DELETE", `${NET}/ports/src`), 204);
  assert.deepEqual(await held(), [
    ["src", "worker1", clock.iso(T0), clock.iso(T0 + 2000)],
    ["dst", "worker2", clock.iso(T0 + 1000), undefined],
  ]);
  await noProblems(t);
});

interface HeldSpan {
  port: string;
  node?: string;
  from: string;
  to?: string;
}

Deno.test("history: unbind and bind again of a stable port; each binding is a holding of its own", async () => {
  const clock = manualClock();
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 30, clock: clock.now });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const PORT = `${NET}/ports/stable:acme:db-0-eth0`;
  const pod1 = { namespace: "acme", name: "db-0", uid: "u1" };
  const p = must(await t.call("PUT", PORT, { pod: pod1, node: "n1", interface: "eth0" }), 201);
  clock.set(T0 + 1000);
  must(await t.call("POST", `${PORT}/unbind`), 200);
  // Unbinding again changes nothing: no new holding.
  clock.set(T0 + 1500);
  must(await t.call("POST", `${PORT}/unbind`), 200);
  clock.set(T0 + 2000);
  const pod2 = { namespace: "acme", name: "db-0", uid: "u2" };
  must(await t.call("PUT", PORT, { pod: pod2, node: "n2", interface: "eth0" }), 200);
  // The same PUT again binds nothing new.
  clock.set(T0 + 2500);
  must(await t.call("PUT", PORT, { pod: pod2, node: "n2", interface: "eth0" }), 200);

  const all = await historyAt(t, "acme", { ip: p.ip });
  assert.deepEqual(
    all.map((s: Record<string, unknown>) => [s.pod, s.node, s.from, s.to, s.ended]),
    [
      [pod1, "n1", clock.iso(T0), clock.iso(T0 + 1000), "unbound"],
      [undefined, undefined, clock.iso(T0 + 1000), clock.iso(T0 + 2000), "bound"],
      [pod2, "n2", clock.iso(T0 + 2000), undefined, undefined],
    ],
  );
  const who = async (ms: number) =>
    (await historyAt(t, "acme", { ip: p.ip, at: clock.iso(ms) })).map((
      s: { pod?: { uid: string } },
    ) => s.pod?.uid ?? "unbound");
  assert.deepEqual(await who(T0 + 500), ["u1"]);
  assert.deepEqual(await who(T0 + 1200), ["unbound"]);
  assert.deepEqual(await who(T0 + 3000), ["u2"]);
  // Released at last: the holding ends.
  clock.set(T0 + 4000);
  must(await t.call("DELETE", PORT), 204);
  const last = (await historyAt(t, "acme", { ip: p.ip })).at(-1);
  assert.equal(last.to, clock.iso(T0 + 4000));
  assert.equal(last.ended, "released");
});

Deno.test("history: past the retention a holding is not answered, and the next release prunes it", async () => {
  const clock = manualClock();
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 1, clock: clock.now });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const old = must(await t.call("PUT", `${NET}/ports/old`, {}), 201);
  clock.set(T0 + 1000);
  must(await t.call("DELETE", `${NET}/ports/old`), 204);
  const keep = must(await t.call("PUT", `${NET}/ports/keep`, {}), 201);
  assert.equal((await historyAt(t, "acme", { ip: old.ip })).length, 1);

  // A day after the release, less a millisecond: still kept.
  clock.set(T0 + 1000 + DAY - 1);
  assert.equal((await historyAt(t, "acme", { ip: old.ip })).length, 1);
  // Past it: not answered, though not pruned yet (nothing was released since).
  clock.set(T0 + 1000 + DAY + 1);
  assert.deepEqual(await historyAt(t, "acme", { ip: old.ip }), []);
  assert.equal((await keysUnder(t, keys.historyOf("ip", old.ip))).length, 1);
  assert.equal((await keysUnder(t, keys.historyExpiries())).length, 1);

  // The next release prunes it, in its own commit; the open holding of keep stays.
  must(await t.call("PUT", `${NET}/ports/next`, {}), 201);
  must(await t.call("DELETE", `${NET}/ports/next`), 204);
  assert.deepEqual(await keysUnder(t, keys.historyOf("ip", old.ip)), []);
  assert.deepEqual(await keysUnder(t, keys.historyOf("mac", old.mac)), []);
  assert.equal((await keysUnder(t, keys.historyExpiries())).length, 1, "next's end only");
  assert.equal((await historyAt(t, "acme", { ip: keep.ip })).length, 1);
  assert.equal((await historyAt(t, "acme", { mac: keep.mac })).length, 1);
  await noProblems(t);

  // With no release to prune them, the manager's sweep deletes every expired one, in batches.
  for (let i = 0; i < 150; i++) must(await t.call("PUT", `${NET}/ports/m${i}`, {}), 201);
  for (let i = 0; i < 150; i++) must(await t.call("DELETE", `${NET}/ports/m${i}`), 204);
  assert.equal((await keysUnder(t, keys.historyExpiries())).length, 151);
  assert.equal(await sweepHistory(t.ctx), 0, "nothing expired yet");
  clock.set(T0 + 1000 + 3 * DAY);
  assert.equal(await sweepHistory(t.ctx), 151);
  assert.deepEqual(await keysUnder(t, keys.historyExpiries()), []);
  assert.deepEqual(
    await keysUnder(t, ["history"]),
    [],
    "keep's holding goes on: its port record is it, nothing is stored",
  );
  assert.equal((await historyAt(t, "acme", { ip: keep.ip })).length, 1);
});

Deno.test("attack: a tenant never sees another tenant's holding of an address, also on a public network", async () => {
  const clock = manualClock();
  using t = await testApp({
    tenants: ["acme", "globex"],
    historyRetentionDays: 30,
    clock: clock.now,
  });
  must(
    await t.call("POST", "tenants/admin/networks", net("shared", "10.9.0.0/24", { public: true })),
    201,
  );
  const SHARED = (tenant: string) => `tenants/${tenant}/networks/shared/ports`;
  const acmePod = { namespace: "acme", name: "secret-db", uid: "acme-uid" };
  const a = must(
    await t.call("PUT", `${SHARED("acme")}/db`, { pod: acmePod }, TOKEN.acme),
    201,
  );
  clock.set(T0 + 1000);
  must(await t.call("DELETE", `${SHARED("acme")}/db`, undefined, TOKEN.acme), 204);
  clock.set(T0 + 2000);
  const g = must(await t.call("PUT", `${SHARED("globex")}/web`, { ip: a.ip }, TOKEN.globex), 201);
  assert.equal(g.ip, a.ip);

  // globex asks every way it can: only its own holding.
  const queries: Record<string, string>[] = [
    { ip: a.ip },
    { mac: a.mac },
    { ip: a.ip, at: clock.iso(T0 + 500) },
    { ip: a.ip, from: clock.iso(T0 - DAY), to: clock.iso(T0 + DAY) },
  ];
  for (const query of queries) {
    const seen = await historyAt(t, "globex", query, TOKEN.globex);
    assert.ok(seen.every((s: { tenant: string }) => s.tenant === "globex"), JSON.stringify(seen));
    assert.ok(!JSON.stringify(seen).includes("acme"), JSON.stringify(seen));
  }
  assert.deepEqual(
    await historyAt(t, "globex", { ip: a.ip, at: clock.iso(T0 + 500) }, TOKEN.globex),
    [],
  );
  mustFail(
    await unchanged(
      t,
      () => t.call("GET", `tenants/acme/history?ip=${a.ip}`, undefined, TOKEN.globex),
    ),
    403,
    "forbidden",
  );
  mustFail(await t.call("GET", `history?ip=${a.ip}`, undefined, TOKEN.globex), 403, "forbidden");
  mustFail(
    await t.call("GET", `tenants/globex/history?ip=${a.ip}&tenant=acme`, undefined, TOKEN.globex),
    400,
    "invalid_request",
    { field: "query.tenant" },
  );
  // A node token is no way in either.
  mustFail(await t.call("GET", `history?ip=${a.ip}`, undefined, TOKEN.worker1), 403, "forbidden");

  // acme sees its own, and not globex's.
  const mine = await historyAt(t, "acme", { ip: a.ip }, TOKEN.acme);
  assert.deepEqual(mine.map((s: { port: string; tenant: string }) => [s.tenant, s.port]), [[
    "acme",
    "db",
  ]]);
  // The admin sees both, or one tenant's.
  const all = must(await t.call("GET", `history?ip=${a.ip}`), 200).items;
  assert.deepEqual(all.map((s: { tenant: string }) => s.tenant), ["acme", "globex"]);
  const one = must(await t.call("GET", `history?ip=${a.ip}&tenant=globex`), 200).items;
  assert.deepEqual(one.map((s: { port: string }) => s.port), ["web"]);
});

Deno.test("attack: a tenant made again under a deleted tenant's name does not see the old tenant's holdings", async () => {
  const clock = manualClock();
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 30, clock: clock.now });
  must(
    await t.call("POST", "tenants/admin/networks", net("shared", "10.9.0.0/24", { public: true })),
    201,
  );
  const ports = "tenants/acme/networks/shared/ports";
  const pod = { namespace: "acme", name: "secret-db", uid: "old-acme-uid" };
  const old = must(await t.call("PUT", `${ports}/db`, { pod }, TOKEN.acme), 201);
  clock.set(T0 + 1000);
  must(await t.call("DELETE", `${ports}/db`, undefined, TOKEN.acme), 204);
  must(await t.call("DELETE", "tenants/acme"), 204);

  // Someone else gets the name; the token table still maps its token to "acme".
  clock.set(T0 + 5000);
  must(await t.call("POST", "tenants", { name: "acme" }), 201);
  const queries: Record<string, string>[] = [
    { ip: old.ip },
    { mac: old.mac },
    { ip: old.ip, at: clock.iso(T0 + 500) },
  ];
  for (const query of queries) {
    assert.deepEqual(await historyAt(t, "acme", query, TOKEN.acme), [], JSON.stringify(query));
  }
  // Its own holdings it sees; the admin keeps the whole record.
  const mine = must(await t.call("PUT", `${ports}/web`, { ip: old.ip }, TOKEN.acme), 201);
  assert.deepEqual(
    (await historyAt(t, "acme", { ip: mine.ip }, TOKEN.acme)).map((s: { port: string }) => s.port),
    ["web"],
  );
  const all = must(await t.call("GET", `history?ip=${old.ip}`), 200).items;
  assert.deepEqual(all.map((s: { port: string }) => s.port), ["db", "web"]);
});

Deno.test("history: a refused allocation writes none; concurrent allocations get one holding each", async () => {
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 30 });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const a = must(await t.call("PUT", `${NET}/ports/a`, {}), 201);
  mustFail(
    await unchanged(t, () => t.call("PUT", `${NET}/ports/b`, { ip: a.ip })),
    409,
    "address_taken",
  );
  const many = await Promise.all(
    Array.from({ length: 60 }, (_, i) => t.call("PUT", `${NET}/ports/c${i}`, {})),
  );
  const ips = many.map((r) => must(r, 201).ip);
  for (const ip of ips) {
    const held = await historyAt(t, "acme", { ip });
    assert.equal(held.length, 1, `${ip}: ${JSON.stringify(held)}`);
    assert.equal(held[0].to, undefined);
  }
  await Promise.all(ips.map((_, i) => t.call("DELETE", `${NET}/ports/c${i}`)));
  for (const ip of ips) {
    const [held] = await historyAt(t, "acme", { ip });
    assert.equal(held.ended, "released", ip);
  }
  await noProblems(t);
});

Deno.test("history: off (retention 0) writes nothing; bad queries are 400s that name the field", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const a = must(await t.call("PUT", `${NET}/ports/a`, {}), 201);
  must(await t.call("DELETE", `${NET}/ports/a`), 204);
  assert.deepEqual(await keysUnder(t, ["history"]), []);
  assert.deepEqual(await keysUnder(t, keys.historyExpiries()), []);
  assert.deepEqual(await historyAt(t, "acme", { ip: a.ip }), []);

  const bad = (query: string, field: string) =>
    t.call("GET", `tenants/acme/history?${query}`).then((r) =>
      mustFail(r, 400, "invalid_request", { field })
    );
  await bad("", "query.ip");
  await bad(`ip=${a.ip}&mac=${a.mac}`, "query.ip");
  await bad("ip=10.1.0.300", "query.ip");
  await bad("mac=nope", "query.mac");
  await bad(`ip=${a.ip}&at=yesterday`, "query.at");
  await bad(`ip=${a.ip}&at=2026-11-25T00:00:00Z&from=2026-11-24T00:00:00Z`, "query.at");
  await bad(`ip=${a.ip}&from=2026-11-25T00:00:00Z&to=2026-11-24T00:00:00Z`, "query.from");
  await bad(`ip=${a.ip}&extra=1`, "query.extra");
});

Deno.test("history: turned off (retention 0), the holdings that ended are pruned, by a release and by the sweep", async () => {
  const clock = manualClock();
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 30, clock: clock.now });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const [, , c, keep] = await Promise.all(
    ["a", "b", "c", "keep"].map(async (id) =>
      must(await t.call("PUT", `${NET}/ports/${id}`, {}), 201)
    ),
  );
  clock.set(T0 + 1000);
  must(await t.call("DELETE", `${NET}/ports/a`), 204);
  must(await t.call("DELETE", `${NET}/ports/b`), 204);
  assert.equal((await keysUnder(t, keys.historyExpiries())).length, 2);

  // The manager starts again with historyRetentionDays: 0, well within the old retention.
  t.ctx.settings.historyMs = 0;
  clock.set(T0 + 2000);
  must(await t.call("DELETE", `${NET}/ports/c`), 204);
  assert.deepEqual(await keysUnder(t, keys.historyExpiries()), [], "the release pruned a and b");
  // c's and keep's holdings were going on when it was turned off, in their port records (nothing
  // stored): keep's is still answered; c's ended unrecorded (docs/operating.md).
  assert.deepEqual(await keysUnder(t, ["history"]), []);
  assert.deepEqual(await historyAt(t, "acme", { ip: c.ip }), []);
  assert.deepEqual(
    (await historyAt(t, "acme", { ip: keep.ip })).map((s: { to?: string }) => s.to),
    [
      undefined,
    ],
  );
  assert.equal(await sweepHistory(t.ctx), 0);

  // Holdings that ended while history was on, with no release after: the sweep prunes them.
  t.ctx.settings.historyMs = 30 * DAY;
  clock.set(T0 + 3000);
  must(await t.call("PUT", `${NET}/ports/d`, {}), 201);
  clock.set(T0 + 4000);
  must(await t.call("DELETE", `${NET}/ports/d`), 204);
  t.ctx.settings.historyMs = 0;
  clock.set(T0 + 5000);
  assert.equal(await sweepHistory(t.ctx), 1);
  assert.deepEqual(await keysUnder(t, keys.historyExpiries()), []);
  assert.deepEqual(await keysUnder(t, ["history"]), []);
  await noProblems(t);
});

Deno.test("history: a holding is stored once it ends, under its address; its derived MAC finds it there, also once its network is deleted", async () => {
  const clock = manualClock();
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 30, clock: clock.now });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const a = must(await t.call("PUT", `${NET}/ports/pa`, {}), 201);
  const fixed = must(await t.call("PUT", `${NET}/ports/pf`, { mac: "02:00:00:00:00:99" }), 201);
  // While they hold them, the port records are the holdings: nothing stored (issue 32).
  assert.deepEqual(await keysUnder(t, ["history"]), []);
  const byMac = await historyAt(t, "acme", { mac: a.mac });
  assert.deepEqual(byMac.map((s: { port: string; ip: string }) => [s.port, s.ip]), [["pa", a.ip]]);
  assert.equal(byMac[0].to, undefined);

  clock.set(T0 + 1000);
  must(await t.call("DELETE", `${NET}/ports/pa`), 204);
  must(await t.call("DELETE", `${NET}/ports/pf`), 204);
  // Ended, each is stored once under its address: none under a derived MAC; a fixed MAC, which no
  // address tells, keeps its own.
  assert.equal((await keysUnder(t, keys.historyOf("ip", a.ip))).length, 1);
  assert.deepEqual(await keysUnder(t, keys.historyOf("mac", a.mac)), []);
  assert.equal((await keysUnder(t, keys.historyOf("mac", fixed.mac))).length, 1);
  must(await t.call("DELETE", NET), 204);
  // The network is gone; who held its MACs is still answered, with the end.
  for (const port of [a, fixed]) {
    const held = await historyAt(t, "acme", { mac: port.mac.toUpperCase() });
    assert.deepEqual(held.map((s: { port: string; to?: string }) => [s.port, s.to]), [
      [port.id, clock.iso(T0 + 1000)],
    ]);
  }
  // A MAC of the same block that no port held: nothing.
  assert.deepEqual(await historyAt(t, "acme", { mac: `${a.mac.slice(0, 9)}ff:ff:00` }), []);
  await noProblems(t);
});

Deno.test("history: a holding an older manager stored under its derived MAC too is still found by MAC, before and after it ends", async () => {
  const clock = manualClock();
  using t = await testApp({ tenants: ["acme"], historyRetentionDays: 30, clock: clock.now });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const a = must(await t.call("PUT", `${NET}/ports/pa`, {}), 201);
  // As an older manager left it: the holding stored open, under its address and its MAC too, the
  // port record without its start, and no record of the network.
  const [held] = await historyAt(t, "acme", { ip: a.ip });
  const tail = ["acme", a.networkId, T0, "0ldst1nt"];
  const [record] = await entriesUnder(t, keys.ports(a.networkId));
  const { stintFrom: _, ...older } = record.value as Record<string, unknown>;
  await t.store.commit([], [
    { type: "set", key: record.key, value: older },
    { type: "set", key: keys.historyOf("ip", a.ip, ...tail), value: held },
    { type: "set", key: keys.historyOf("mac", a.mac, ...tail), value: held },
    ...(await entriesUnder(t, ["history_network"])).map((e) => ({
      type: "delete" as const,
      key: e.key,
    })),
  ]);
  // A manager started on that store answers it once, and after the release with its end.
  const restarted = createContext(t.store, {
    vniRanges: ["5000-5999"],
    underlayMtu: 1500,
    historyRetentionDays: 30,
  });
  restarted.clock = clock.now;
  const byMac = () => queryHistory(restarted, "acme", { mac: a.mac });
  assert.deepEqual((await byMac()).map((s) => [s.port, s.to]), [["pa", undefined]]);
  clock.set(T0 + 1000);
  await deletePort(restarted, {
    principal: { scope: "admin" },
    tenant: "acme",
    network: "blue",
    id: "pa",
  });
  assert.deepEqual((await byMac()).map((s) => [s.port, s.to]), [["pa", clock.iso(T0 + 1000)]]);
  assert.deepEqual(await keysUnder(t, keys.historyOf("mac", a.mac)), [], "the old copy went");
  restarted.feed.close();
  await noProblems(t);
});

async function entriesUnder(t: TestApp, prefix: readonly (string | number)[]) {
  const out = [];
  for await (const e of t.store.list<unknown>(prefix)) out.push(e);
  return out;
}
