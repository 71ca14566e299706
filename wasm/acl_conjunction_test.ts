/**
 * Security group rules as conjunctive matches (assembly/acl.ts, conjunction.ts): what a node with
 * groups costs in flows, and that the packets a port's rules allow are exactly those the compiled
 * flows let through (run by the offline evaluator, flow_eval.ts, which completes conjunctions the
 * way Open vSwitch does).
 */
import assert from "node:assert/strict";
import { compileFlows, compileFlowsTs } from "./flows.ts";
import type { FlowAcl, FlowAclRule } from "./acl_input.ts";
import type { FlowInput } from "./flow_input.ts";
import { type EvalPacket, evaluate, flowTables } from "./flow_eval.ts";
import { mulberry32 } from "./mulberry32.ts";

/**
 * `locals` local ports (and as many remote ones) over 10 networks, port i in group i % `groups`;
 * each group's rules name the group itself as peer, as the benchmark's do
 * (tests/bench/security_groups_bench.ts): TCP 80 and ICMP from the group, TCP 8000-8100 from
 * 10.0.0.0/8, anything out to 10.0.0.0/8, UDP 53 out to anyone.
 */
function groupedNode(locals: number, groups: number): FlowInput {
  const input: FlowInput = {
    tunnelPort: 100,
    networks: Array.from({ length: 10 }, (_, i) => ({
      id: i + 1,
      type: "vxlan" as const,
      segmentId: 9000 + i,
    })),
    localPorts: [],
    remotePorts: [],
  };
  const members: string[][] = Array.from({ length: groups }, () => []);
  const hex = (n: number) => (n & 255).toString(16).padStart(2, "0");
  for (let i = 0; i < locals; i++) {
    const network = 1 + (i % 10);
    const k = 1 + Math.floor(i / 10);
    const ips = [`10.${network}.${k >> 8}.${k & 255}`];
    if (i % 4 === 0) ips.push(`fd00:${network}::${k.toString(16)}`);
    const mac = `02:00:00:${hex(i >> 16)}:${hex(i >> 8)}:${hex(i)}`;
    input.localPorts.push({ ofport: 1000 + i, network, mac, ips, cookie: 1 + i });
    const remote = `10.${network}.${128 + (k >> 8)}.${k & 255}`;
    input.remotePorts.push({
      network,
      mac: `02:20:00:${hex(i >> 16)}:${hex(i >> 8)}:${hex(i)}`,
      ips: [remote],
      nodeIp: "192.168.0.2",
    });
    members[i % groups].push(ips[0], remote);
  }
  input.acls = input.localPorts.map((p, i): FlowAcl => {
    const group = members[i % groups];
    return {
      cookie: p.cookie,
      rules: [
        { direction: "ingress", protocol: "tcp", portMin: 80, portMax: 80, remote: group },
        {
          direction: "ingress",
          protocol: "tcp",
          portMin: 8000,
          portMax: 8100,
          remote: ["10.0.0.0/8"],
        },
        { direction: "ingress", protocol: "icmp", remote: group },
        { direction: "egress", protocol: "any", remote: ["10.0.0.0/8"] },
        { direction: "egress", protocol: "udp", portMin: 53, portMax: 53 },
      ],
    };
  });
  return input;
}

Deno.test("acl conjunctions: a node whose ports are in groups has at most 2.5× the flows per port it has without", () => {
  const model = groupedNode(1000, 100);
  const without = compileFlows({ ...model, acls: undefined }).length;
  const grouped = compileFlows(model).length;
  assert.ok(
    grouped <= 2.5 * without,
    `${grouped} flows with groups, ${without} without: ${(grouped / without).toFixed(2)}×`,
  );
  assert.deepEqual(compileFlowsTs(model), compileFlows(model));
});

Deno.test("acl conjunctions: one flow per match, every conjunction with all its dimensions", () => {
  const lines = compileFlows(groupedNode(200, 10));
  const heads = lines.map((l) => l.slice(l.indexOf(",") + 1, l.indexOf(",actions=")));
  assert.equal(new Set(heads).size, heads.length, "two flows share table, priority and match");
  const dims = new Map<string, Set<number>>();
  const ids = new Set<string>();
  for (const l of lines) {
    for (const [, id, k, n] of l.matchAll(/conjunction\((\d+),(\d+)\/(\d+)\)/g)) {
      const key = `${id}/${n}`;
      dims.set(key, (dims.get(key) ?? new Set()).add(Number(k)));
    }
    const conj = /conj_id=(\d+)/.exec(l);
    if (conj) ids.add(conj[1]);
  }
  assert.ok(dims.size > 0);
  for (const [key, ks] of dims) {
    const [id, n] = key.split("/");
    assert.equal(ks.size, Number(n), `conjunction ${key}: dimensions ${[...ks]}`);
    assert.ok(ids.has(id), `conjunction ${id} has no conj_id flow`);
  }
  assert.equal(ids.size, dims.size);
});

Deno.test("acl conjunctions: a change to one port's rules rewrites that port's flows only (ids stay)", () => {
  const before = groupedNode(200, 10);
  const after = structuredClone(before);
  // Port 0 (cookie 1) no longer allows ping; its group's other ports still do.
  after.acls![0].rules = after.acls![0].rules.filter((r) => r.protocol !== "icmp");
  const a = new Set(compileFlows(before));
  const b = new Set(compileFlows(after));
  const changed = [...a].filter((l) => !b.has(l)).concat([...b].filter((l) => !a.has(l)));
  assert.deepEqual(
    changed,
    [...a].filter((l) => l.startsWith("cookie=0x0000000100000001,") && l.includes(",icmp,")),
    changed.join("\n"),
  );
});

