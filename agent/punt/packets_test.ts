/**
 * The router's ICMP errors and advertisements, built from punted frames and read back by tcpdump
 * (every header decoded, every checksum checked), and the cases where no error may be sent.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { ethernet, ipBytes, ipv4Packet, macBytes, parseIpFrame } from "./frames.ts";
import { routerError } from "./icmp_errors.ts";
import { routerAdvert } from "./router_advert.ts";
import { fragment } from "./fragment.ts";

const POD_MAC = macBytes("02:00:0a:3d:00:02");
const GW_MAC = macBytes("0a:58:12:34:56:78");
const gw4 = { mac: GW_MAC, ip: ipBytes("10.61.0.1") };
const gw6 = { mac: GW_MAC, ip: ipBytes("fd00:61::1") };

/** A UDP datagram from the pod (traceroute's probe) in a frame to the gateway MAC. */
function udp4(ttl: number, size = 32, flags = 0): Uint8Array {
  const udp = new Uint8Array(8 + size);
  const v = new DataView(udp.buffer);
  v.setUint16(0, 40000);
  v.setUint16(2, 33434);
  v.setUint16(4, udp.length);
  const packet = ipv4Packet(ipBytes("10.61.0.2"), ipBytes("10.62.0.3"), 17, udp);
  packet[8] = ttl;
  packet[6] = flags;
  return ethernet(GW_MAC, POD_MAC, 0x0800, fixChecksum(packet));
}

function fixChecksum(p: Uint8Array): Uint8Array {
  p[10] = p[11] = 0;
  let sum = 0;
  for (let i = 0; i < 20; i += 2) sum += (p[i] << 8) | p[i + 1];
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  new DataView(p.buffer, p.byteOffset).setUint16(10, ~sum & 0xffff);
  return p;
}

function udp6(hopLimit: number, size: number): Uint8Array {
  const p = new Uint8Array(40 + 8 + size);
  const v = new DataView(p.buffer);
  p[0] = 0x60;
  v.setUint16(4, 8 + size);
  p[6] = 17;
  p[7] = hopLimit;
  p.set(ipBytes("fd00:61::2"), 8);
  p.set(ipBytes("fd00:62::3"), 24);
  v.setUint16(40, 40000);
  v.setUint16(42, 33434);
  v.setUint16(44, 8 + size);
  return ethernet(GW_MAC, POD_MAC, 0x86dd, p);
}

function build(kind: Parameters<typeof routerError>[0], frame: Uint8Array, mtu = 0) {
  const f = parseIpFrame(frame);
  assert.ok(f, "the probe parses");
  const gw = f.family === 4 ? gw4 : gw6;
  const out = routerError(kind, f, gw, mtu);
  assert.ok(out, `${kind} is answered`);
  return out;
}

Deno.test("IPv4 errors: from the gateway to the pod, the IP header and 8 bytes quoted, checksums right", async () => {
  const probe = udp4(1, 100);
  const frames = [
    build("timeExceeded", probe),
    build("unreachable", udp4(5)),
    build("tooBig", udp4(5, 1400, 0x40), 1400),
  ];
  const text = await tcpdumpRead(frames);
  assert.equal(text.length, 3, text.join("\n"));
  for (const line of text) {
    assert.match(
      line,
      /^IP \(tos 0xc0, ttl 64, id 0, offset 0, flags \[none\], proto ICMP \(1\), length \d+\)/,
    );
    assert.match(line, /10\.61\.0\.1 > 10\.61\.0\.2: ICMP/);
    assert.doesNotMatch(line, /bad|wrong|truncated/i);
  }
  assert.match(text[0], /ICMP time exceeded in-transit, length 36/);
  assert.match(text[0], /10\.61\.0\.2\.40000 > 10\.62\.0\.3\.33434: \[no cksum\] UDP, length 100/);
  assert.match(text[1], /ICMP net 10\.62\.0\.3 unreachable, length 36/);
  assert.match(text[2], /ICMP 10\.62\.0\.3 unreachable - need to frag \(mtu 1400\), length 36/);
  // 14 Ethernet + 20 IP + 8 ICMP + 28 quoted.
  assert.deepEqual(frames.map((f) => f.length), [70, 70, 70]);
  assert.deepEqual(frames[0].subarray(0, 12), Uint8Array.from([...POD_MAC, ...GW_MAC]));
});

Deno.test("IPv6 errors: the pseudo-header checksum, as much quoted as fits in 1280 bytes", async () => {
  const frames = [
    build("timeExceeded", udp6(1, 16)),
    build("unreachable", udp6(9, 16)),
    build("tooBig", udp6(9, 1452), 1400),
  ];
  const text = await tcpdumpRead(frames);
  assert.equal(text.length, 3, text.join("\n"));
  for (const line of text) {
    assert.match(
      line,
      /^IP6 \(hlim 64, next-header ICMPv6 \(58\) payload length: \d+\) fd00:61::1 > fd00:61::2: \[icmp6 sum ok\] ICMP6, /,
    );
    assert.doesNotMatch(line, /bad|wrong|truncated/i);
  }
  assert.match(text[0], /ICMP6, time exceeded in-transit/);
  assert.match(text[1], /ICMP6, destination unreachable, unreachable route fd00:62::3/);
  assert.match(text[2], /ICMP6, packet too big, mtu 1400/);
  // The error packets: 40 + 8 + the quote; the big one cut to 1280.
  assert.deepEqual(frames.map((f) => f.length - 14), [40 + 8 + 64, 40 + 8 + 64, 1280]);
});

