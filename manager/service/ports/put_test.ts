/**
 * A port's PUT as agents rely on it: idempotent by ID, fixed addresses and MACs given as asked or
 * refused with nothing written, and a PUT that starts over when the network or the pool it read
 * changed under it (another replica's work).
 */
import assert from "node:assert/strict";
import { ApiError } from "../../errors.ts";
import { unchanged, watchedStore } from "../../test_support.ts";
import type { Key } from "../../store/store.ts";
import { createNetwork, deleteNetwork } from "../networks.ts";
import { setQuota } from "../quotas.ts";
import { deletePort, getPort, putPort } from "./mod.ts";
import { ADMIN, portsTest } from "./test_support.ts";

/** Asserts that `p` is refused with `code` (on `field`), and returns the message. */
async function refused(p: Promise<unknown>, code: string, field?: string): Promise<string> {
  const err = await p.then(() => null, (e) => e);
  assert.ok(err instanceof ApiError, `refused with an ApiError, got ${err}`);
  assert.equal(err.code, code, err.message);
  if (field !== undefined) assert.equal(err.field, field, err.message);
  return err.message;
}

function json(x: unknown): unknown {
  return JSON.parse(JSON.stringify(x));
}

Deno.test("put: the same port ID answers the same port again, 200 not 201, and writes nothing", async () => {
  await using p = await portsTest();
  const first = await putPort(p.ctx, p.put("a", { node: "n1" }));
  assert.equal(first.created, true);
  const again = await unchanged(p.t, () => putPort(p.ctx, p.put("a", { node: "n1" })));
  assert.equal(again.created, false);
  assert.equal(again.changed, false);
  // As answered (JSON): the same port.
  assert.deepEqual(json(again.port), json(first.port));
  assert.deepEqual(json(await getPort(p.ctx, p.port("a"))), json(first.port));
});

Deno.test("put: a second PUT binds what the port lacked and keeps its address; a clash is 409 naming the field", async () => {
  await using p = await portsTest();
  const made = (await putPort(p.ctx, p.put("a"))).port;
  const pod = { namespace: "acme", name: "web-0" };
  const bound = await putPort(p.ctx, p.put("a", { node: "n1", pod, interface: "eth0" }));
  assert.equal(bound.created, false);
  assert.equal(bound.changed, true, "followers hear of the binding");
  assert.equal(bound.port.ip, made.ip);
  assert.equal(bound.port.mac, made.mac);
  assert.equal(bound.port.node, "n1");
  const msg = await refused(
    unchanged(p.t, () => putPort(p.ctx, p.put("a", { node: "n2" }))),
    "conflict",
    "node",
  );
  assert.match(msg, /already exists with node "n1"/);
});

Deno.test("put: a fixed IP is given as asked; taken, outside the pools or the gateway, refused with nothing written", async () => {
  await using p = await portsTest();
  await createNetwork(p.ctx, {
    principal: ADMIN,
    tenant: "acme",
    body: { name: "gw", type: "vxlan", cidr: "10.2.0.0/24", gateway: "10.2.0.1", public: false },
  });
  const fixed = await putPort(p.ctx, p.put("a", { ip: "10.1.0.77" }));
  assert.equal(fixed.port.ip, "10.1.0.77");
  assert.equal(fixed.port.address, "10.1.0.77/24");
  const taken = await refused(
    unchanged(p.t, () => putPort(p.ctx, p.put("b", { ip: "10.1.0.77" }))),
    "address_taken",
    "ip",
  );
  assert.match(taken, /used by port "a"/);
  await refused(
    unchanged(p.t, () => putPort(p.ctx, p.put("b", { ip: "10.9.0.1" }))),
    "invalid_request",
    "ip",
  );
  const gateway = await refused(
    unchanged(p.t, () => putPort(p.ctx, { ...p.put("c", { ip: "10.2.0.1" }), network: "gw" })),
    "address_taken",
    "ip",
  );
  assert.match(gateway, /10\.2\.0\.1 of network "gw" is the gateway/);
  // The next free address skips the fixed one.
  const next = await putPort(p.ctx, p.put("d"));
  assert.notEqual(next.port.ip, "10.1.0.77");
});

