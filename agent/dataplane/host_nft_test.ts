/** The host ports' nftables table: its text, and the kernel's nftables takes it (in a netns). */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import {
  type HostNet,
  hostPortName,
  hostRuleset,
  markOf,
  MAX_MARKED,
  NFT_TABLE,
  tableOf,
} from "./host_nft.ts";

const net = (
  number: number,
  egress: boolean,
  hostAccess: boolean,
  third: number,
  advertise = false,
): HostNet => ({
  number,
  port: hostPortName(number),
  egress,
  hostAccess,
  advertise,
  gateway: `10.${third}.0.1`,
  cidr: `10.${third}.0.0/24`,
});
const nets: HostNet[] = [net(1, true, false, 70), net(2, false, true, 71), net(7, true, true, 73)];
const UPLINKS = ["eth0"];

/** The rules of one chain of the ip table, trimmed. */
function rulesOf(text: string, chain: string): string[] {
  const start = text.indexOf(`chain ${chain} {`);
  const body = text.slice(start, text.indexOf("\n  }", start));
  return body.split("\n").slice(2).map((l) => l.trim());
}

Deno.test("host nft: names and marks are short, stable and per network", () => {
  assert.equal(hostPortName(65535), "kh65535");
  assert.ok(hostPortName(65535).length <= 15);
  // The network's number in the marks' bits of ours (MARK_MASK), its routing table in a block.
  assert.equal(markOf(7), 0x00070000);
  assert.equal(markOf(MAX_MARKED), 0xffff0000);
  assert.equal(tableOf(7), 0x6b6e0007);
});

Deno.test("host nft: the tables are rebuilt whole; with no host port every kh* port and the pods' veths stay shut to the kernel", () => {
  const head = `table ip ${NFT_TABLE} {}\ndelete table ip ${NFT_TABLE}\n` +
    `table arp ${NFT_TABLE} {}\ndelete table arp ${NFT_TABLE}\n`;
  const empty = hostRuleset([]);
  assert.ok(empty.startsWith(head), "created if missing, then deleted and made again at once");
  const text = hostRuleset(nets, UPLINKS);
  assert.ok(text.startsWith(head));
  // The kernel never takes IPv4 or ARP from a pod's veth (the userspace datapath reads it too).
  for (const t of [empty, text]) {
    assert.ok(t.includes('priority raw; policy accept;\n    iifname "kn*" drop'), t);
    assert.ok(t.includes("table arp knitter {\n  chain input {"), t);
    // A host port the table does not know of (set up before its rules) is closed.
    assert.deepEqual(rulesOf(t, "input").slice(0, 2), [
      'iifname "kh*" ct state established,related ct direction reply accept',
      'iifname "kh*" drop',
    ]);
    assert.ok(rulesOf(t, "forward").includes('iifname "kh*" drop'), t);
    assert.ok(rulesOf(t, "forward").includes('oifname "kh*" drop'), t);
  }
  // Every network its own conntrack zone (two tenants may have the same addresses).
  for (const n of nets) {
    assert.ok(text.includes(`iifname "${n.port}" ct original zone set ${n.number}`), n.port);
  }
});

Deno.test("host nft: a connection's mark is set once, when it starts, and what comes from a host port must carry its network's (no taking over another tenant's connection)", () => {
  const text = hostRuleset(nets, UPLINKS);
  const mark = (n: number) => `0x${markOf(n).toString(16).padStart(8, "0")}`;
  // Only the marks' bits of ours change: the others (kube-proxy's, say) are kept.
  const set = (n: number) => `ct mark set ct mark & 0x0000ffff | ${mark(n)}`;
  assert.deepEqual(rulesOf(text, "mangle"), [
    ...nets.map((n) => `iifname "${n.port}" ct state new ${set(n.number)}`),
    ...nets.map((n) => `iifname "${n.port}" ct mark & 0xffff0000 != ${mark(n.number)} drop`),
    ...nets.map((n) =>
      `ct mark & 0xffff0000 == ${mark(n.number)} meta mark set meta mark & 0x0000ffff | ${
        mark(n.number)
      }`
    ),
  ]);
  // Connections into a host port (hostPort's DNAT, the node's probes) carry its mark too.
  const into = nets.map((n) => `oifname "${n.port}" ct state new ${set(n.number)}`);
  assert.deepEqual(rulesOf(text, "output").slice(0, 3), into);
  assert.deepEqual(rulesOf(text, "forward").slice(1, 4), into);
});

