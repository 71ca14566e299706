/**
 * The slow path's budgets (attack: a pod floods packets whose TTL runs out): the flooding port
 * gets its own budget's worth of answers and no more, another port's traceroute is still answered,
 * the node's total is bounded, and the budget comes back with time.
 */
import assert from "node:assert/strict";
import { PUNT } from "@knitter/wasm";
import {
  ETH_IPV6,
  ethernet,
  icmpv6Packet,
  ipBytes,
  ipv4Packet,
  macBytes,
  parseIpFrame,
} from "./frames.ts";
import { type PacketIn, REASON_ACTION, REASON_INVALID_TTL } from "./openflow.ts";
import { RouterSlowPath } from "./router_slow_path.ts";

const GW_MAC = macBytes("0a:58:00:00:00:01");
const silent = { debug() {}, info() {}, warn() {}, error() {} };

/** The MAC of the pod on `ofport`. */
function podMac(ofport: number): Uint8Array {
  return Uint8Array.from([2, 0, 0, 0, 0, ofport]);
}

function punt(inPort: number, reason = REASON_INVALID_TTL, reg5 = 0): PacketIn {
  const packet = ipv4Packet(
    ipBytes(`10.9.0.${inPort + 1}`),
    ipBytes("10.9.1.5"),
    17,
    new Uint8Array(16),
  );
  return {
    reason,
    tableId: 25,
    cookie: 7n << 32n,
    inPort,
    regs: [0, 0, 0, 0, 0, reg5, 0, 0],
    frame: ethernet(GW_MAC, podMac(inPort), 0x0800, packet),
  };
}

function slowPath(now: () => number) {
  return new RouterSlowPath({
    socket: "/nonexistent",
    log: silent,
    now,
    limits: {
      perPort: 10,
      perPortBurst: 10,
      total: 50,
      totalBurst: 30,
      fragmentsPerPort: 100,
      fragmentsTotal: 1000,
    },
    // Ports 1..99 are pods of one network.
    port: (ofport) =>
      ofport < 100
        ? {
          mac: podMac(ofport),
          network: { gatewayMac: GW_MAC, gateway4: ipBytes("10.9.0.1") },
        }
        : undefined,
  });
}

Deno.test("slow path budgets: a flooding port spends its own budget, another port is still answered, the node's total is bounded", () => {
  let t = 0;
  const slow = slowPath(() => t);
  let flooder = 0;
  for (let i = 0; i < 10_000; i++) if (slow.answer(punt(1))) flooder++;
  assert.equal(flooder, 10, "the flooding port: its burst, then nothing");
  // Another pod's traceroute: 3 probes, each answered.
  for (let i = 0; i < 3; i++) assert.ok(slow.answer(punt(2)), `probe ${i} of the other pod`);
  // One second later the flooder has 10 more, and no more than that.
  t += 1000;
  flooder = 0;
  for (let i = 0; i < 10_000; i++) if (slow.answer(punt(1))) flooder++;
  assert.equal(flooder, 10);
  // Many ports flooding at once: the node's total holds (its burst of 30, less what was spent).
  t += 10_000;
  let all = 0;
  for (let port = 10; port < 60; port++) {
    for (let i = 0; i < 100; i++) if (slow.answer(punt(port))) all++;
  }
  assert.equal(all, 30);
  assert.equal(slow.counts.limited, 2 * 9_990 + 50 * 100 - 30);
});

Deno.test("slow path: what is not owed is not answered (unknown network, no reason, error about an error)", () => {
  const slow = slowPath(() => 0);
  assert.equal(slow.answer({ ...punt(1), inPort: 100 }), null, "a port it does not know");
  assert.equal(
    slow.answer(punt(1, REASON_ACTION, 0)),
    null,
    "a controller action without a reason",
  );
  const unreachable = slow.answer(punt(1, REASON_ACTION, PUNT.UNREACHABLE));
  assert.ok(unreachable);
  assert.deepEqual([unreachable[14 + 20], unreachable[14 + 21]], [3, 0], "net unreachable");
  const port = slow.answer(punt(2, REASON_ACTION, PUNT.GATEWAY))!;
  assert.deepEqual([port[14 + 20], port[14 + 21]], [3, 3], "port unreachable");
  // Punted after the route rewrote its source MAC: answered to the pod's MAC all the same.
  const routed = punt(3, REASON_ACTION, PUNT.TOO_BIG | (1400 << 16));
  routed.frame.set(GW_MAC, 6);
  const big = slow.answer(routed)!;
  assert.deepEqual(big.subarray(0, 6), podMac(3));
  assert.deepEqual([big[14 + 20], big[14 + 21], (big[14 + 26] << 8) | big[14 + 27]], [3, 4, 1400]);
  const answer = { ...punt(4), frame: slow.answer(punt(4))! };
  assert.equal(slow.answer(answer), null, "an error about an error");
  assert.equal(slow.counts.ignored, 3);
});

