/** Strict address and CIDR parsing, canonical output. */
import assert from "node:assert/strict";
import {
  canonicalIp,
  type Cidr,
  cidrContains,
  cidrsOverlap,
  formatCidr,
  formatIp,
  isIp,
  isMac,
  macKind,
  normalizeIp,
  parseCidr,
  parseIp,
  parseIpPrefix,
  parseMac,
} from "./address.ts";
import { MALFORMED_CIDRS, MALFORMED_IPS, MALFORMED_MACS } from "./address_cases.ts";

function cidr(text: string): Cidr {
  const c = parseCidr(text);
  if ("error" in c) throw new Error(c.error);
  return c;
}

Deno.test("ip: IPv4 dotted quads parse to their value", () => {
  assert.deepEqual(parseIp("10.1.2.3"), { family: 4, value: 0x0a010203n });
  assert.deepEqual(parseIp("0.0.0.0"), { family: 4, value: 0n });
  assert.deepEqual(parseIp("255.255.255.255"), { family: 4, value: 0xffffffffn });
});

Deno.test("ip: anything but a plain dotted quad or RFC 4291 text is refused", () => {
  const bad = [
    "010.1.1.1", // octal-looking
    "1.2.3.04",
    "1.2.3", // short form
    "1.2.3.4.5",
    "256.1.1.1",
    "0x0a.1.1.1",
    "167772161", // a number
    " 1.2.3.4",
    "1.2.3.4 ",
    "1..2.3",
    "",
    "fe80::1%eth0", // zone id
    "fe80::1%1",
    "::ffff:1.2.3.4%eth0",
    "1:2:3:4:5:6:7:8:9",
    "12345::1",
    "::g",
    "1.2.3.4/32",
    "[::1]",
  ];
  for (const text of bad) assert.equal(parseIp(text), null, JSON.stringify(text));
});

