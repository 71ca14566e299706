/** Many requests at once, and a manager that restarts on the same Deno KV file. */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";

Deno.test("concurrency: 256 PUTs on a /24 give 253 distinct addresses and 3 clean refusals", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" }),
    ),
    201,
  );
  const replies = await Promise.all(
    Array.from({ length: 256 }, (_, i) => t.call("PUT", `${BLUE}/ports/p${i}`, {})),
  );
  const ok = replies.filter((r) => r.status === 201);
  const refused = replies.filter((r) => r.status !== 201);
  assert.equal(ok.length, 253);
  for (const r of refused) mustFail(r, 409, "pool_exhausted");
  const ips = new Set(ok.map((r) => r.body.ip));
  assert.equal(ips.size, 253);
  for (const bad of ["10.1.0.0", "10.1.0.1", "10.1.0.255"]) assert.ok(!ips.has(bad), bad);
  const macs = new Set(ok.map((r) => r.body.mac));
  assert.equal(macs.size, 253);
  assert.deepEqual(must(await t.call("GET", BLUE), 200).usage, { total: 253, used: 253, free: 0 });
  assert.equal(must(await t.call("GET", `${BLUE}/ports`), 200).items.length, 253);
});

Deno.test("concurrency: PUTs of the same port ID create it once", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const replies = await Promise.all(
    Array.from({ length: 32 }, () => t.call("PUT", `${BLUE}/ports/same`, {})),
  );
  assert.deepEqual(replies.map((r) => r.status).sort(), [...Array(31).fill(200), 201]);
  const first = replies.find((r) => r.status === 201)!.body;
  for (const r of replies) assert.deepEqual(r.body, first);
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 1);
});

Deno.test("concurrency: concurrent PUTs and DELETEs on two networks keep usage exact", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/acme/networks", net("red", "10.2.0.0/24")), 201);
  const nets = ["blue", "red"];
  await Promise.all(
    Array.from(
      { length: 100 },
      (_, i) => t.call("PUT", `tenants/acme/networks/${nets[i % 2]}/ports/p${i}`, {}),
    ),
  );
  const churn = await Promise.all(
    Array.from(
      { length: 100 },
      (_, i) =>
        i % 4 === 0
          ? t.call("DELETE", `tenants/acme/networks/${nets[i % 2]}/ports/p${i}`)
          : t.call("PUT", `tenants/acme/networks/${nets[i % 2]}/ports/q${i}`, {}),
    ),
  );
  assert.ok(
    churn.every((r) => r.status === 204 || r.status === 201),
    JSON.stringify(churn.map((r) => r.status)),
  );
  // blue: 50 ports, 25 deleted, 25 added; red: 50 ports, 50 added.
  for (const [n, count] of [["blue", 50], ["red", 100]] as const) {
    const ports = must(await t.call("GET", `tenants/acme/networks/${n}/ports`), 200).items;
    assert.equal(ports.length, count);
    assert.equal(new Set(ports.map((p: { ip: string }) => p.ip)).size, count);
    assert.equal(must(await t.call("GET", `tenants/acme/networks/${n}`), 200).usage.used, count);
  }
});

Deno.test("restart: a new manager on the same file sees every port, group and counter", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-manager-test-" });
  try {
    const path = `${dir}/manager.kv`;
    const before = new Map<string, { ip: string; mac: string }>();
    let usage;
    let group;
    {
      using t = await testApp({ path, tenants: ["acme"] });
      must(
        await t.call(
          "POST",
          "tenants/acme/networks",
          net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" }),
        ),
        201,
      );
      group = must(
        await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "blue", size: 4 }),
        201,
      );
      for (let i = 0; i < 50; i++) {
        const body = i < 2 ? { ipGroup: "g" } : { node: "worker1" };
        const p = must(await t.call("PUT", `${BLUE}/ports/p${i}`, body), 201);
        before.set(p.id, { ip: p.ip, mac: p.mac });
      }
      must(await t.call("DELETE", `${BLUE}/ports/p10`), 204);
      before.delete("p10");
      usage = must(await t.call("GET", BLUE), 200).usage;
      group = must(await t.call("GET", "tenants/acme/ipgroups/g"), 200);
    }
    using t = await testApp({ path });
    for (const [id, want] of before) {
      const p = must(await t.call("GET", `${BLUE}/ports/${id}`), 200);
      assert.deepEqual({ ip: p.ip, mac: p.mac }, want, id);
      assert.deepEqual(
        { ip: must(await t.call("PUT", `${BLUE}/ports/${id}`, {}), 200).ip },
        { ip: want.ip },
      );
    }
    mustFail(await t.call("GET", `${BLUE}/ports/p10`), 404, "not_found");
    assert.deepEqual(must(await t.call("GET", BLUE), 200).usage, usage);
    assert.deepEqual(must(await t.call("GET", "tenants/acme/ipgroups/g"), 200), group);
    assert.equal(must(await t.call("GET", "tenants/acme"), 200).ipGroups, 1);
    assert.equal(must(await t.call("GET", "ports?node=worker1"), 200).items.length, 47);

    const taken = new Set([...before.values()].map((p) => p.ip));
    for (const a of group.addresses) taken.add(a.ip);
    for (let i = 0; i < 100; i++) {
      const p = must(await t.call("PUT", `${BLUE}/ports/n${i}`, {}), 201);
      assert.ok(!taken.has(p.ip), `${p.ip} handed out twice`);
      taken.add(p.ip);
    }
    const g = must(await t.call("PUT", `${BLUE}/ports/gx`, { ipGroup: "g" }), 201);
    assert.ok(group.addresses.some((a: { ip: string }) => a.ip === g.ip));
    assert.ok(!before.has(g.id));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
