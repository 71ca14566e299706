/**
 * IPAM claims (issue 26): an address and MAC that belong to a claim, not to a pod. A port bound to
 * the claim gets them, its deletion leaves them held, the claim's deletion releases them through
 * quarantine; two ports at once are a live migration, the second inactive until activated.
 */
import assert from "node:assert/strict";
import { checkStore } from "./check.ts";
import { must, mustFail, net, type TestApp, testApp, TOKEN, unchanged } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";
const CLAIMS = `${BLUE}/claims`;

async function blue(more: Parameters<typeof testApp>[0] = {}): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"], ...more });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  return t;
}

const pod = (name: string) => ({ namespace: "acme", name });

/** `check` finds the store consistent: every set bit has one holder, claims included. */
async function consistent(t: TestApp): Promise<void> {
  assert.deepEqual((await checkStore(t.store)).problems, []);
}

/** The port events since `cursor`: [id, op, active] each. */
async function portEvents(t: TestApp, cursor: string): Promise<[string, string, boolean][]> {
  const page = must(await t.call("GET", `feed?after=${cursor}&timeout=0`), 200);
  return page.events
    .filter((e: { type: string }) => e.type === "port")
    .map((e: { op: string; port: { id: string; active?: boolean } }) => [
      e.port.id,
      e.op,
      e.port.active ?? true,
    ]);
}

Deno.test("claims: a claim holds an address and MAC of its network from its creation; list, get, delete", async () => {
  using t = await blue();
  const c = must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  assert.equal(c.name, "vm1");
  assert.equal(c.tenant, "acme");
  assert.equal(c.network, "blue");
  assert.match(c.ip, /^10\.1\.0\.\d+$/);
  assert.equal(c.address, `${c.ip}/24`);
  assert.match(c.mac, /^02:/);
  assert.deepEqual(c.ports, []);
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 1, "the pool counts it");
  assert.deepEqual(must(await t.call("GET", `${CLAIMS}/vm1`, undefined, TOKEN.acme), 200), c);
  assert.deepEqual(must(await t.call("GET", CLAIMS, undefined, TOKEN.acme), 200).items, [c]);
  assert.deepEqual(
    must(await t.call("GET", "tenants/acme/claims", undefined, TOKEN.acme), 200).items,
    [c],
  );
  mustFail(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 409, "already_exists", {
    field: "name",
  });
  mustFail(await t.call("POST", CLAIMS, { name: "VM_1" }, TOKEN.acme), 400, "invalid_request", {
    field: "name",
  });
  // An IPAMClaim's name, as KubeVirt makes them (VM.NETWORK): a Kubernetes object name.
  const dotted = must(await t.call("POST", CLAIMS, { name: "vm-a.blue" }, TOKEN.acme), 201);
  assert.equal(must(await t.call("GET", `${CLAIMS}/vm-a.blue`), 200).ip, dotted.ip);
  must(await t.call("DELETE", `${CLAIMS}/vm-a.blue`), 204);
  must(await t.call("DELETE", `${CLAIMS}/vm1`, undefined, TOKEN.acme), 204);
  mustFail(await t.call("GET", `${CLAIMS}/vm1`, undefined, TOKEN.acme), 404, "not_found");
  mustFail(await t.call("DELETE", `${CLAIMS}/vm1`, undefined, TOKEN.acme), 404, "not_found");
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 0);
});