Deno.test("ip: IPv6 prints in canonical RFC 5952 form", () => {
  const canon = (text: string) => formatIp(parseIp(text)!);
  assert.equal(canon("2001:DB8:0:0:0:0:0:1"), "2001:db8::1");
  assert.equal(canon("2001:0db8:0000:0000:0001:0000:0000:0001"), "2001:db8::1:0:0:1");
  assert.equal(canon("fd00:0:0:1::"), "fd00:0:0:1::");
  assert.equal(canon("0:0:0:0:0:0:0:0"), "::");
  assert.equal(canon("::1"), "::1");
  assert.equal(canon("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1", "one zero field stays");
  assert.equal(canon("::ffff:c000:201"), "::ffff:192.0.2.1", "IPv4-mapped ends in dotted decimal");
  assert.equal(canon("::FFFF:192.0.2.1"), "::ffff:192.0.2.1");
  assert.equal(parseIp("::1")!.family, 6);
  assert.equal(parseIp("::1")!.value, 1n);
});

Deno.test("ip: format then parse is the identity", () => {
  for (const text of ["10.0.0.1", "192.168.255.0", "fd00:1::10", "2001:db8::ffff:0:1"]) {
    assert.equal(formatIp(parseIp(text)!), text);
  }
});

Deno.test("ip: CIDRs parse to base, prefix and size", () => {
  assert.deepEqual(cidr("10.1.0.0/24"), { family: 4, base: 0x0a010000n, prefix: 24, size: 256n });
  assert.deepEqual(cidr("0.0.0.0/0"), { family: 4, base: 0n, prefix: 0, size: 1n << 32n });
  assert.equal(cidr("fd00:1::/64").size, 1n << 64n);
  assert.equal(formatCidr(cidr("FD00:1:0::/64")), "fd00:1::/64");
  assert.equal(cidr("10.1.0.7/32").size, 1n);
});

Deno.test("ip: bad CIDRs say what is wrong", () => {
  const error = (text: string) => {
    const c = parseCidr(text);
    assert.ok("error" in c, `${text} should be refused`);
    return c.error;
  };
  assert.match(error("10.1.0.0"), /not a CIDR/);
  assert.match(error("10.1.0/24"), /valid IPv4 or IPv6 address/);
  assert.match(error("010.1.0.0/24"), /valid IPv4 or IPv6 address/);
  assert.match(error("10.1.0.0/33"), /invalid prefix length \(0\.\.32/);
  assert.match(error("fd00::/129"), /0\.\.128 for IPv6/);
  assert.match(error("10.1.0.0/"), /invalid prefix/);
  assert.match(error("10.1.0.0/-1"), /invalid prefix/);
  assert.match(error("10.1.0.0/2 4"), /invalid prefix/);
  assert.match(error("10.1.0.5/24"), /host bits set; the network is 10\.1\.0\.0\/24/);
  assert.match(error("fd00::1/64"), /the network is fd00::\/64/);
});

Deno.test("ip: containment and overlap respect the family", () => {
  const net = cidr("10.1.0.0/24");
  assert.ok(cidrContains(net, parseIp("10.1.0.0")!));
  assert.ok(cidrContains(net, parseIp("10.1.0.255")!));
  assert.ok(!cidrContains(net, parseIp("10.1.1.0")!));
  assert.ok(!cidrContains(net, parseIp("::a01:5")!), "an IPv6 address with the same low bits");
  assert.ok(cidrsOverlap(net, cidr("10.1.0.128/25")));
  assert.ok(cidrsOverlap(net, cidr("10.0.0.0/8")));
  assert.ok(!cidrsOverlap(net, cidr("10.1.1.0/24")));
  assert.ok(!cidrsOverlap(cidr("0.0.0.0/0"), cidr("::/0")));
});

Deno.test("address: every malformed address, CIDR and MAC of the attack table is refused", () => {
  for (const text of MALFORMED_IPS) {
    assert.equal(isIp(text), false, JSON.stringify(text));
    assert.equal(normalizeIp(text), null, JSON.stringify(text));
    assert.ok("error" in parseIpPrefix(text), JSON.stringify(text));
    assert.ok("error" in parseIpPrefix(`${text}/24`), JSON.stringify(`${text}/24`));
  }
  for (const text of MALFORMED_CIDRS) {
    assert.ok("error" in parseCidr(text), JSON.stringify(text));
    assert.ok("error" in parseIpPrefix(text, "required"), JSON.stringify(text));
  }
  for (const text of MALFORMED_MACS) {
    assert.equal(isMac(text), false, JSON.stringify(text));
    assert.equal(parseMac(text), null, JSON.stringify(text));
  }
});

Deno.test("address: an interface's address may carry a prefix, host bits and all", () => {
  assert.deepEqual(parseIpPrefix("10.1.0.5"), { ip: { family: 4, value: 0x0a010005n } });
  assert.deepEqual(parseIpPrefix("10.1.0.5/24"), {
    ip: { family: 4, value: 0x0a010005n },
    prefix: 24,
  });
  assert.equal((parseIpPrefix("fd00::5/64") as { prefix: number }).prefix, 64);
  assert.match((parseIpPrefix("10.1.0.5", "required") as { error: string }).error, /not a CIDR/);
  assert.equal(normalizeIp("FD00:0::5"), "fd00::5");
  assert.equal(canonicalIp("FD00:0::5"), "fd00::5");
  assert.equal(canonicalIp("not an address"), "not an address");
});

Deno.test("address: MACs in any case and with - parse to the canonical form; kinds by first octet", () => {
  assert.equal(parseMac("02:AA:bb:cc:dd:ee"), "02:aa:bb:cc:dd:ee");
  assert.equal(parseMac("02-aa-bb-cc-dd-ee"), "02:aa:bb:cc:dd:ee");
  assert.ok(isMac("02:aa:bb:cc:dd:ee"));
  assert.equal(isMac("02:AA:bb:cc:dd:ee"), false, "the APIs take the lowercase form");
  assert.equal(macKind("ff:ff:ff:ff:ff:ff"), "broadcast");
  assert.equal(macKind("01:00:5e:00:00:01"), "multicast");
  assert.equal(macKind("33:33:00:00:00:01"), "multicast");
  assert.equal(macKind("00:00:00:00:00:00"), "zero");
  assert.equal(macKind("02:00:00:00:00:01"), "local");
  assert.equal(macKind("00:1b:21:3a:4f:10"), "vendor");
});
