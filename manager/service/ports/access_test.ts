/**
 * Who may ask what of a port: a tenant token never binds a node nor another namespace's pod, a node
 * token's ports are bound to its node, and a node may not release another node's port. Each refusal
 * is a 403 naming the field, with nothing written.
 */
import assert from "node:assert/strict";
import { ApiError } from "../../errors.ts";
import { unchanged } from "../../test_support.ts";
import { deletePort, getPort, putPort } from "./mod.ts";
import { ACME, portsTest } from "./test_support.ts";

async function forbidden(promise: Promise<unknown>, field?: string): Promise<string> {
  const err = await promise.then(() => null, (e) => e);
  assert.ok(err instanceof ApiError, `refused with an ApiError, got ${err}`);
  assert.equal(err.code, "forbidden", err.message);
  assert.equal(err.field, field, err.message);
  return err.message;
}

Deno.test("access: a tenant token binds no node and no other namespace's pod", async () => {
  await using p = await portsTest();
  await forbidden(unchanged(p.t, () => putPort(p.ctx, p.put("a", { node: "n1" }, ACME))), "node");
  const pod = { namespace: "globex", name: "web-0" };
  await forbidden(
    unchanged(p.t, () => putPort(p.ctx, p.put("a", { pod }, ACME))),
    "pod.namespace",
  );
  const own = await putPort(p.ctx, p.put("a", { pod: { namespace: "acme", name: "web-0" } }, ACME));
  assert.equal(own.created, true);
});

Deno.test("access: a node token's port is bound to its node, and another node may not release it", async () => {
  await using p = await portsTest();
  const [WORKER1, WORKER2] = [await p.node("worker1"), await p.node("worker2")];
  const made = await putPort(p.ctx, p.put("a", {}, WORKER1));
  assert.equal(made.port.node, "worker1");
  assert.match(
    await forbidden(
      unchanged(p.t, () => putPort(p.ctx, p.put("b", { node: "n9" }, WORKER1))),
      "node",
    ),
    /may not bind ports to node "n9"/,
  );
  assert.match(
    await forbidden(unchanged(p.t, () => deletePort(p.ctx, p.port("a", WORKER2)))),
    /may not release a port of node "worker1"/,
  );
  await deletePort(p.ctx, p.port("a", WORKER1));
  await assert.rejects(
    getPort(p.ctx, p.port("a")),
    (e) => e instanceof ApiError && e.code === "not_found",
  );
});