Deno.test("claims: a claimed address survives its port's deletion and goes to the next port, on another node", async () => {
  using t = await blue();
  const c = must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  const first = must(
    await t.call("PUT", `${BLUE}/ports/a`, { claim: "vm1", pod: pod("virt-a") }, TOKEN.worker1),
    201,
  );
  assert.deepEqual([first.ip, first.mac, first.claim, first.node], [c.ip, c.mac, "vm1", "worker1"]);
  assert.deepEqual(
    must(await t.call("GET", `${CLAIMS}/vm1`), 200).ports,
    [{ id: "a", node: "worker1", pod: pod("virt-a"), active: true }],
  );
  // Idempotent: the same PUT again is the same port; another claim is a clash.
  must(await t.call("PUT", `${BLUE}/ports/a`, { claim: "vm1" }, TOKEN.worker1), 200);
  must(await t.call("POST", CLAIMS, { name: "vm2" }, TOKEN.acme), 201);
  mustFail(
    await t.call("PUT", `${BLUE}/ports/a`, { claim: "vm2" }, TOKEN.worker1),
    409,
    "conflict",
    {
      field: "claim",
    },
  );
  must(await t.call("DELETE", `${BLUE}/ports/a`, undefined, TOKEN.worker1), 204);
  const held = must(await t.call("GET", `${CLAIMS}/vm1`), 200);
  assert.deepEqual([held.ip, held.mac, held.ports], [c.ip, c.mac, []]);
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 2, "vm1 and vm2, no port");
  // Plain ports never get it meanwhile.
  for (let i = 0; i < 5; i++) {
    assert.notEqual(must(await t.call("PUT", `${BLUE}/ports/p${i}`, {}), 201).ip, c.ip);
  }
  const next = must(
    await t.call("PUT", `${BLUE}/ports/b`, { claim: "vm1", pod: pod("virt-b") }, TOKEN.worker2),
    201,
  );
  assert.deepEqual([next.ip, next.mac, next.node, next.active], [
    c.ip,
    c.mac,
    "worker2",
    undefined,
  ]);
});

Deno.test("claims: a claim with a bound port is not deleted (409 naming the ports); then released through quarantine", async () => {
  using t = await blue({ quarantineSeconds: 3600 });
  const c = must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  must(await t.call("PUT", `${BLUE}/ports/a`, { claim: "vm1" }, TOKEN.worker1), 201);
  const msg = mustFail(
    await unchanged(t, () => t.call("DELETE", `${CLAIMS}/vm1`, undefined, TOKEN.acme)),
    409,
    "in_use",
  );
  assert.match(msg, /port\(s\) "a"/);
  must(await t.call("DELETE", `${BLUE}/ports/a`, undefined, TOKEN.worker1), 204);
  must(await t.call("DELETE", `${CLAIMS}/vm1`, undefined, TOKEN.acme), 204);
  const usage = must(await t.call("GET", BLUE), 200).usage;
  assert.equal(usage.used, 0);
  assert.equal(usage.total - usage.free, 1, "the claim's address waits out its quarantine");
  for (let i = 0; i < 10; i++) {
    assert.notEqual(
      must(await t.call("POST", CLAIMS, { name: `n${i}` }, TOKEN.acme), 201).ip,
      c.ip,
    );
  }
  await consistent(t);
});

Deno.test("claims: live migration: the target is inactive, activation swaps in one commit, the feed tells both", async () => {
  using t = await blue();
  must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  must(await t.call("PUT", `${BLUE}/ports/src`, { claim: "vm1" }, TOKEN.worker1), 201);
  const { cursor } = must(await t.call("GET", "feed"), 200);
  const dst = must(await t.call("PUT", `${BLUE}/ports/dst`, { claim: "vm1" }, TOKEN.worker2), 201);
  assert.equal(dst.active, false);
  const after = must(await t.call("GET", "feed"), 200).cursor;
  assert.deepEqual(await portEvents(t, cursor), [["dst", "put", false]]);

  // The target's node (its guest spoke there) activates it.
  const active = must(
    await t.call("POST", `${BLUE}/ports/dst/activate`, undefined, TOKEN.worker2),
    200,
  );
  assert.equal(active.active, undefined);
  assert.equal(must(await t.call("GET", `${BLUE}/ports/src`), 200).active, false);
  assert.deepEqual(
    (await portEvents(t, after)).sort(),
    [["dst", "put", true], ["src", "put", false]],
  );
  assert.deepEqual(
    must(await t.call("GET", `${CLAIMS}/vm1`), 200).ports,
    [
      { id: "src", node: "worker1", active: false },
      { id: "dst", node: "worker2", active: true },
    ],
  );
  await consistent(t);
  // Again: the same answer, nothing written, nothing announced.
  const end = must(await t.call("GET", "feed"), 200).cursor;
  const again = await unchanged(
    t,
    () => t.call("POST", `${BLUE}/ports/dst/activate`, undefined, TOKEN.acme),
  );
  assert.deepEqual(must(again, 200), active);
  assert.deepEqual(await portEvents(t, end), []);

  // The source pod's DEL removes only the source: the target keeps the claim.
  must(await t.call("DELETE", `${BLUE}/ports/src`, undefined, TOKEN.worker1), 204);
  assert.equal(must(await t.call("GET", `${BLUE}/ports/dst`), 200).active, undefined);
  assert.deepEqual(must(await t.call("GET", `${CLAIMS}/vm1`), 200).ports, [
    { id: "dst", node: "worker2", active: true },
  ]);
});

