/**
 * Address history in a store an older manager wrote (manager/testdata/history_v1_fixture.ts: the
 * code of main at 1492a33, which stores every open holding under its address). Whatever a later
 * manager changes in how it keeps holdings, the older store's open holdings must be answered once
 * each, the same as that code answered them, and end when their ports are released or bound again.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { queryHistory } from "./service/history.ts";
import { importStore } from "./store/migrate.ts";
import { must, openTestStore, testApp, TOKEN } from "./test_support.ts";

const T0 = Date.parse("2026-11-20T10:00:00Z");
const DATA = new URL("./testdata/", import.meta.url).pathname;
const BLUE = "tenants/acme/networks/blue";

interface Fixture {
  ports: Record<string, { ip: string; mac: string }>;
  answers: Record<string, unknown>;
}

async function olderStore(clock: () => number) {
  const store = await openTestStore();
  await importStore(store, `${DATA}history_v1.jsonl`);
  const fixture: Fixture = JSON.parse(await Deno.readTextFile(`${DATA}history_v1_answers.json`));
  const t = await testApp({ store, historyRetentionDays: 30, clock });
  return { t, fixture };
}

Deno.test("history: a store an older manager wrote answers what that manager answered, each holding once", async () => {
  const { t, fixture } = await olderStore(() => T0 + 7000);
  using _ = t;
  for (const [asked, answer] of Object.entries(fixture.answers)) {
    const [, tenant, q] = JSON.parse(asked);
    assert.deepEqual(await queryHistory(t.ctx, tenant ?? undefined, q), answer, asked);
  }
  assert.deepEqual((await checkStore(t.store)).problems, []);
});

Deno.test("history: an older manager's open holdings end when today's code releases or binds their ports", async () => {
  let ms = T0 + 7000;
  const { t, fixture } = await olderStore(() => ms);
  using _ = t;
  const { live, stable, g1 } = fixture.ports;
  must(await t.call("DELETE", `${BLUE}/ports/live`), 204);
  ms = T0 + 8000;
  const pod2 = { namespace: "acme", name: "db-0", uid: "u2" };
  must(
    await t.call("PUT", `${BLUE}/ports/stable:acme:db-0-eth0`, {
      pod: pod2,
      node: "worker2",
      interface: "eth0",
    }, TOKEN.worker2),
    200,
  );
  ms = T0 + 9000;
  must(
    await t.call("DELETE", "tenants/globex/networks/pub/ports/g1", undefined, TOKEN.globex),
    204,
  );
  const spans = async (tenant: string, q: Record<string, string>) =>
    (await queryHistory(t.ctx, tenant, q)).map((
      s,
    ) => [s.port, s.from, s.to ?? null, s.ended ?? null]);
  const iso = (at: number) => new Date(at).toISOString();
  const released = [["live", iso(T0), iso(T0 + 7000), "released"]];
  assert.deepEqual(await spans("acme", { ip: live.ip }), released);
  assert.deepEqual(await spans("acme", { mac: live.mac }), released);
  const rebound = [
    ["stable:acme:db-0-eth0", iso(T0 + 3000), iso(T0 + 4000), "unbound"],
    ["stable:acme:db-0-eth0", iso(T0 + 4000), iso(T0 + 8000), "bound"],
    ["stable:acme:db-0-eth0", iso(T0 + 8000), null, null],
  ];
  assert.deepEqual(await spans("acme", { ip: stable.ip }), rebound);
  assert.deepEqual(await spans("acme", { mac: stable.mac }), rebound);
  assert.deepEqual(await spans("globex", { ip: g1.ip }), [
    ["g1", iso(T0 + 6000), iso(T0 + 9000), "released"],
  ]);
  assert.deepEqual(await spans("acme", { ip: g1.ip }), [], "acme never sees globex's holding");
  assert.deepEqual((await checkStore(t.store)).problems, []);
});