Deno.test("put: a fixed MAC goes with the port, is unique in its network, and never one the network derives", async () => {
  await using p = await portsTest();
  const mac = "02:aa:bb:cc:dd:01";
  const made = await putPort(p.ctx, p.put("a", { mac }));
  assert.equal(made.port.mac, mac);
  const again = await refused(
    unchanged(p.t, () => putPort(p.ctx, p.put("b", { mac }))),
    "mac_taken",
    "mac",
  );
  assert.match(again, /already used by port "a"/);
  const derived = (await putPort(p.ctx, p.put("c"))).port.mac;
  const block = await refused(
    unchanged(p.t, () => putPort(p.ctx, p.put("d", { mac: derived.replace(/..$/, "ff") }))),
    "invalid_mac",
    "mac",
  );
  assert.match(block, /the block the manager hands out/);
  await refused(putPort(p.ctx, p.put("e", { mac: "00:11:22:33:44:55" })), "invalid_mac", "mac");
  // Released, the MAC is free again (no quarantine here).
  await deletePort(p.ctx, p.port("a"));
  assert.equal((await putPort(p.ctx, p.put("b", { mac }))).port.mac, mac);
});

Deno.test("put: a network deleted and made again under a PUT (another replica): the port lands in the new one", async () => {
  await using p = await portsTest();
  // This manager has "blue" in its caches, as it is after any PUT.
  await putPort(p.ctx, p.put("warm"));
  await deletePort(p.ctx, p.port("warm"));
  const other = p.replica();
  await deleteNetwork(other, { principal: ADMIN, tenant: "acme", network: "blue" });
  const again = await createNetwork(other, {
    principal: ADMIN,
    tenant: "acme",
    body: { name: "blue", type: "vxlan", cidr: "10.7.0.0/24", public: false },
  });
  const r = await putPort(p.ctx, p.put("a", { node: "n1" }));
  assert.equal(r.created, true);
  assert.equal(r.port.networkId, again.id);
  assert.match(r.port.ip, /^10\.7\.0\./);
  assert.deepEqual(json(await getPort(other, p.port("a"))), json(r.port));
});

Deno.test("put: a pool this manager saw full is read again before a PUT is refused (another replica released)", async () => {
  // A /30: two addresses.
  await using p = await portsTest("10.1.0.0/30");
  const a = await putPort(p.ctx, p.put("a"));
  await putPort(p.ctx, p.put("b"));
  await refused(putPort(p.ctx, p.put("c")), "pool_exhausted");
  await deletePort(p.replica(), p.port("a"));
  const c = await putPort(p.ctx, p.put("c"));
  assert.equal(c.created, true);
  assert.equal(c.port.ip, a.port.ip);
});

Deno.test("put: a new port's allocation reads nothing once its network, cluster, quota and floating marker are known: one commit each", async () => {
  // A clock that stands still: the quarantine sweep trusts its last look for a second (quarantine.ts).
  const at = Date.parse("2026-11-29T00:00:00Z");
  await using p = await portsTest("10.1.0.0/24", { historyRetentionDays: 30, clock: () => at });
  await setQuota(p.ctx, "acme", { ports: 10 });
  await putPort(p.ctx, p.put("first", { node: "n1" }));
  const read: Key[] = [];
  let commits = 0;
  p.ctx.store = watchedStore(p.ctx.store, {
    get: (keys) => read.push(...keys),
    list: (prefix) => read.push(prefix),
    commit: () => commits++,
  });
  for (const id of ["a", "b", "c"]) {
    assert.equal((await putPort(p.ctx, p.put(id, { node: "n1" }))).created, true);
  }
  assert.deepEqual(read.map((k) => k.join("/")), [], "what the allocations read");
  assert.equal(commits, 3);
});