Deno.test("claims: the source dies mid-migration: the target becomes active in the same commit; a failed target leaves the source", async () => {
  using t = await blue();
  must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  const src = must(await t.call("PUT", `${BLUE}/ports/src`, { claim: "vm1" }, TOKEN.worker1), 201);
  must(await t.call("PUT", `${BLUE}/ports/dst`, { claim: "vm1" }, TOKEN.worker2), 201);
  // A failed migration: the target goes, the source is untouched (and not announced).
  const { cursor } = must(await t.call("GET", "feed"), 200);
  must(await t.call("DELETE", `${BLUE}/ports/dst`, undefined, TOKEN.worker2), 204);
  assert.deepEqual(await portEvents(t, cursor), [["dst", "delete", false]]);
  assert.deepEqual(must(await t.call("GET", `${BLUE}/ports/src`), 200), src);

  // Again, and now the source dies: the target takes over.
  must(await t.call("PUT", `${BLUE}/ports/dst`, { claim: "vm1" }, TOKEN.worker2), 201);
  const next = must(await t.call("GET", "feed"), 200).cursor;
  must(await t.call("DELETE", `${BLUE}/ports/src`, undefined, TOKEN.worker1), 204);
  assert.deepEqual(
    (await portEvents(t, next)).sort(),
    [["dst", "put", true], ["src", "delete", true]],
  );
  assert.equal(must(await t.call("GET", `${BLUE}/ports/dst`), 200).active, undefined);
});

Deno.test("claims: quotas count a claim's address once, its ports as ports", async () => {
  using t = await blue();
  must(await t.call("PUT", "tenants/acme/quota", { ports: 10, addresses: 1 }), 200);
  must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  mustFail(await t.call("POST", CLAIMS, { name: "vm2" }, TOKEN.acme), 403, "quota_exceeded");
  must(await t.call("PUT", `${BLUE}/ports/src`, { claim: "vm1" }, TOKEN.worker1), 201);
  must(await t.call("PUT", `${BLUE}/ports/dst`, { claim: "vm1" }, TOKEN.worker2), 201);
  assert.deepEqual(must(await t.call("GET", "tenants/acme/quota"), 200).used.addresses, 1);
  assert.deepEqual(must(await t.call("GET", "tenants/acme/quota"), 200).used.ports, 2);
  must(await t.call("DELETE", `${BLUE}/ports/src`), 204);
  must(await t.call("DELETE", `${BLUE}/ports/dst`), 204);
  must(await t.call("DELETE", `${CLAIMS}/vm1`), 204);
  const used = must(await t.call("GET", "tenants/acme/quota"), 200).used;
  assert.deepEqual([used.addresses, used.ports], [0, 0]);
  // A count made from scratch agrees.
  must(await t.call("DELETE", "tenants/acme/quota"), 204);
  must(await t.call("POST", CLAIMS, { name: "vm3" }, TOKEN.acme), 201);
  must(await t.call("PUT", `${BLUE}/ports/x`, { claim: "vm3" }, TOKEN.worker1), 201);
  const counted = must(await t.call("GET", "tenants/acme/quota"), 200).used;
  assert.deepEqual([counted.addresses, counted.ports], [1, 1]);
});