Deno.test("host nft: egress only to the uplinks and never link-local, no pass for established connections, DNAT only to the network's own pods", () => {
  const text = hostRuleset(nets, UPLINKS);
  assert.deepEqual(rulesOf(text, "forward").filter((r) => !r.includes("ct mark set")), [
    'iifname "kh*" oifname "kh*" drop',
    'iifname { "kh1", "kh7" } oifname { "eth0" } ip daddr != 169.254.0.0/16 accept',
    'iifname { "kh2", "kh7" } ct direction reply ct status dnat accept',
    'iifname "kh*" drop',
    'iifname { "eth0" } oifname { "kh1", "kh7" } ct direction reply accept',
    'oifname "kh2" ip daddr 10.71.0.0/24 ct direction original ct status dnat accept',
    'oifname "kh7" ip daddr 10.73.0.0/24 ct direction original ct status dnat accept',
    'oifname "kh*" drop',
  ]);
  assert.deepEqual(rulesOf(text, "postrouting"), [
    'iifname { "kh1", "kh7" } oifname { "eth0" } masquerade',
  ]);
  // No uplink: no egress at all.
  const none = hostRuleset(nets);
  assert.ok(!none.includes("masquerade") && !none.includes("169.254"), none);
});

Deno.test("host nft: an advertised network takes what the fabric routes to its CIDR, in its own zone, and only its pods answer it; never from another host port", () => {
  const adv = [net(1, true, false, 70), net(4, false, false, 74, true)];
  const text = hostRuleset(adv, UPLINKS);
  // From any interface but the host ports (pods of other networks), into the network's zone.
  assert.ok(
    rulesOf(text, "raw").includes('iifname != "kh*" ip daddr 10.74.0.0/24 ct original zone set 4'),
    text,
  );
  assert.deepEqual(rulesOf(text, "forward").filter((r) => !r.includes("ct mark set")), [
    'iifname "kh*" oifname "kh*" drop',
    'iifname { "kh1" } oifname { "eth0" } ip daddr != 169.254.0.0/16 accept',
    'iifname { "kh4" } ct direction reply accept',
    'iifname "kh*" drop',
    'iifname { "eth0" } oifname { "kh1" } ct direction reply accept',
    'oifname "kh4" ip daddr 10.74.0.0/24 ct direction original accept',
    'oifname "kh*" drop',
  ]);
  // No NAT for it: its pods see the fabric's addresses, and answer them as themselves.
  assert.deepEqual(rulesOf(text, "postrouting"), [
    'iifname { "kh1" } oifname { "eth0" } masquerade',
  ]);
  // Not advertised: nothing of the kind.
  assert.ok(!hostRuleset(nets, UPLINKS).includes("ct direction original accept"));
});

Deno.test("host nft: the gateways' addresses are the node's on host ports only; no redirects to pods", () => {
  const text = hostRuleset(nets, UPLINKS);
  const gws = "{ 10.70.0.1, 10.71.0.1, 10.73.0.1 }";
  assert.ok(text.includes(`iifname != "kh*" arp operation request arp daddr ip ${gws} drop`), text);
  assert.deepEqual(rulesOf(text, "input")[2], `iifname != "lo" ip daddr ${gws} drop`);
  assert.ok(rulesOf(text, "output").includes('oifname "kh*" icmp type redirect drop'));
  // Two egress networks with one gateway address: once in the sets.
  const twice = hostRuleset([net(1, true, false, 70), net(2, true, false, 70)], UPLINKS);
  assert.ok(twice.includes("arp daddr ip { 10.70.0.1 } drop"), twice);
});

