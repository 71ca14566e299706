/**
 * `GET /ports?node=` (what `knitctl verify` and `get ports --node` read) answers from the ports
 * themselves: an allocation writes no node index key (issue 32: one inserted key fewer per
 * allocation), and the node index keys an older manager left in the store make no answer wrong and
 * go where their port is released or bound elsewhere.
 */
import assert from "node:assert/strict";
import { keys } from "../../model.ts";
import type { Key } from "../../store/store.ts";
import { Tx } from "../../store/tx.ts";
import type { Ctx } from "../context.ts";
import { deletePort, listPorts, portKeyId, putPort, unbindPort } from "./mod.ts";
import { ADMIN, portsTest } from "./test_support.ts";

async function nodeKeys(ctx: Ctx): Promise<Key[]> {
  const out: Key[] = [];
  for await (const e of ctx.store.list(["port_by_node"])) out.push(e.key);
  return out;
}

async function onNode(ctx: Ctx, node: string): Promise<string[]> {
  return (await listPorts(ctx, ADMIN, { node })).map((p) => p.id).sort();
}

Deno.test("node listing: an allocation on a node writes no node index key, and is listed by node", async () => {
  await using p = await portsTest();
  const pod = { namespace: "acme", name: "web-0" };
  await putPort(p.ctx, p.put("a", { node: "n1", pod, interface: "eth0" }));
  await putPort(p.ctx, p.put("b", { node: "n2" }));
  await putPort(p.ctx, p.put("c"));
  assert.deepEqual(await nodeKeys(p.ctx), []);
  assert.deepEqual(await onNode(p.ctx, "n1"), ["a"]);
  assert.deepEqual(await onNode(p.ctx, "n2"), ["b"]);
  assert.deepEqual(await onNode(p.ctx, "n3"), []);
  const acme = { scope: "tenant", tenant: "acme" } as const;
  assert.deepEqual((await listPorts(p.ctx, acme, { node: "n1" })).map((x) => x.id), ["a"]);
});

Deno.test("node listing: an older store's node index keys answer nothing wrong and go with their port's release or rebinding", async () => {
  await using p = await portsTest();
  const a = (await putPort(p.ctx, p.put("a", { node: "n1" }))).port;
  const b = (await putPort(p.ctx, p.put("b", { node: "n1" }))).port;
  // What an older manager wrote: each port's key under its node, and one left by a port since
  // bound to n2 under n1 (a stale key), and one of a port that is gone.
  const older = (node: string, id: string) => keys.portOfNode(node, a.networkId, id);
  const aId = portKeyId({ ...a, index: 0 });
  const bId = portKeyId({ ...b, index: 0 });
  await new Tx().set(older("n1", aId), true).set(older("n1", bId), true)
    .set(older("n3", bId), true).set(older("n1", "acme/gone"), true).commit(p.ctx.store);
  assert.deepEqual(await onNode(p.ctx, "n1"), ["a", "b"]);
  assert.deepEqual(await onNode(p.ctx, "n3"), [], "a stale key lists nothing");

  await unbindPort(p.ctx, p.port("b"));
  await putPort(p.ctx, p.put("b", { node: "n2" }));
  assert.deepEqual(await onNode(p.ctx, "n1"), ["a"]);
  assert.deepEqual(await onNode(p.ctx, "n2"), ["b"]);
  await deletePort(p.ctx, p.port("a"));
  assert.deepEqual(await onNode(p.ctx, "n1"), []);
  // Released and rebound ports took their own keys along; the keys no port names stay harmless.
  assert.deepEqual(await nodeKeys(p.ctx), [older("n1", "acme/gone"), older("n3", bId)]);
});
