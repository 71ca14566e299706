/**
 * A port outlives its pod when unbound (a StatefulSet pod's stable port): unbind takes node, pod and
 * interface off and keeps the address and MAC; the next PUT that names a pod binds it again, on any
 * node.
 */
import assert from "node:assert/strict";
import { putPort, unbindPort } from "./mod.ts";
import { portsTest } from "./test_support.ts";

Deno.test("binding: unbind keeps the address; the next PUT binds the port again, elsewhere", async () => {
  await using p = await portsTest();
  const pod = { namespace: "acme", name: "db-0" };
  const made = await putPort(
    p.ctx,
    p.put("stable:acme:db-0-eth0", { node: "n1", pod, interface: "eth0" }),
  );
  const unbound = await unbindPort(p.ctx, p.port("stable:acme:db-0-eth0"));
  assert.equal(unbound.node, undefined);
  assert.equal(unbound.pod, undefined);
  assert.ok(unbound.unboundAt, "says since when");
  assert.equal(unbound.ip, made.port.ip);
  // Unbinding again changes nothing.
  assert.equal(
    (await unbindPort(p.ctx, p.port("stable:acme:db-0-eth0"))).unboundAt,
    unbound.unboundAt,
  );
  const again = await putPort(
    p.ctx,
    p.put("stable:acme:db-0-eth0", { node: "n2", pod, interface: "eth0" }),
  );
  assert.equal(again.created, false);
  assert.equal(again.changed, true);
  assert.equal(again.port.node, "n2");
  assert.equal(again.port.ip, made.port.ip);
  assert.equal(again.port.mac, made.port.mac);
  assert.equal(again.port.unboundAt, undefined);
});