/** Network 5 (no egress, hostAccess nor advertise) with two floating addresses; network 1 has one. */
const floating: HostNet[] = [
  { ...nets[0], floating: [{ address: "203.0.113.9", pod: "10.70.0.9" }] },
  {
    ...net(5, false, false, 75),
    floating: [
      { address: "203.0.113.5", pod: "10.75.0.5" },
      { address: "203.0.113.6", pod: "10.75.0.6" },
    ],
  },
];

Deno.test("host nft: a floating address is DNATed to its pod in the pod's network's zone and mark; only what came for it, or answers the pod's own, reaches the pod", () => {
  const text = hostRuleset(floating, UPLINKS);
  assert.ok(
    rulesOf(text, "raw").includes('iifname != "kh*" ip daddr 203.0.113.5 ct original zone set 5'),
  );
  const mark = rulesOf(text, "mangle");
  const set5 = 'iifname != "kh*" ip daddr 203.0.113.5 ct state new ct mark set ct mark & ' +
    "0x0000ffff | 0x00050000";
  assert.ok(mark.includes(set5), mark.join("\n"));
  // Before the packet mark follows the connection's (its routing table finds the host port).
  assert.ok(mark.indexOf(set5) < mark.findIndex((r) => r.startsWith("ct mark & 0xffff0000 ==")));
  assert.deepEqual(
    rulesOf(text, "prerouting"),
    [
      "type nat hook prerouting priority dstnat; policy accept;",
      'iifname != "kh*" ip daddr 203.0.113.9 dnat to 10.70.0.9',
      'iifname != "kh*" ip daddr 203.0.113.5 dnat to 10.75.0.5',
      'iifname != "kh*" ip daddr 203.0.113.6 dnat to 10.75.0.6',
    ].slice(1),
  );
  const fwd = rulesOf(text, "forward");
  const into = 'oifname "kh5" ip daddr 10.75.0.5 ct original ip daddr 203.0.113.5 accept';
  const answers = 'oifname "kh5" ip daddr 10.75.0.5 ct reply ip daddr 203.0.113.5 accept';
  const out = 'iifname "kh5" ip saddr 10.75.0.5 oifname != "kh*" ip daddr != 169.254.0.0/16 accept';
  for (const r of [into, answers, out]) assert.ok(fwd.includes(r), `${r}\n${fwd.join("\n")}`);
  // Never from one host port to another; the network's other pods get nothing of it.
  assert.ok(fwd.indexOf('iifname "kh*" oifname "kh*" drop') < fwd.indexOf(out));
  assert.ok(fwd.indexOf(out) < fwd.indexOf('iifname "kh*" drop'));
  assert.ok(fwd.indexOf(into) < fwd.indexOf('oifname "kh*" drop'));
  assert.ok(!fwd.some((r) => r.includes("kh5") && r.includes("10.75.0.0/24")), fwd.join("\n"));
  // Out with the floating address, before the egress network's masquerade.
  const nat = rulesOf(text, "postrouting");
  const snat9 = 'iifname "kh1" ip saddr 10.70.0.9 oifname != "kh*" snat to 203.0.113.9';
  assert.ok(nat.includes(snat9), nat.join("\n"));
  assert.ok(nat.indexOf(snat9) < nat.findIndex((r) => r.includes("masquerade")));
  // Without floating addresses: no DNAT chain at all.
  assert.ok(!hostRuleset(nets, UPLINKS).includes("chain prerouting"));
});

/** The text of one table (`ip`, `ip6`, `arp`) of a ruleset. */
function tableOf6(text: string, family: string): string {
  const start = text.indexOf(`table ${family} ${NFT_TABLE} {\n`);
  if (start < 0) return "";
  return text.slice(start, text.indexOf("\n}", start));
}

const dual = (n: HostNet, third: number): HostNet => ({
  ...n,
  v6: { gateway: `fd00:${third}::1`, cidr: `fd00:${third}::/64` },
});