Deno.test("no error answers an error, a later fragment, or a broadcast, multicast or unspecified address", () => {
  const quiet = (frame: Uint8Array) => {
    const f = parseIpFrame(frame)!;
    return routerError("timeExceeded", f, f.family === 4 ? gw4 : gw6);
  };
  const icmpError = build("timeExceeded", udp4(1));
  const fragment = udp4(1);
  fragment[14 + 7] = 0xb9; // offset 185 × 8
  const toBroadcast = udp4(1);
  toBroadcast.set([255, 255, 255, 255], 14 + 16);
  const fromZero = udp4(1);
  fromZero.set([0, 0, 0, 0], 14 + 12);
  const v6Multicast = udp6(1, 8);
  v6Multicast.set(ipBytes("ff02::1"), 14 + 24);
  const v6Unspecified = udp6(1, 8);
  v6Unspecified.set(new Uint8Array(16), 14 + 8);
  const v6Error = build("unreachable", udp6(1, 8));
  for (
    const frame of [icmpError, fragment, toBroadcast, fromZero, v6Multicast, v6Unspecified, v6Error]
  ) {
    assert.equal(quiet(frame), null);
  }
  assert.equal(parseIpFrame(new Uint8Array(20)), null, "a runt is no IP frame");
});

Deno.test("router advertisement: prefix with SLAAC's A flag, M/O, MTU, from the gateway's link-local address", async () => {
  const settings = {
    gatewayMac: GW_MAC,
    prefix: ipBytes("fd00:61::"),
    prefixLength: 64,
    autonomous: true,
    managed: false,
    other: true,
    mtu: 1450,
  };
  const text = await tcpdumpRead([
    routerAdvert(settings),
    routerAdvert({ ...settings, autonomous: false, managed: true, other: false }, {
      mac: POD_MAC,
      ip: ipBytes("fe80::ff:fe3d:2"),
    }),
  ]);
  assert.equal(text.length, 2, text.join("\n"));
  assert.match(
    text[0],
    /^IP6 \(hlim 255, next-header ICMPv6 \(58\) payload length: 64\) fe80::858:12ff:fe34:5678 > ff02::1: \[icmp6 sum ok\] ICMP6, router advertisement, length 64/,
  );
  assert.match(
    text[0],
    /hop limit 64, Flags \[other stateful\], pref medium, router lifetime 1800s/,
  );
  assert.match(text[0], /source link-address option \(1\), length 8 \(1\): 0a:58:12:34:56:78/);
  assert.match(text[0], /mtu option \(5\), length 8 \(1\): {2}1450/);
  assert.match(
    text[0],
    /prefix info option \(3\), length 32 \(4\): fd00:61::\/64, Flags \[onlink, auto\], valid time 2592000s, pref\. time 604800s/,
  );
  assert.match(text[1], /> fe80::ff:fe3d:2: \[icmp6 sum ok\]/);
  assert.match(text[1], /Flags \[managed\]/);
  assert.match(text[1], /Flags \[onlink\], valid/);
});

Deno.test("fragments: each fits the MTU, offsets in 8-byte units, MF on all but the last, checksums right", async () => {
  const probe = parseIpFrame(udp4(64, 1400))!;
  const pieces = fragment(probe.packet, 1300)!;
  assert.deepEqual(pieces.map((p) => p.length), [1300, 148]);
  const text = await tcpdumpRead(pieces.map((p) => ethernet(POD_MAC, GW_MAC, 0x0800, p)));
  assert.match(text[0], /id 0, offset 0, flags \[\+\], proto UDP \(17\), length 1300\)/);
  assert.match(text[1], /offset 1280, flags \[none\], proto UDP \(17\), length 148\)/);
  for (const line of text) assert.doesNotMatch(line, /bad|wrong/i);
  // A fragment cut again keeps its place: its pieces start at its own offset, MF stays on.
  const first = fragment(pieces[0], 700)!;
  assert.deepEqual(first.map((p) => ((p[6] << 8) | p[7]).toString(16)), ["2000", "2055"]);
  assert.equal(fragment(probe.packet, 20), null, "no room for 8 bytes of payload");
});

// ---- The yardstick: tcpdump (`-r -vv -nn`) decodes every header and checks every checksum.

/** tcpdump's text for each frame (one entry per frame, its continuation lines joined). */
export async function tcpdumpRead(frames: Uint8Array[]): Promise<string[]> {
  const file = await Deno.makeTempFile({ suffix: ".pcap" });
  try {
    await Deno.writeFile(file, pcap(frames));
    const r = await run(["tcpdump", "-r", file, "-vv", "-nn", "-t"]);
    return r.stdout.split(/\n(?=\S)/).map((s) => s.replace(/\s*\n\s*/g, " ").trim())
      .filter((s) => s.length > 0);
  } finally {
    await Deno.remove(file);
  }
}

/** A pcap file (little-endian, microseconds, Ethernet) of the frames. */
function pcap(frames: Uint8Array[]): Uint8Array {
  const size = 24 + frames.reduce((n, f) => n + 16 + f.length, 0);
  const out = new Uint8Array(size);
  const v = new DataView(out.buffer);
  v.setUint32(0, 0xa1b2c3d4, true);
  v.setUint16(4, 2, true);
  v.setUint16(6, 4, true);
  v.setUint32(16, 65535, true);
  v.setUint32(20, 1, true);
  let at = 24;
  for (const f of frames) {
    v.setUint32(at + 8, f.length, true);
    v.setUint32(at + 12, f.length, true);
    out.set(f, at + 16);
    at += 16 + f.length;
  }
  return out;
}