Deno.test("slow path: too big without DF is cut into fragments that go on; with DF it is answered", () => {
  const slow = slowPath(() => 0);
  const big = (df: boolean) => {
    const packet = ipv4Packet(ipBytes("10.9.0.2"), ipBytes("10.9.1.5"), 17, new Uint8Array(1400));
    packet[6] = df ? 0x40 : 0;
    const frame = ethernet(macBytes("02:00:00:00:01:05"), GW_MAC, 0x0800, packet);
    return { ...punt(1, REASON_ACTION, PUNT.TOO_BIG | (1300 << 16)), frame };
  };
  const pieces = slow.fragments(big(false));
  assert.ok(pieces);
  // 1420 bytes of IP: 20 + 1280, then 20 + 120; addressed as the punted frame was.
  assert.deepEqual(pieces.map((p) => p.length - 14), [1300, 140]);
  assert.deepEqual(pieces[0].subarray(0, 12), big(false).frame.subarray(0, 12));
  assert.equal(slow.fragments(big(true)), null, "DF: not cut");
  const answer = slow.answer(big(true))!;
  assert.deepEqual([answer[14 + 20], answer[14 + 21]], [3, 4], "DF: fragmentation needed");
  assert.equal(slow.fragments(punt(1)), null, "a TTL that ran out is no fragmenting");
  assert.equal(slow.counts.fragmented, 1);
});

Deno.test("slow path: IPv6 punts of every reason are answered with ICMPv6 from the network's IPv6 gateway; too big is never cut", () => {
  const gateway6 = ipBytes("fd00:9::1");
  const slow = new RouterSlowPath({
    socket: "/nonexistent",
    log: silent,
    // A dual-stack network: its gateway6 answers IPv6.
    port: (ofport) => ({
      mac: podMac(ofport),
      network: { gatewayMac: GW_MAC, gateway4: ipBytes("10.9.0.1"), gateway6 },
    }),
  });
  // An echo request of 1400 bytes from the pod to beyond the router, as the route punts it.
  const echo = new Uint8Array(8 + 1400);
  echo[0] = 128;
  const packet = icmpv6Packet(ipBytes("fd00:9::2"), ipBytes("fd00:7::5"), 1, echo);
  const pin = (reason: number, reg5: number): PacketIn => ({
    ...punt(1, reason, reg5),
    frame: ethernet(GW_MAC, podMac(1), ETH_IPV6, packet),
  });
  const cases: [PacketIn, number, number][] = [
    [pin(REASON_INVALID_TTL, 0), 3, 0], // time exceeded
    [pin(REASON_ACTION, PUNT.UNREACHABLE), 1, 0], // destination unreachable: no route
    [pin(REASON_ACTION, PUNT.GATEWAY), 1, 4], // port unreachable
    [pin(REASON_ACTION, PUNT.TOO_BIG | (1300 << 16)), 2, 0], // packet too big
  ];
  for (const [p, type, code] of cases) {
    assert.equal(slow.fragments(p), null, "IPv6 is never fragmented by a router");
    const f = parseIpFrame(slow.answer(p)!);
    assert.ok(f && f.family === 6, `type ${type}: an IPv6 answer`);
    assert.deepEqual(f.src, gateway6, "from the IPv6 gateway");
    assert.deepEqual(f.ethDst, podMac(1), "to the pod");
    assert.deepEqual([f.packet[40], f.packet[41]], [type, code]);
    if (type === 2) {
      assert.equal(
        new DataView(f.packet.buffer, f.packet.byteOffset).getUint32(44),
        1300,
        "the MTU",
      );
    }
  }
});