Deno.test("claims: concurrent claims and ports never share an address, and the pool ends with clean refusals", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/27")), 201);
  const replies = await Promise.all(
    Array.from(
      { length: 40 },
      (_, i) =>
        i % 2
          ? t.call("POST", CLAIMS, { name: `c${i}` })
          : t.call("PUT", `${BLUE}/ports/p${i}`, {}),
    ),
  );
  const ok = replies.filter((r) => r.status === 201);
  for (const r of replies.filter((r) => r.status !== 201)) mustFail(r, 409, "pool_exhausted");
  assert.equal(ok.length, 30, "a /27 hands out 30");
  assert.equal(new Set(ok.map((r) => r.body.ip)).size, 30);
  assert.equal(new Set(ok.map((r) => r.body.mac)).size, 30);
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 30);
  await consistent(t);
});

Deno.test("claims: a network with a claim is not deleted; a tenant with a claim on a public network is not either", async () => {
  using t = await blue();
  must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  mustFail(await unchanged(t, () => t.call("DELETE", BLUE)), 409, "in_use", {
    message: /claims "acme\/vm1"/,
  });
  must(
    await t.call("POST", "tenants/admin/networks", net("shared", "10.9.0.0/24", { public: true })),
    201,
  );
  mustFail(
    await t.call("POST", "tenants/admin/networks/shared/claims", { name: "g1" }, TOKEN.globex),
    403,
    "forbidden",
  );
  must(
    await t.call("POST", "tenants/globex/networks/shared/claims", { name: "g1" }, TOKEN.globex),
    201,
  );
  mustFail(await unchanged(t, () => t.call("DELETE", "tenants/globex")), 409, "in_use", {
    message: /claims "shared\/g1"/,
  });
  must(
    await t.call("DELETE", "tenants/globex/networks/shared/claims/g1", undefined, TOKEN.globex),
    204,
  );
  must(await t.call("DELETE", "tenants/globex"), 204);
});

Deno.test("claims: on a dual-stack network a claim holds the IPv6 pair too, and its ports carry it", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("blue", "10.1.0.0/24", { cidr6: "fd00:1::/64" }),
    ),
    201,
  );
  const c = must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  assert.match(c.ip6, /^fd00:1::/);
  assert.equal(c.address6, `${c.ip6}/64`);
  const p = must(await t.call("PUT", `${BLUE}/ports/a`, { claim: "vm1" }, TOKEN.worker1), 201);
  assert.deepEqual([p.ip, p.ip6, p.mac], [c.ip, c.ip6, c.mac]);
});

Deno.test("claims: a claim on a full network is refused with pool_exhausted, and nothing is written", async () => {
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: 3600 });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/29")), 201);
  for (let i = 0; i < 6; i++) must(await t.call("PUT", `${BLUE}/ports/p${i}`, {}), 201);
  must(await t.call("DELETE", `${BLUE}/ports/p0`), 204);
  const msg = mustFail(
    await unchanged(t, () => t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme)),
    409,
    "pool_exhausted",
  );
  assert.match(msg, /Cannot make a claim on network "blue".*1 of them released and in quarantine/);
});

Deno.test("claims: the allocation and release counters count a claim's address once, not its ports", async () => {
  using t = await blue();
  const counted = async () => {
    const text = must(await t.call("GET", "/metrics", undefined, TOKEN.metrics), 200) as string;
    const value = (name: string) =>
      Number(text.match(new RegExp(`^${name}\\{kind="ip"\\} (\\d+)`, "m"))?.[1] ?? 0);
    return [
      value("knitter_manager_allocations_total"),
      value("knitter_manager_releases_total"),
    ];
  };
  must(await t.call("POST", CLAIMS, { name: "vm1" }, TOKEN.acme), 201);
  assert.deepEqual(await counted(), [1, 0]);
  must(await t.call("PUT", `${BLUE}/ports/a`, { claim: "vm1" }, TOKEN.worker1), 201);
  must(await t.call("PUT", `${BLUE}/ports/b`, { claim: "vm1" }, TOKEN.worker2), 201);
  must(await t.call("DELETE", `${BLUE}/ports/a`), 204);
  must(await t.call("DELETE", `${BLUE}/ports/b`), 204);
  assert.deepEqual(await counted(), [1, 0]);
  must(await t.call("DELETE", `${CLAIMS}/vm1`), 204);
  assert.deepEqual(await counted(), [1, 1]);
});
