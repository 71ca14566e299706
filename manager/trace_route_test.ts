/**
 * The trace route the console calls (routes/trace.ts): a packet between two of a tenant's ports,
 * node by node, from the manager's model, as knitctl's offline trace gives it; a tenant traces its
 * own ports only and never reads a node's underlay address.
 */
import assert from "node:assert/strict";
import { must, testApp, TOKEN } from "./test_support.ts";

async function world() {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", { name: "blue", cidr: "10.1.0.0/24" }), 201);
  must(await t.call("POST", "tenants/globex/networks", { name: "red", cidr: "10.1.0.0/24" }), 201);
  must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.0.2.1" }, TOKEN.worker1), 201);
  // One underlay address the start of the other: each is named by its own node.
  must(await t.call("PUT", "nodes/worker2", { underlayIp: "192.0.2.10" }, TOKEN.worker2), 201);
  const bind = (tenant: string, net: string, id: string, token: string) =>
    t.call("PUT", `tenants/${tenant}/networks/${net}/ports/${id}`, { node: id.slice(0, 7) }, token);
  // worker1-a on worker1, worker2-b on worker2 (the port ID names its node here).
  must(await bind("acme", "blue", "worker1-a", TOKEN.worker1), 201);
  must(await bind("acme", "blue", "worker2-b", TOKEN.worker2), 201);
  must(await bind("globex", "red", "worker1-g", TOKEN.worker1), 201);
  must(await t.call("PUT", "tenants/acme/networks/blue/ports/unbound", {}), 201);
  return t;
}

const between = (from: string, to: string, extra: Record<string, unknown> = {}) => ({
  from: { network: from.split("/")[0], port: from.split("/")[1] },
  to: { network: to.split("/")[0], port: to.split("/")[1] },
  ...extra,
});

Deno.test("trace route: a tenant's packet followed across two nodes, step by step, without the underlay's addresses", async () => {
  using t = await world();
  const r = must(
    await t.call(
      "POST",
      "tenants/acme/trace",
      between("blue/worker1-a", "blue/worker2-b", { proto: "tcp", dport: 80 }),
      TOKEN.acme,
    ),
    200,
  );
  assert.equal(r.mode, "offline");
  assert.equal(r.delivered, true, r.result);
  assert.deepEqual(r.hops.map((h: { node: string }) => h.node), ["worker1", "worker2"]);
  assert.equal(r.packet.proto, "tcp");
  assert.equal(r.packet.dstPort, 80);
  assert.ok(r.hops[0].steps.length > 0, "the first node's steps");
  assert.ok(
    r.hops[0].steps.every((s: { tableName: string; what: string }) => s.tableName && s.what),
    "each step names its table and what it does",
  );
  assert.match(r.result, /delivered on worker2/);
  assert.doesNotMatch(JSON.stringify(r), /192\.0\.2\./, "no underlay address for a tenant");
  const tunnel = r.hops[0].outcomes.find((o: { kind: string }) => o.kind === "tunnel");
  assert.equal(tunnel.nodeIp, "node worker2", "the tunnel's endpoint named by its node");

  const admin = must(
    await t.call("POST", "tenants/acme/trace", between("blue/worker1-a", "blue/worker2-b")),
    200,
  );
  assert.equal(admin.delivered, true);
  assert.match(
    JSON.stringify(admin.hops[0].outcomes),
    /"192\.0\.2\.10"/,
    "an admin sees the tunnel's",
  );
});

Deno.test("trace route: a tenant traces its own ports only; bad requests say what is wrong", async () => {
  using t = await world();
  const trace = (tenant: string, body: unknown, token: string = TOKEN.acme) =>
    t.call("POST", `tenants/${tenant}/trace`, body, token);
  // Another tenant's path, or its port named under one's own: as the API answers elsewhere.
  assert.equal((await trace("globex", between("red/worker1-g", "red/worker1-g"))).status, 403);
  const theirs = await trace("acme", between("blue/worker1-a", "red/worker1-g"));
  assert.equal(theirs.status, 404, JSON.stringify(theirs.body));
  const missing = await trace("acme", between("blue/worker1-a", "blue/nobody"));
  assert.equal(missing.status, 404);
  assert.match(missing.body.error.message, /nobody/);
  const unbound = await trace("acme", between("blue/unbound", "blue/worker1-a"));
  assert.equal(unbound.status, 409);
  assert.match(unbound.body.error.message, /not bound to a node/);
  const icmpPort = await trace("acme", between("blue/worker1-a", "blue/worker2-b", { dport: 80 }));
  assert.equal(icmpPort.status, 400);
  assert.match(icmpPort.body.error.message, /dport goes with proto tcp or udp/);
  assert.equal((await trace("acme", { from: "x" })).status, 400);
  assert.equal(
    (await trace("acme", between("blue/worker1-a", "blue/worker2-b"), TOKEN.worker1))
      .status,
    403,
  );
});