Deno.test("host nft: a dual-stack network's IPv6 side gets the IPv4 rules' twin in an ip6 table, neighbour discovery let through; an IPv4-only node has none", () => {
  const six = [
    dual(net(1, true, false, 70), 70),
    net(2, false, true, 71),
    dual(net(7, true, true, 73), 73),
  ];
  const text = hostRuleset(six, UPLINKS);
  const v6 = tableOf6(text, "ip6");
  // The IPv4 table is the one it was without the IPv6 sides.
  assert.equal(tableOf6(text, "ip"), tableOf6(hostRuleset(nets, UPLINKS), "ip"));
  for (
    const rule of [
      'iifname "kh1" ct original zone set 1',
      'iifname { "kh1", "kh7" } oifname { "eth0" } ip6 daddr != fe80::/10 accept',
      'iifname { "kh1", "kh7" } oifname { "eth0" } masquerade',
      'oifname "kh7" ip6 daddr fd00:73::/64 ct direction original ct status dnat accept',
      'iifname != "lo" ip6 daddr { fd00:70::1, fd00:73::1 } drop',
      'oifname "kh*" icmpv6 type nd-redirect drop',
      'iifname "kh*" icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept',
    ]
  ) assert.ok(v6.includes(rule), `${rule}\n${v6}`);
  // kh2 has no IPv6 side: not in the ip6 table.
  assert.ok(!v6.includes('"kh2"'), v6);
  // Neighbour discovery (untracked: no mark) passes before the mark's drop, in mangle and input.
  const mangle = rulesOf(v6, "mangle");
  assert.ok(mangle[0].includes("nd-neighbor-solicit"), mangle.join("\n"));
  const input = rulesOf(v6, "input");
  assert.ok(input[0].includes("nd-neighbor-solicit"), input.join("\n"));
  // IPv6 egress may leave through interfaces of its own.
  assert.ok(hostRuleset(six, UPLINKS, ["eth6"]).includes('oifname { "eth6" } masquerade'));
  // An IPv6-only network: in the ip6 table only, no IPv4 rule names its port.
  const only6: HostNet = {
    number: 9,
    port: hostPortName(9),
    egress: true,
    hostAccess: false,
    advertise: false,
    v6: { gateway: "fd00:79::1", cidr: "fd00:79::/64" },
  };
  const mixed = hostRuleset([...nets, only6], UPLINKS);
  assert.ok(!tableOf6(mixed, "ip").includes('"kh9"'), tableOf6(mixed, "ip"));
  assert.ok(!tableOf6(mixed, "arp").includes("fd00"), tableOf6(mixed, "arp"));
  assert.ok(tableOf6(mixed, "ip6").includes('iifname "kh9" ct original zone set 9'));
  assert.equal(tableOf6(mixed, "ip"), tableOf6(hostRuleset(nets, UPLINKS), "ip"));
  // Without an IPv6 side anywhere: no ip6 table, only its deletion.
  assert.equal(tableOf6(hostRuleset(nets, UPLINKS), "ip6"), "");
  assert.ok(hostRuleset(nets, UPLINKS).includes(`delete table ip6 ${NFT_TABLE}`));
});

