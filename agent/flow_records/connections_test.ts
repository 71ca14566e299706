/**
 * Connections from OVS's samples (connections.ts), on a clock the test moves: what a record
 * counts, when it goes (FIN or RST, idle, active timeout), the decision, and the names.
 */
import assert from "node:assert/strict";
import { SAMPLE_POINT } from "@knitter/wasm";
import { Connections, type PortName, type PortNames } from "./connections.ts";
import type { Sample } from "./ovs_samples.ts";

const CLIENT: PortName = { tenant: "acme", network: "app", networkId: "n1", pod: "acme/client" };
const SERVER: PortName = { tenant: "acme", network: "app", networkId: "n1", pod: "acme/server" };
const NAMES: PortNames = {
  byIfName: (n) => ({ "kn-client": CLIENT, "kn-server": SERVER } as Record<string, PortName>)[n],
  byMac: (m) => (m === "02:00:00:00:00:02" ? SERVER : undefined),
  podOf: (_, ip) =>
    ({ "10.0.0.1": "acme/client", "10.0.0.2": "acme/server" } as Record<string, string>)[ip] ??
      "",
};

function sample(over: Partial<Sample> = {}): Sample {
  return {
    point: SAMPLE_POINT.SENT,
    domain: 0,
    ifName: "kn-client",
    src: "10.0.0.1",
    dst: "10.0.0.2",
    protocol: 6,
    srcPort: 40000,
    dstPort: 80,
    srcMac: "02:00:00:00:00:01",
    dstMac: "02:00:00:00:00:02",
    packets: 10,
    bytes: 5000,
    tcpFlags: 0,
    start: 1000,
    end: 2000,
    ...over,
  };
}

const table = (scale = 1) =>
  new Connections({ activeMs: 60_000, idleMs: 15_000, scale, node: "n1", names: () => NAMES });

Deno.test("connections: the samples of a flow add up into one record, sent once it is idle, named", () => {
  const c = table();
  c.add([sample(), sample({ packets: 5, bytes: 2500, start: 2500, end: 3000 })], 3000);
  assert.deepEqual(c.sweep(3000 + 14_000), [], "not idle yet");
  const [r, ...more] = c.sweep(3000 + 15_000);
  assert.equal(more.length, 0);
  // The tuple and names as the samples had them; the counts and times added up.
  const { bytes, packets, start, end, reason, ...rest } = r;
  assert.deepEqual({ bytes, packets, start, end, reason }, {
    bytes: 7500,
    packets: 15,
    start: 1000,
    end: 3000,
    reason: "idle",
  });
  assert.deepEqual(Object.values(rest), [
    ...["10.0.0.1", "10.0.0.2", 6, 40000, 80],
    ...["acme", "app", "acme/client", "acme/server", "allow", "n1"],
  ]);
  assert.equal(c.size, 0, "forgotten");
});

Deno.test("connections: a FIN or RST ends the record at the next sweep; other directions are their own", () => {
  const c = table();
  c.add([
    sample({ tcpFlags: 0x01 }),
    sample({ ifName: "kn-server", src: "10.0.0.2", dst: "10.0.0.1", srcPort: 80, dstPort: 40000 }),
  ], 2000);
  const out = c.sweep(2001);
  assert.deepEqual(out.map((r) => [r.src, r.reason]), [["10.0.0.1", "end"]]);
  assert.equal(c.size, 1, "the reply direction goes on");
});

Deno.test("connections: a running connection sends what came since its previous record every active timeout", () => {
  const d = table();
  d.add([sample({ end: 10_000 })], 10_000);
  for (let t = 20_000; t <= 70_000; t += 10_000) {
    d.add([sample({ packets: 1, bytes: 100, start: t, end: t })], t);
  }
  const [b] = d.sweep(70_000);
  assert.deepEqual([b.reason, b.packets, b.bytes, b.start, b.end], [
    "active",
    16,
    5600,
    1000,
    70_000,
  ]);
  d.add([sample({ packets: 2, bytes: 200, start: 71_000, end: 72_000 })], 72_000);
  const [e] = d.sweep(72_000 + 15_000);
  assert.deepEqual([e.reason, e.packets, e.bytes, e.start], ["idle", 2, 200, 70_000]);
});

Deno.test("connections: a dropped packet makes the connection's decision deny; counted once when sent and dropped", () => {
  const c = table();
  c.add([sample({ dstPort: 9090 }), sample({ dstPort: 9090, point: SAMPLE_POINT.DENIED })], 2000);
  const [r] = c.sweep(2000 + 15_000);
  assert.deepEqual([r.decision, r.packets, r.bytes, r.dstPod], ["deny", 10, 5000, "acme/server"]);
  // From the tunnel (no local veth): the port by the destination MAC, the drops are the counts.
  const t = table();
  t.add([sample({ ifName: "vxlan0", src: "10.0.0.9", point: SAMPLE_POINT.DENIED })], 2000);
  const [u] = t.sweep(2000 + 15_000);
  assert.deepEqual([u.decision, u.packets, u.tenant, u.srcPod, u.dstPod], [
    "deny",
    10,
    "acme",
    "",
    "acme/server",
  ]);
});

Deno.test("connections: counts are scaled back by the sampling; samples of ports not here are left out", () => {
  const c = table(100);
  c.add(
    [sample({ packets: 3, bytes: 1500 }), sample({ ifName: "gone" }), sample({ point: 9 })],
    2000,
  );
  assert.equal(c.unknown, 2);
  const [r] = c.sweep(2000 + 15_000);
  assert.deepEqual([r.packets, r.bytes], [300, 150_000]);
});

Deno.test("connections: the table has a bound; what comes past it is counted, not kept (a flood on the agent's port)", () => {
  const c = new Connections({
    activeMs: 60_000,
    idleMs: 15_000,
    scale: 1,
    node: "n1",
    names: () => NAMES,
    maxConnections: 3,
  });
  c.add(Array.from({ length: 10 }, (_, i) => sample({ srcPort: 1000 + i })), 2000);
  assert.equal(c.size, 3);
  assert.equal(c.overflow, 7);
  // Known connections still count.
  c.add([sample({ srcPort: 1000 })], 2000);
  assert.equal(c.sweep(2000 + 15_000).find((r) => r.srcPort === 1000)?.packets, 20);
});
