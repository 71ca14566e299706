/** The host ports' nftables table: its text, and the kernel's nftables takes it (in a netns). */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { type HostNet, hostPortName, hostRuleset, markOf, NFT_TABLE } from "./host_nft.ts";

const nets: HostNet[] = [
  { number: 1, port: hostPortName(1), egress: true, hostAccess: false },
  { number: 2, port: hostPortName(2), egress: false, hostAccess: true },
  { number: 7, port: hostPortName(7), egress: true, hostAccess: true },
];

Deno.test("host nft: names and marks are short, stable and per network", () => {
  assert.equal(hostPortName(65535), "kh65535");
  assert.ok(hostPortName(65535).length <= 15);
  assert.equal(markOf(7), 0x6b6e0007);
});

Deno.test("host nft: the tables are rebuilt whole; with no host port only the pods' veths stay shut to the kernel", () => {
  const head = `table ip ${NFT_TABLE} {}\ndelete table ip ${NFT_TABLE}\n` +
    `table arp ${NFT_TABLE} {}\ndelete table arp ${NFT_TABLE}\n`;
  const empty = hostRuleset([]);
  assert.ok(empty.startsWith(head), "created if missing, then deleted and made again at once");
  assert.ok(!empty.includes("chain forward"), empty);
  const text = hostRuleset(nets);
  assert.ok(text.startsWith(head));
  // The kernel never takes IPv4 or ARP from a pod's veth (the userspace datapath reads it too).
  for (const t of [empty, text]) {
    assert.ok(t.includes('priority raw; policy accept;\n    iifname "kn*" drop'), t);
    assert.ok(t.includes("table arp knitter {\n  chain input {"), t);
  }
  const all = '{ "kh1", "kh2", "kh7" }';
  // Every network its own conntrack zone (two tenants may have the same addresses).
  for (const n of nets) {
    assert.ok(text.includes(`iifname "${n.port}" ct original zone set ${n.number}`), n.port);
  }
  // Only egress networks are marked, routed back by mark, and masqueraded.
  assert.ok(text.includes(`iifname "kh1" meta mark set 0x6b6e0001 ct mark set meta mark`));
  assert.ok(!text.includes(`iifname "kh2" meta mark`));
  assert.ok(text.includes(`iifname { "kh1", "kh7" } oifname != ${all} masquerade`));
  // Never from one host port to another; new connections out only from egress networks.
  const forward = text.slice(text.indexOf("chain forward"), text.indexOf("chain postrouting"));
  const rules = forward.split("\n").map((l) => l.trim()).filter((l) => /^(i|o)ifname/.test(l));
  assert.deepEqual(rules, [
    `iifname ${all} oifname ${all} drop`,
    `iifname ${all} ct state established,related accept`,
    `iifname { "kh1", "kh7" } accept`,
    `iifname ${all} drop`,
    `oifname ${all} ct state established,related accept`,
    `oifname { "kh2", "kh7" } ct status dnat accept`,
    `oifname ${all} drop`,
  ]);
  // Nothing new from pods to the node itself.
  assert.ok(
    text.includes(`iifname ${all} ct state established,related accept\n    iifname ${all} drop`),
  );
});

Deno.test("host nft: nftables accepts the table, applies it atomically and shrinks it to the guard (in a netns of the test)", async () => {
  await using cleanup = new Cleanup();
  const ns = cleanup.name("nft");
  cleanup.netns(ns);
  await run(["ip", "netns", "add", ns]);
  const nft = (stdin: string) => run(["nft", "-f", "-"], { netns: ns, stdin });
  for (const set of [nets, nets.slice(1), nets]) {
    await nft(hostRuleset(set));
    const listed = (await run(["nft", "list", "table", "ip", NFT_TABLE], { netns: ns })).stdout;
    assert.equal(listed.includes('"kh1"'), set.includes(nets[0]));
    assert.match(listed, /chain forward/);
  }
  await nft(hostRuleset([]));
  const r = await run(["nft", "list", "ruleset"], { netns: ns });
  assert.ok(!r.stdout.includes("chain forward"), r.stdout);
  assert.match(r.stdout, /table arp knitter/);
});
