/**
 * What the history answers right after ports change (history_holders.ts keeps who holds what in
 * memory, caught up from the change feed): `writer` allocates, releases, unbinds and binds ports,
 * `reader` is asked at once after each change. The same manager on Deno KV
 * (history_holders_test.ts), two replicas on one etcd (tests/etcd_history_holders_test.ts).
 */
import assert from "node:assert/strict";
import { indexedSize } from "./service/history_holders.ts";
import { must, net, type TestApp } from "./test_support.ts";

const NET = "tenants/acme/networks/blue";

/** Each holding answered for `query`: its port, and what ended it ("live" while it goes on). */
export async function holdings(t: TestApp, query: Record<string, string>): Promise<string[][]> {
  const q = new URLSearchParams(query).toString();
  const items = must(await t.call("GET", `tenants/acme/history?${q}`), 200).items;
  return items.map((s: { port: string; ended?: string }) => [s.port, s.ended ?? "live"]);
}

export async function heldRightAfterChanges(writer: TestApp, reader: TestApp): Promise<void> {
  must(await writer.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  // The reader's index of blue is made now, on its first port.
  const first = must(await writer.call("PUT", `${NET}/ports/first`, {}), 201);
  assert.deepEqual(await holdings(reader, { ip: first.ip }), [["first", "live"]]);
  assert.equal(indexedSize(reader.ctx).networks, 1, "blue is indexed");

  const a = must(await writer.call("PUT", `${NET}/ports/a`, { node: "n1" }), 201);
  assert.deepEqual(await holdings(reader, { ip: a.ip }), [["a", "live"]], "allocated just before");
  assert.deepEqual(await holdings(reader, { mac: a.mac }), [["a", "live"]], "by its derived MAC");
  must(await writer.call("DELETE", `${NET}/ports/a`), 204);
  assert.deepEqual(await holdings(reader, { ip: a.ip }), [["a", "released"]], "released");

  const STABLE = `${NET}/ports/stable:acme:db-0-eth0`;
  const pod = (uid: string) => ({ namespace: "acme", name: "db-0", uid });
  const b = must(await writer.call("PUT", STABLE, { pod: pod("u1"), node: "n1" }), 201);
  must(await writer.call("POST", `${STABLE}/unbind`), 200);
  must(await writer.call("PUT", STABLE, { pod: pod("u2"), node: "n2" }), 200);
  const held = await holdings(reader, { ip: b.ip });
  assert.deepEqual(held.filter(([port]) => port !== "a"), [
    ["stable:acme:db-0-eth0", "unbound"],
    ["stable:acme:db-0-eth0", "bound"],
    ["stable:acme:db-0-eth0", "live"],
  ], "rebound just before");
  const c = must(await writer.call("PUT", `${NET}/ports/c`, {}), 201);
  assert.deepEqual(
    (await holdings(reader, { ip: c.ip })).filter(([, ended]) => ended === "live"),
    [["c", "live"]],
  );
}
