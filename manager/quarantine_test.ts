/**
 * The quarantine of released addresses and MACs (service/quarantine.ts): not handed out again
 * until it ends, pool_exhausted says so, the store stays consistent, the network can still go.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { must, mustFail, net, testApp } from "./test_support.ts";

const NET = "tenants/acme/networks/blue";
/** Long enough that the refusals right after a release come before its end, even on a busy CI. */
const SECONDS = 1.5;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Takes every address of the network, as ports p0, p1, …; returns their addresses. */
async function fill(t: Awaited<ReturnType<typeof testApp>>): Promise<string[]> {
  const ips: string[] = [];
  for (;;) {
    const r = await t.call("PUT", `${NET}/ports/p${ips.length}`, {});
    if (r.status !== 201) {
      mustFail(r, 409, "pool_exhausted");
      return ips;
    }
    ips.push(r.body.ip);
  }
}

async function noProblems(t: { store: Parameters<typeof checkStore>[0] }) {
  assert.deepEqual((await checkStore(t.store)).problems, []);
}

Deno.test("quarantine: a released address is not handed out again until it ends; pool_exhausted says until when", async () => {
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: SECONDS });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/29")), 201);
  const ips = await fill(t);
  const first = must(await t.call("GET", `${NET}/ports/p0`), 200);
  must(await t.call("DELETE", `${NET}/ports/p0`), 204);
  const message = mustFail(await t.call("PUT", `${NET}/ports/q1`, {}), 409, "pool_exhausted", {
    message: /1 of them released and in quarantine, the first until \d{4}-\d\d-\d\dT/,
  });
  assert.ok(message.includes("exhausted"));
  // Asked for by address: refused with the same reason.
  mustFail(await t.call("PUT", `${NET}/ports/q2`, { ip: ips[0] }), 409, "address_taken", {
    field: "ip",
    message: /in quarantine until/,
  });
  // Usage: not used, not free either.
  const { usage } = must(await t.call("GET", NET), 200);
  assert.deepEqual(usage, { total: ips.length, used: ips.length - 1, free: 0 });
  await noProblems(t);

  await sleep(SECONDS * 1000 + 100);
  const again = must(await t.call("PUT", `${NET}/ports/q1`, {}), 201);
  assert.equal(again.ip, ips[0]);
  // The derived MAC comes back with its address, no earlier.
  assert.equal(again.mac, first.mac);
  await noProblems(t);
});

Deno.test("quarantine: a free address is preferred to a quarantined one, which never comes back early", async () => {
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: SECONDS });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/29")), 201);
  const a = must(await t.call("PUT", `${NET}/ports/a`, {}), 201);
  must(await t.call("DELETE", `${NET}/ports/a`), 204);
  // Release and allocate in a loop: the released address is never among the answers.
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) seen.add(must(await t.call("PUT", `${NET}/ports/b${i}`, {}), 201).ip);
  assert.ok(!seen.has(a.ip), `${a.ip} came back during its quarantine`);
  await noProblems(t);
});

Deno.test("quarantine: a released fixed MAC is refused until it ends", async () => {
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: SECONDS });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const mac = "0a:00:00:00:00:01";
  must(await t.call("PUT", `${NET}/ports/a`, { mac }), 201);
  must(await t.call("DELETE", `${NET}/ports/a`), 204);
  mustFail(await t.call("PUT", `${NET}/ports/b`, { mac }), 409, "mac_taken", {
    field: "mac",
    message: /in quarantine until/,
  });
  await noProblems(t);
  await sleep(SECONDS * 1000 + 100);
  assert.equal(must(await t.call("PUT", `${NET}/ports/b`, { mac }), 201).mac, mac);
  await noProblems(t);
});

Deno.test("quarantine: a network whose only addresses in use are quarantined can be deleted", async () => {
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: 60 });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("PUT", `${NET}/ports/a`, { mac: "0a:00:00:00:00:02" }), 201);
  must(await t.call("PUT", `${NET}/ports/b`, {}), 201);
  must(await t.call("DELETE", `${NET}/ports/a`), 204);
  mustFail(await t.call("DELETE", NET), 409, "in_use", { message: /1 address/ });
  must(await t.call("DELETE", `${NET}/ports/b`), 204);
  must(await t.call("DELETE", NET), 204);
  await noProblems(t);
  // Nothing of the quarantine is left behind.
  for (const prefix of [["quarantine"], ["quarantine_until"], ["quarantine_mac"]]) {
    for await (const e of t.store.list(prefix)) assert.fail(`left behind: ${e.key.join("/")}`);
  }
});

Deno.test("quarantine: 0 hands a released address out again at once (as before)", async () => {
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: 0 });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/30")), 201);
  const ips = await fill(t);
  must(await t.call("DELETE", `${NET}/ports/p0`), 204);
  assert.equal(must(await t.call("PUT", `${NET}/ports/b`, {}), 201).ip, ips[0]);
});