Deno.test("host nft: nftables accepts the table, applies it atomically and shrinks it to the guard (in a netns of the test)", async () => {
  await using cleanup = new Cleanup();
  const ns = cleanup.name("nft");
  cleanup.netns(ns);
  await run(["ip", "netns", "add", ns]);
  const nft = (stdin: string) => run(["nft", "-f", "-"], { netns: ns, stdin });
  const advertised = [...nets, net(4, false, false, 74, true)];
  const six = [
    dual(net(1, true, false, 70), 70),
    dual(net(4, false, true, 74, true), 74),
    { ...dual(net(5, true, true, 75), 75), gateway: undefined, cidr: undefined },
  ];
  for (const set of [nets, nets.slice(1), advertised, floating, six, nets]) {
    await nft(hostRuleset(set, UPLINKS));
    const listed = (await run(["nft", "list", "table", "ip", NFT_TABLE], { netns: ns })).stdout;
    const listed6 = await run(["nft", "list", "table", "ip6", NFT_TABLE], {
      netns: ns,
      check: false,
    });
    assert.equal(listed6.stdout.includes("fd00:74::/64"), set === six, listed6.stdout);
    assert.equal(listed.includes('"kh1"'), set.some((n) => n.number === 1));
    assert.match(listed, /chain forward/);
    assert.equal(listed.includes("10.74.0.0/24"), set === advertised || set === six);
    assert.equal(listed.includes("dnat to 10.75.0.5"), set === floating);
  }
  await nft(hostRuleset([]));
  const r = await run(["nft", "list", "ruleset"], { netns: ns });
  assert.ok(!r.stdout.includes("zone set"), r.stdout);
  assert.match(r.stdout, /table arp knitter/);
});

/** Network 6, dual stack, its pod with an IPv4 and an IPv6 floating address. */
const floating6: HostNet[] = [{
  ...dual(net(6, false, false, 76), 76),
  floating: [{ address: "203.0.113.7", pod: "10.76.0.7" }],
  floating6: [{ address: "2001:db8:f::7", pod: "fd00:76::7" }],
}];

Deno.test("host nft: an IPv6 floating address is DNATed to the pod's IPv6 address in the ip6 table, in its network's zone and mark, and the pod leaves with it; the IPv4 one stays in the ip table", () => {
  const text = hostRuleset(floating6, UPLINKS);
  const six = tableOf6(text, "ip6");
  const four = tableOf6(text, "ip");
  assert.ok(
    rulesOf(six, "raw").includes('iifname != "kh*" ip6 daddr 2001:db8:f::7 ct original zone set 6'),
    six,
  );
  assert.ok(
    rulesOf(six, "mangle").includes(
      'iifname != "kh*" ip6 daddr 2001:db8:f::7 ct state new ct mark set ct mark & 0x0000ffff | 0x00060000',
    ),
  );
  assert.deepEqual(rulesOf(six, "prerouting"), [
    'iifname != "kh*" ip6 daddr 2001:db8:f::7 dnat to fd00:76::7',
  ]);
  const fwd = rulesOf(six, "forward");
  for (
    const r of [
      'oifname "kh6" ip6 daddr fd00:76::7 ct original ip6 daddr 2001:db8:f::7 accept',
      'oifname "kh6" ip6 daddr fd00:76::7 ct reply ip6 daddr 2001:db8:f::7 accept',
      'iifname "kh6" ip6 saddr fd00:76::7 oifname != "kh*" ip6 daddr != fe80::/10 accept',
    ]
  ) assert.ok(fwd.includes(r), `${r}\n${fwd.join("\n")}`);
  assert.ok(
    rulesOf(six, "postrouting").includes(
      'iifname "kh6" ip6 saddr fd00:76::7 oifname != "kh*" snat to 2001:db8:f::7',
    ),
  );
  // Each family's bindings in its own table only.
  assert.ok(!six.includes("203.0.113.7") && four.includes("dnat to 10.76.0.7"), six);
  assert.ok(!four.includes("2001:db8:f::7"), four);
});

Deno.test("host nft: nftables accepts an IPv6 floating address's rules (in a netns of the test)", async () => {
  await using cleanup = new Cleanup();
  const ns = cleanup.name("nft6");
  cleanup.netns(ns);
  await run(["ip", "netns", "add", ns]);
  await run(["nft", "-f", "-"], { netns: ns, stdin: hostRuleset(floating6, UPLINKS) });
  const listed = (await run(["nft", "list", "table", "ip6", NFT_TABLE], { netns: ns })).stdout;
  assert.match(listed, /ip6 daddr 2001:db8:f::7 dnat to fd00:76::7/);
  assert.match(listed, /snat to 2001:db8:f::7/);
});