/** Whether IPv4 `ip` is in `cidr` (an address or a.b.c.d/n); IPv6 peers never hold. */
function inPeer(cidr: string, ip: string): boolean {
  if (cidr.includes(":")) return false;
  const [base, bits = "32"] = cidr.split("/");
  const num = (t: string) => t.split(".").reduce((v, b) => v * 256 + Number(b), 0);
  const size = 2 ** (32 - Number(bits));
  return Math.floor(num(base) / size) === Math.floor(num(ip) / size);
}

/** What the rules say of a new IPv4 connection: does a rule of `direction` allow it? */
function allows(
  rules: FlowAclRule[],
  direction: "ingress" | "egress",
  p: EvalPacket,
  peer: string,
): boolean {
  return rules.some((r) =>
    r.direction === direction &&
    (r.protocol === "any" || r.protocol === p.proto) &&
    (r.portMin === undefined || p.proto === "icmp" ||
      (p.dstPort! >= r.portMin && p.dstPort! <= r.portMax!)) &&
    (r.remote === undefined || r.remote.some((c) => inPeer(c, peer)))
  );
}

/**
 * `n` ports of one network, most with random rules whose peers are other ports' addresses (as
 * groups resolve), CIDRs and anyone, with overlapping port ranges.
 */
function randomNode(seed: number, n: number): FlowInput {
  const rand = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
  const ips = Array.from({ length: n }, (_, i) => `10.1.0.${10 + i}`);
  const input: FlowInput = {
    tunnelPort: 100,
    networks: [{ id: 1, type: "vxlan", segmentId: 7001 }],
    localPorts: ips.map((ip, i) => ({
      ofport: 1 + i,
      network: 1,
      mac: `02:00:00:00:01:${i.toString(16).padStart(2, "0")}`,
      ips: i % 3 === 0 ? [ip, `fd00:1::${(10 + i).toString(16)}`] : [ip],
      cookie: 1 + i,
    })),
    remotePorts: [],
    acls: [],
  };
  const cidrs = ["10.1.0.0/28", "10.1.0.16/30", "0.0.0.0/0", "fd00:1::/64", "10.2.0.0/16"];
  for (let i = 0; i < n; i++) {
    if (rand() < 0.2) continue;
    const rules: FlowAclRule[] = [];
    for (let k = Math.floor(rand() * 6); k > 0; k--) {
      const protocol = pick(["tcp", "udp", "icmp", "any"] as const);
      const rule: FlowAclRule = { direction: pick(["ingress", "egress"] as const), protocol };
      if ((protocol === "tcp" || protocol === "udp") && rand() < 0.7) {
        const a = Math.floor(rand() * 40);
        rule.portMin = a;
        rule.portMax = a + Math.floor(rand() * 30);
      }
      if (rand() < 0.85) {
        rule.remote = Array.from(
          { length: Math.floor(rand() * 6) },
          () => rand() < 0.7 ? pick(ips) : pick(cidrs),
        );
      }
      rules.push(rule);
    }
    input.acls!.push({ cookie: 1 + i, rules });
  }
  return input;
}

/** The last value a flow set reg7 to (the ofport INGRESS_ACL delivers to). */
function reg7(flows: { actions: string[] }[]): number | undefined {
  let v: number | undefined;
  for (const f of flows) {
    for (const a of f.actions) {
      const m = /^set_field:(\w+)->reg7$/.exec(a);
      if (m) v = Number(m[1]);
    }
  }
  return v;
}

/** Whether actions send the packet out of `ofport`, by number or through reg7. */
function outputs(actions: string[], inReg7: number | undefined, ofport: number): boolean {
  return actions.includes(`output:${ofport}`) ||
    (actions.includes("output:NXM_NX_REG7[0..15]") && inReg7 === ofport);
}

Deno.test("acl conjunctions: the flows deliver exactly the new connections the rules allow (random nodes)", () => {
  for (let seed = 1; seed <= 30; seed++) {
    const rand = mulberry32(1000 + seed);
    const model = randomNode(seed, 4 + (seed % 8));
    const tables = flowTables(compileFlows(model));
    const acl = (i: number) => model.acls!.find((a) => a.cookie === 1 + i);
    const ports = model.localPorts;
    for (let t = 0; t < 200; t++) {
      const a = Math.floor(rand() * ports.length);
      const b = Math.floor(rand() * ports.length);
      if (a === b) continue;
      const proto = (["tcp", "udp", "icmp"] as const)[Math.floor(rand() * 3)];
      const packet: EvalPacket = {
        proto,
        inPort: ports[a].ofport,
        dlSrc: ports[a].mac,
        dlDst: ports[b].mac,
        ipSrc: ports[a].ips[0],
        ipDst: ports[b].ips[0],
        dstPort: proto === "icmp" ? undefined : Math.floor(rand() * 80),
      };
      const out = acl(a) === undefined || allows(acl(a)!.rules, "egress", packet, packet.ipDst);
      const inn = acl(b) === undefined || allows(acl(b)!.rules, "ingress", packet, packet.ipSrc);
      const { matched } = evaluate(tables, packet);
      const delivered = matched.some((f) => outputs(f.actions, reg7(matched), ports[b].ofport));
      assert.equal(
        delivered,
        out && inn,
        `seed ${seed}: ${JSON.stringify(packet)}\n${matched.map((f) => f.line).join("\n")}`,
      );
    }
  }
});
