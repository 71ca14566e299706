/**
 * Writes `history_v1.jsonl` (a store export) and `history_v1_answers.json` (what that code's
 * history answered), made by the code that stores every open holding under its address (main at
 * 1492a33). Run in
 * such a checkout, with this file copied into its manager/testdata/:
 *
 *   deno run -A manager/testdata/history_v1_fixture.ts
 *
 * history_compat_test.ts loads the export into a store of today's code and expects the same answers.
 */
import { must, net, testApp, TOKEN } from "../test_support.ts";
import { exportStore } from "../store/migrate.ts";
import { queryHistory } from "../service/history.ts";

export const T0 = Date.parse("2026-11-20T10:00:00Z");
const BLUE = "tenants/acme/networks/blue";

let ms = T0;
const t = await testApp({ tenants: ["acme", "globex"], historyRetentionDays: 30, clock: () => ms });
must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
must(
  await t.call("POST", "tenants/acme/networks", net("pub", "10.2.0.0/24", { public: true })),
  201,
);
const pod = (name: string, uid: string) => ({ namespace: "acme", name, uid });
const live = must(
  await t.call("PUT", `${BLUE}/ports/live`, {
    pod: pod("a", "ua"),
    node: "worker1",
    interface: "eth0",
  }),
  201,
);
ms = T0 + 1000;
const gone = must(await t.call("PUT", `${BLUE}/ports/gone`, { node: "worker1" }), 201);
ms = T0 + 2000;
must(await t.call("DELETE", `${BLUE}/ports/gone`), 204);
ms = T0 + 3000;
const STABLE = `${BLUE}/ports/stable:acme:db-0-eth0`;
const stable = must(
  await t.call("PUT", STABLE, { pod: pod("db-0", "u1"), node: "worker1", interface: "eth0" }),
  201,
);
ms = T0 + 4000;
must(await t.call("POST", `${STABLE}/unbind`), 200);
ms = T0 + 5000;
const fixed = must(
  await t.call("PUT", `${BLUE}/ports/fixed`, { mac: "02:aa:bb:cc:dd:ee", node: "worker2" }),
  201,
);
ms = T0 + 6000;
const g1 = must(
  await t.call("PUT", "tenants/globex/networks/pub/ports/g1", {}, TOKEN.globex),
  201,
);
const ports = { live, gone, stable, fixed, g1 };
const answers: Record<string, unknown> = {};
for (const [name, p] of Object.entries(ports)) {
  for (const tenant of ["acme", "globex", undefined]) {
    for (const q of [{ ip: p.ip }, { mac: p.mac }]) {
      answers[JSON.stringify([name, tenant ?? null, q])] = await queryHistory(t.ctx, tenant, q);
    }
  }
}
const here = new URL(".", import.meta.url).pathname;
await exportStore(t.store, `${here}history_v1.jsonl`);
await Deno.writeTextFile(
  `${here}history_v1_answers.json`,
  JSON.stringify({ ports, answers }, null, 1) + "\n",
);
t.close?.();
Deno.exit(0);
