import assert from "node:assert/strict";
import { compileFlows, compileFlowsTs, flowsMemoryBytes, parseDumpFlows } from "./flows.ts";
import type {
  FlowInput,
  FlowLocalPort,
  FlowNetwork,
  FlowRemotePort,
  FlowRoute,
} from "./flow_input.ts";
import { PRIORITY, TABLE } from "./pipeline.ts";
import { mulberry32 } from "./mulberry32.ts";
import { scenarios } from "./testdata/scenarios.ts";
import { compileIsolated, isolateConflicts } from "./flow_conflicts.ts";
import type { FlowService } from "./service_input.ts";

const impls: [string, (input: FlowInput) => string[]][] = [
  ["wasm", compileFlows],
  ["ts", compileFlowsTs],
];

// ---- Golden flow sets: UPDATE_GOLDEN=1 deno test --allow-all wasm/flows_test.ts rewrites them.

const update = Deno.permissions.querySync({ name: "env", variable: "UPDATE_GOLDEN" }).state ===
    "granted" && Deno.env.get("UPDATE_GOLDEN") === "1";

async function golden(name: string): Promise<string[]> {
  const text = await Deno.readTextFile(new URL(`./testdata/${name}.flows`, import.meta.url));
  return text.split("\n").filter((line) => line !== "");
}

for (const [name, input] of Object.entries(scenarios)) {
  Deno.test(`golden: ${name}`, async () => {
    // Conflicting remote entries are isolated first (flow_conflicts.ts); both engines compile the rest.
    const { lines, conflicts } = compileIsolated(input, compileFlows);
    assert.deepEqual(compileIsolated(input, compileFlowsTs).lines, lines, "the TS engine differs");
    if (name !== "conflicts") assert.deepEqual(conflicts, [], "a golden model without conflicts");
    if (update) {
      await Deno.writeTextFile(
        new URL(`./testdata/${name}.flows`, import.meta.url),
        lines.join("\n") + "\n",
      );
      return;
    }
    const want = await golden(name);
    for (let i = 0; i < Math.max(lines.length, want.length); i++) {
      assert.equal(lines[i], want[i], `${name}.flows line ${i + 1}`);
    }
  });
}

Deno.test("golden: every flow agent/PIPELINE.md shows under Security groups is one its golden models compile", async () => {
  const doc = await Deno.readTextFile(new URL("../agent/PIPELINE.md", import.meta.url));
  const at = doc.indexOf("## Security groups");
  const section = doc.slice(at, doc.indexOf("\n## ", at + 1));
  const documented = section.split("\n").filter((line) => line.startsWith("cookie="));
  assert.ok(documented.length > 0, "no flow lines in the Security groups section");
  const compiled = new Set([
    ...compileFlows(scenarios.security_groups),
    ...compileFlows(scenarios.routed_security_groups),
  ]);
  for (const line of documented) assert.ok(compiled.has(line), line);
});

Deno.test("golden: every flow agent/PIPELINE.md shows under Flow records is one the flow_records model compiles", async () => {
  const doc = await Deno.readTextFile(new URL("../agent/PIPELINE.md", import.meta.url));
  const at = doc.indexOf("## Flow records");
  const section = doc.slice(at, doc.indexOf("\n## ", at + 1));
  const documented = section.split("\n").filter((line) => line.startsWith("cookie="));
  assert.ok(documented.length > 0, "no flow lines in the Flow records section");
  const compiled = new Set(compileFlows(scenarios.flow_records));
  for (const line of documented) assert.ok(compiled.has(line), line);
});

Deno.test("golden: the SAMPLE FLOW DUMP of agent/PIPELINE.md is the sample_node flow set", async () => {
  const doc = await Deno.readTextFile(new URL("../agent/PIPELINE.md", import.meta.url));
  const at = doc.indexOf("## Sample flow dump");
  assert.ok(at >= 0, "PIPELINE.md has no '## Sample flow dump' section");
  const block = doc.slice(at).match(/```text\n([\s\S]*?)```/);
  assert.ok(block, "no ```text block in the sample section");
  const documented = block[1].split("\n").filter((line) => line.startsWith("cookie="));
  assert.deepEqual(documented, compileFlows(scenarios.sample_node));
});

Deno.test("golden: every flow agent/PIPELINE.md shows under Host port is one the golden model host_ports compiles", async () => {
  const doc = await Deno.readTextFile(new URL("../agent/PIPELINE.md", import.meta.url));
  const at = doc.indexOf("## Host port");
  const block = doc.slice(at).match(/```text\n([\s\S]*?)```/)![1].split("\n").filter(Boolean);
  const golden = new Set(compileFlows(scenarios.host_ports));
  assert.ok(block.length >= 6, "the section shows the host port's flows");
  for (const line of block) assert.ok(golden.has(line), line);
});

/** The flow lines agent/PIPELINE.md shows in its section `heading`. */
async function documentedFlows(heading: string): Promise<string[]> {
  const doc = await Deno.readTextFile(new URL("../agent/PIPELINE.md", import.meta.url));
  const at = doc.indexOf(heading);
  const section = doc.slice(at, doc.indexOf("\n## ", at + 1));
  return section.split("\n").filter((line) => line.startsWith("cookie="));
}

Deno.test("golden: every flow agent/PIPELINE.md shows under Routing (IPv6) and Host port (IPv6) is one routing6 or host_ports6 compiles", async () => {
  const routing = await documentedFlows("## Routing");
  assert.ok(routing.some((l) => l.includes("ipv6_dst=")), "the Routing section shows IPv6 routes");
  const routed = new Set(compileFlows(scenarios.routing6));
  for (const line of routing) assert.ok(routed.has(line), line);
  const host = (await documentedFlows("## Host port")).filter((l) => l.includes("ipv6"));
  assert.equal(host.length, 4, "the Host port section shows the IPv6 flows");
  const golden = new Set(compileFlows(scenarios.host_ports6));
  for (const line of host) assert.ok(golden.has(line), line);
});

// ---- Random models.

function hex(v: number, width: number): string {
  return v.toString(16).padStart(width, "0");
}

/** A random valid model; addresses in random spellings, sometimes repeated within a port. */
function randomModel(rand: () => number, maxPorts: number): FlowInput {
  const pick = <T>(list: T[]): T => list[Math.floor(rand() * list.length)];
  const int = (n: number) => Math.floor(rand() * n);
  const tunnelPort = pick([100, 4242, 65279]);
  const physnets = [200, 201];
  const networks: FlowNetwork[] = [];
  const ids = new Set<number>();
  const flat = new Set<number>();
  const netCount = 1 + int(6);
  for (let i = 0; i < netCount; i++) {
    let id: number;
    do id = pick([1 + int(30), 1 + int(65535)]); while (ids.has(id));
    ids.add(id);
    const r = rand();
    if (r < 0.5) {
      networks.push({ id, type: "vxlan", segmentId: 1 + i * 1000 + int(1000) });
    } else if (r < 0.8 || flat.size === physnets.length) {
      networks.push({
        id,
        type: "vlan",
        segmentId: 1 + i * 600 + int(600),
        physnetPort: 200 + i % 2,
      });
    } else {
      const port = physnets.find((p) => !flat.has(p))!;
      flat.add(port);
      networks.push({ id, type: "flat", physnetPort: port });
    }
    if (rand() < 0.6) {
      const gatewayMac = `0a:58:ff:${hex(i, 2)}:${hex(int(256), 2)}:${hex(int(256), 2)}`;
      Object.assign(networks[i], {
        gateway: rand() < 0.3
          ? `fd00:fe:${i}::${hex(1 + int(0xfffe), 1)}`
          : `10.254.${i}.${1 + int(254)}`,
        gatewayMac: rand() < 0.2 ? gatewayMac.toUpperCase() : gatewayMac,
      });
      // Dual stack: an IPv6 gateway besides an IPv4 one.
      if (rand() < 0.3 && !networks[i].gateway!.includes(":")) {
        networks[i].gateway6 = `fd00:fd:${i}::${hex(1 + int(0xfffe), 1)}`;
      }
    }
  }
  // Serials from 10 keep every address unique and unicast.
  let serial = 10;
  const mac = () => {
    const n = ++serial;
    const text = `${pick(["02", "0a", "de", "ae"])}:${hex(int(256), 2)}:${hex(n >> 16, 2)}:${
      hex((n >> 8) & 255, 2)
    }:${hex(n & 255, 2)}:${hex(int(256), 2)}`;
    return rand() < 0.2 ? text.toUpperCase() : text;
  };
  const v4 = () => {
    const n = ++serial;
    return `${pick([10, 172, 192, 100, 1])}.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
  };
  const v6 = () => {
    const n = ++serial;
    const w = [
      pick([0x2001, 0xfd00, 0xfe80, 0, int(0xff00)]),
      0,
      0,
      int(3),
      0,
      0,
      n >> 16,
      n & 0xffff,
    ];
    if (w[0] === 0 && rand() < 0.5) w[1] = int(2);
    for (let i = 1; i < 6; i++) if (rand() < 0.2) w[i] = int(0x10000);
    if (w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0) w[5] = 0;
    return spellIpv6(w, rand);
  };
  const ips = () => {
    const list: string[] = [];
    const count = int(4);
    for (let i = 0; i < count; i++) list.push(rand() < 0.6 ? v4() : v6());
    if (list.length > 0 && rand() < 0.1) list.push(list[0]);
    return list;
  };
  const localPorts: FlowLocalPort[] = [];
  const ofports = new Set([tunnelPort, ...physnets]);
  // Host ports (the node on the network) on some networks with a gateway (IPv4 or IPv6).
  for (const [i, n] of networks.entries()) {
    if (n.gateway === undefined || rand() < 0.5) continue;
    n.hostPort = 300 + i;
    ofports.add(n.hostPort);
  }
  const cookies = new Set<number>();
  const localCount = int(maxPorts + 1);
  for (let i = 0; i < localCount; i++) {
    let ofport: number;
    do ofport = pick([1 + int(99), 1 + int(65279)]); while (ofports.has(ofport));
    ofports.add(ofport);
    let cookie: number;
    do cookie = pick([1 + int(1000), 1 + int(2 ** 31)]); while (cookies.has(cookie));
    cookies.add(cookie);
    localPorts.push({ ofport, network: pick(networks).id, mac: mac(), ips: ips(), cookie });
  }
  const nodes = ["192.168.0.2", "192.168.0.3", "10.255.0.1", "172.31.9.200"];
  const remotePorts: FlowRemotePort[] = [];
  const remoteCount = int(maxPorts + 1);
  for (let i = 0; i < remoteCount; i++) {
    remotePorts.push({ network: pick(networks).id, mac: mac(), ips: ips(), nodeIp: pick(nodes) });
  }
  const routes = randomRoutes(rand, networks, localPorts, remotePorts);
  // Drawn last, so that the models of the seeds before DSCP marking stay as they were up to here.
  for (const n of networks) if (rand() < 0.3) n.dscp = int(64);
  return { tunnelPort, networks, localPorts, remotePorts, routes };
}

/**
 * Routes between the networks with an IPv4 gateway: connected ones (to the network's gateway
 * /24) and static ones through an address of a port of `to`, or one no port has.
 */
function randomRoutes(
  rand: () => number,
  networks: FlowNetwork[],
  locals: FlowLocalPort[],
  remotes: FlowRemotePort[],
): FlowRoute[] {
  const routed = networks.filter((n) => n.gateway !== undefined && !n.gateway.includes(":"));
  const routes: FlowRoute[] = [];
  if (routed.length === 0 || rand() < 0.2) return routes;
  const pick = <T>(list: T[]): T => list[Math.floor(rand() * list.length)];
  const subnet = (n: FlowNetwork) => n.gateway!.replace(/\.\d+$/, ".0/24");
  for (const from of routed) {
    for (const to of routed) {
      if (from !== to && rand() < 0.7) routes.push({ from: from.id, to: to.id, dst: subnet(to) });
    }
    if (rand() < 0.5) {
      const to = pick(routed);
      const v4 = [...locals, ...remotes].filter((p) => p.network === to.id)
        .flatMap((p) => p.ips.filter((ip) => !ip.includes(":")));
      const via = v4.length > 0 && rand() < 0.8 ? pick(v4) : "10.250.0.9";
      const n = () => 1 + Math.floor(rand() * 200);
      const dst = pick([
        "0.0.0.0/0",
        "10.0.0.0/8",
        `10.${n()}.0.0/16`,
        `10.${n()}.${n()}.0/24`,
        `10.${n()}.${n()}.${n()}/32`,
      ]);
      routes.push({ from: from.id, to: to.id, dst, via });
    }
  }
  return [...routes, ...randomRoutes6(rand, networks, [...locals, ...remotes])];
}

/**
 * Routes between the networks with an IPv6 gateway (their gateway's /64; a dual-stack network's
 * gateway6): connected ones and static ones through an IPv6 address of a port of `to`, or one no
 * port has.
 */
function randomRoutes6(
  rand: () => number,
  networks: FlowNetwork[],
  ports: (FlowLocalPort | FlowRemotePort)[],
): FlowRoute[] {
  const gateway6 = (n: FlowNetwork) => n.gateway?.includes(":") ? n.gateway : n.gateway6;
  const routed = networks.filter((n) => gateway6(n) !== undefined);
  const routes: FlowRoute[] = [];
  if (routed.length === 0 || rand() < 0.3) return routes;
  const pick = <T>(list: T[]): T => list[Math.floor(rand() * list.length)];
  const subnet = (n: FlowNetwork) => gateway6(n)!.replace(/::[0-9a-f]+$/, "::/64");
  for (const from of routed) {
    for (const to of routed) {
      if (from !== to && rand() < 0.7) routes.push({ from: from.id, to: to.id, dst: subnet(to) });
    }
    if (rand() < 0.5) {
      const to = pick(routed);
      const v6 = ports.filter((p) => p.network === to.id)
        .flatMap((p) => p.ips.filter((ip) => ip.includes(":")));
      const via = v6.length > 0 && rand() < 0.8 ? pick(v6) : "fd00:fa::9";
      const n = () => (1 + Math.floor(rand() * 0xfff)).toString(16);
      const dst = pick(["::/0", "fd00::/8", `fd00:${n()}::/32`, `fd00:${n()}:${n()}::/48`]);
      routes.push({
        from: from.id,
        to: to.id,
        dst: rand() < 0.2 ? `fd00:${n()}::${n()}/128` : dst,
        via,
      });
    }
  }
  return routes;
}

/** Writes 8 words as a valid IPv6 text: random case, leading zeros, `::` and IPv4 tail. */
function spellIpv6(w: number[], rand: () => number): string {
  const word = (v: number) => {
    const text = v.toString(16);
    const padded = "000".slice(0, Math.floor(rand() * (5 - text.length))) + text;
    return rand() < 0.2 ? padded.toUpperCase() : padded;
  };
  const tail = rand() < 0.2;
  const hexWords = tail ? 6 : 8;
  const parts = w.slice(0, hexWords).map(word);
  if (tail) parts.push(`${w[6] >> 8}.${w[6] & 255}.${w[7] >> 8}.${w[7] & 255}`);
  // Compress a random run of zero words, of any length (even one).
  const zeros = [...parts.keys()].filter((i) => i < hexWords && w[i] === 0);
  if (zeros.length === 0 || rand() < 0.3) return parts.join(":");
  const start = zeros[Math.floor(rand() * zeros.length)];
  let end = start;
  while (end + 1 < hexWords && w[end + 1] === 0 && rand() < 0.8) end++;
  return `${parts.slice(0, start).join(":")}::${parts.slice(end + 1).join(":")}`;
}

const SEEDS = [1, 2, 3, 0xc0ffee, Date.now() >>> 0];

Deno.test("property: WASM and TS give the same lines on random models", () => {
  for (const seed of SEEDS) {
    const rand = mulberry32(seed);
    for (let round = 0; round < 60; round++) {
      const input = randomModel(rand, round < 50 ? 8 : 200);
      const wasm = compileFlows(input);
      const ts = compileFlowsTs(input);
      assert.equal(wasm.length, ts.length, `seed ${seed} round ${round}: line count`);
      for (let i = 0; i < ts.length; i++) {
        assert.equal(wasm[i], ts[i], `seed ${seed} round ${round}: line ${i}`);
      }
    }
  }
});

Deno.test("property: WASM and TS give the same lines on random models with routes and security groups", () => {
  let mixed = 0;
  let routed6 = 0;
  for (const seed of SEEDS) {
    const rand = mulberry32(seed);
    for (let round = 0; round < 30; round++) {
      const input = { ...randomModel(rand, round < 25 ? 8 : 100) };
      input.acls = randomAcls(rand, input.localPorts);
      if (input.routes?.length && input.acls?.length) mixed++;
      const where = `seed ${seed} round ${round} (${input.routes?.length ?? 0} routes)`;
      const lines = compileFlows(input);
      assert.deepEqual(lines, compileFlowsTs(input), where);
      if (lines.some((l) => l.includes("ipv6_dst=") && l.includes("dec_ttl"))) routed6++;
    }
  }
  assert.ok(mixed >= SEEDS.length * 5, `${mixed} models had both routes and groups`);
  assert.ok(routed6 >= SEEDS.length * 3, `${routed6} models routed IPv6`);
});

/** Rules for about half of the local ports, with peers of both families, some none. */
function randomAcls(rand: () => number, ports: FlowLocalPort[]): FlowInput["acls"] {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)];
  const remotes = [undefined, [], ["10.0.0.0/8"], ["0.0.0.0/0", "fd00::/16"], ["192.168.1.7"]];
  return ports.filter(() => rand() < 0.5).map((p) => ({
    cookie: p.cookie,
    rules: Array.from({ length: Math.floor(rand() * 4) }, () => {
      const protocol = pick(["tcp", "udp", "icmp", "icmpv6", "any"] as const);
      const remote = pick(remotes);
      return {
        direction: pick(["ingress", "egress"] as const),
        protocol,
        ...(remote ? { remote } : {}),
        ...(protocol === "tcp" && rand() < 0.5 ? { portMin: 80, portMax: 90 } : {}),
      };
    }),
  }));
}

/** The parts of a line the properties look at. */
interface Flow {
  line: string;
  cookie: bigint;
  table: number;
  priority: number;
  match: Map<string, string>;
  actions: string[];
}

function parseLine(line: string): Flow {
  const at = line.indexOf(",actions=");
  const head = line.slice(0, at).split(",");
  const match = new Map<string, string>();
  for (const field of head.slice(3)) {
    const eq = field.indexOf("=");
    match.set(eq < 0 ? field : field.slice(0, eq), eq < 0 ? "" : field.slice(eq + 1));
  }
  return {
    line,
    cookie: BigInt(head[0].slice(7)),
    table: Number(head[1].slice(6)),
    priority: Number(head[2].slice(9)),
    match,
    actions: line.slice(at + 9).split(","),
  };
}

/** Registers that hold the ARP reply's scratch: xreg1 (= reg2:reg3) and reg4, in any spelling. */
const SCRATCH = /xreg1|PKT_REG1|REG4|\breg[234]\b/;

/**
 * The scratch registers cannot carry anything from one decision to another: nothing matches them,
 * xreg1 is set only by an ARP flow right before its jump to ARP_REPLY (or a gateway's neighbour
 * solicitation flow, which makes the packet an advertisement first), and only ARP_REPLY reads them
 * (or sets reg4).
 */
function checkScratch(flow: Flow, fail: (why: string) => never): void {
  if ([...flow.match.keys()].some((k) => SCRATCH.test(k))) fail("matches a scratch register");
  const jump = `goto_table:${TABLE.ARP_REPLY}`;
  const set = flow.actions.findIndex((a) => a.endsWith("->xreg1"));
  if (set >= 0) {
    const rest = flow.actions.slice(set + 1).join();
    const arp = flow.match.has("arp") && rest === jump;
    const nd = flow.match.get("icmp_type") === "135" &&
      rest === `set_field:136->icmpv6_type,${jump}`;
    if (flow.table !== TABLE.ARP || !(arp || nd)) {
      fail("xreg1 is set but not right before an ARP flow's jump to ARP_REPLY");
    }
  } else if (flow.actions.includes(jump)) {
    fail("jumps to ARP_REPLY without setting xreg1");
  }
  const others = flow.actions.filter((a) => !a.endsWith("->xreg1"));
  if (flow.table !== TABLE.ARP_REPLY && others.some((a) => SCRATCH.test(a))) {
    fail("scratch register used outside ARP_REPLY");
  }
}

/**
 * Checks the isolation and no-loop properties of one model's flows, and that the ARP scratch
 * registers do not leak; throws on a violation.
 */
function checkIsolation(input: FlowInput, lines: string[], where: string): void {
  const netOfPort = new Map(input.localPorts.map((p) => [p.ofport, p.network]));
  const cookieOfPort = new Map(input.localPorts.map((p) => [p.ofport, p.cookie]));
  const nets = new Map(input.networks.map((n) => [n.id, n]));
  const hostOf = new Map(
    input.networks.filter((n) => n.hostPort !== undefined).map((n) => [n.hostPort!, n.id]),
  );
  const outside = new Set<number>();
  // Outputs to a host port (network/dl_dst → priority), and the drops of that MAC from outside.
  const toHost = new Map<string, { priority: number; line: string }>();
  const hostGuards = new Map<string, number>();
  for (const flow of lines.map(parseLine)) {
    const fail = (why: string) => assert.fail(`${where}: ${why}\n  ${flow.line}`);
    checkScratch(flow, fail);
    const net = flow.match.has("reg0") ? Number(flow.match.get("reg0")) : undefined;
    const cookieNet = Number(flow.cookie >> 32n);
    if (flow.cookie === 0n) {
      // Table defaults; the only ones with a match are the shared ARP reply (arp, for arp_op) and
      // the shared neighbour advertisement.
      const match = [...flow.match.keys()].join();
      const sharedReply = flow.table === TABLE.ARP_REPLY &&
        (match === "arp" || match === "icmp6,icmp_type,icmp_code");
      if (flow.priority !== PRIORITY.DEFAULT || (match !== "" && !sharedReply)) {
        fail("cookie 0 is not a default");
      }
      continue;
    }
    if (flow.table === TABLE.CLASSIFY) {
      const inPort = Number(flow.match.get("in_port"));
      const setReg0 = flow.actions.find((a) => a.endsWith("->reg0"));
      const target = Number(setReg0?.slice(10, -6));
      let expected: number | undefined;
      if (netOfPort.has(inPort)) {
        expected = netOfPort.get(inPort);
        const reg1 = `set_field:0x${cookieOfPort.get(inPort)!.toString(16)}->reg1`;
        if (!flow.actions.includes(reg1)) fail("a local port must load its cookie into reg1");
      } else if (hostOf.has(inPort)) {
        expected = hostOf.get(inPort);
        if (flow.actions.some((a) => a.endsWith("->reg1"))) {
          fail("the host port must come in as from outside (reg1 0)");
        }
      } else if (inPort === input.tunnelPort) {
        const vni = Number(flow.match.get("tun_id"));
        expected = input.networks.find((n) => n.type === "vxlan" && n.segmentId === vni)?.id;
      } else {
        const vlan = flow.match.get("dl_vlan");
        expected = input.networks.find((n) =>
          n.physnetPort === inPort &&
          (vlan === undefined ? n.type === "flat" : n.segmentId === Number(vlan))
        )?.id;
      }
      if (expected === undefined || target !== expected) fail(`classified into network ${target}`);
      if (cookieNet !== target) fail("cookie and network differ");
      continue;
    }
    if (flow.table === TABLE.SPOOF) {
      const inPort = Number(flow.match.get("in_port"));
      if (netOfPort.get(inPort) !== cookieNet) fail("spoof flow of another network's port");
      // They only allow, IP marked with the DSCP of the port's own network if it has one.
      const dscp = input.networks.find((n) => n.id === cookieNet)?.dscp;
      const mark = dscp === undefined || flow.actions[0] === `goto_table:${TABLE.ARP}`
        ? ""
        : `set_field:${dscp}->ip_dscp,`;
      if (flow.actions.join() !== `${mark}goto_table:${TABLE.ARP}`) fail("spoof flows only allow");
      continue;
    }
    if (net === undefined) fail("no reg0 in a table after CLASSIFY");
    if (cookieNet !== net) fail("cookie and reg0 differ");
    // Only a route crosses networks: from its network into the one it names (a router's choice).
    const into = flow.actions.find((a) => a.endsWith("->reg0"));
    if (into !== undefined) {
      const to = Number(into.slice(10, -6));
      const routed = (input.routes ?? []).some((r) => r.from === net && r.to === to);
      if (flow.table !== TABLE.ROUTE || !routed) fail(`moves traffic into network ${to}`);
    }
    const n = nets.get(net!)!;
    if (flow.match.get("reg1") === "0") {
      if (flow.priority === PRIORITY.FROM_OUTSIDE) outside.add(net!);
      if (flow.actions.join() === "drop" && flow.match.has("dl_dst")) {
        hostGuards.set(`${net}/${flow.match.get("dl_dst")}`, flow.priority);
      }
    }
    let vni: number | undefined;
    let vlanVid: number | undefined;
    for (const action of flow.actions) {
      if (action.endsWith("->tun_id")) vni = Number(action.slice(10, -8));
      if (action.endsWith("->vlan_vid")) vlanVid = Number(action.slice(10, -10));
      if (!action.startsWith("output:")) continue;
      const port = Number(action.slice(7));
      if (netOfPort.has(port)) {
        if (netOfPort.get(port) !== net) fail(`output to port ${port} of another network`);
        continue;
      }
      if (hostOf.has(port)) {
        if (hostOf.get(port) !== net) fail(`output to the host port ${port} of another network`);
        const dst = flow.match.get("dl_dst");
        if (dst === undefined) fail("output to the host port for any destination MAC");
        toHost.set(`${net}/${dst}`, { priority: flow.priority, line: flow.line });
        continue;
      }
      // To the outside: never what came from there (reg1=0), which FROM_OUTSIDE shadows.
      if (flow.match.get("reg1") === "0" || flow.priority >= PRIORITY.FROM_OUTSIDE) {
        fail("traffic from outside could go back out");
      }
      if (port === input.tunnelPort) {
        if (n.type !== "vxlan" || vni !== n.segmentId) fail("tunnel output with a foreign VNI");
      } else if (port === n.physnetPort && n.type !== "vxlan") {
        const want = n.type === "vlan" ? 4096 + n.segmentId! : undefined;
        if (vlanVid !== want) fail(`physnet output with VLAN ${vlanVid}`);
      } else {
        fail(`output to port ${port} outside network ${net}`);
      }
    }
  }
  for (const n of input.networks) {
    assert.ok(outside.has(n.id), `${where}: network ${n.id} has no FROM_OUTSIDE drop`);
  }
  // Nothing from outside reaches the node: a drop of that MAC for reg1=0 shadows every output.
  for (const [key, out] of toHost) {
    const guard = hostGuards.get(key);
    assert.ok(
      guard !== undefined && guard > out.priority,
      `${where}: traffic from outside could reach the node\n  ${out.line}`,
    );
  }
}

Deno.test("property: no flow crosses networks, nothing from outside goes back out (nor to the node), no scratch leaks", () => {
  let hostPorts = 0;
  for (const seed of SEEDS) {
    const rand = mulberry32(seed);
    for (let round = 0; round < 40; round++) {
      const input = randomModel(rand, 30);
      hostPorts += input.networks.filter((n) => n.hostPort !== undefined).length;
      checkIsolation(input, compileFlows(input), `seed ${seed} round ${round}`);
    }
  }
  assert.ok(hostPorts > 10, `the models have host ports (${hostPorts})`);
});

Deno.test("property: lines and flow keys are unique, sorted; repeated IPs add nothing", () => {
  for (const seed of SEEDS) {
    const rand = mulberry32(seed);
    for (let round = 0; round < 40; round++) {
      const input = randomModel(rand, 30);
      const lines = compileFlows(input);
      for (let i = 1; i < lines.length; i++) {
        assert.ok(lines[i - 1] < lines[i], `seed ${seed} round ${round}: line ${i} out of order`);
      }
      // What OVS identifies a flow by is unique too, so a set difference is a correct update.
      const keys = lines.map((l) => l.slice(l.indexOf(",") + 1, l.indexOf(",actions=")));
      assert.equal(new Set(keys).size, keys.length, `seed ${seed} round ${round}: flow keys`);
      const once = structuredClone(input);
      for (const p of [...once.localPorts, ...once.remotePorts]) p.ips = [...new Set(p.ips)];
      assert.deepEqual(compileFlows(once), lines, `seed ${seed} round ${round}`);
    }
  }
});

// ---- Bad input: both implementations throw the same Error naming the item.

/** A valid base model; each case breaks one thing in a copy. */
function base(): FlowInput {
  return structuredClone(
    {
      tunnelPort: 100,
      networks: [
        { id: 1, type: "vxlan", segmentId: 5001 },
        { id: 2, type: "vlan", segmentId: 10, physnetPort: 200 },
        { id: 3, type: "flat", physnetPort: 200 },
      ],
      localPorts: [
        { ofport: 1, network: 1, mac: "02:00:00:00:00:01", ips: ["10.0.0.1"], cookie: 1 },
        {
          ofport: 2,
          network: 2,
          mac: "02:00:00:00:00:02",
          ips: ["10.0.0.2", "fd00::2"],
          cookie: 2,
        },
      ],
      remotePorts: [
        { network: 1, mac: "02:00:00:00:00:03", ips: ["10.0.0.3"], nodeIp: "192.168.0.3" },
      ],
    } satisfies FlowInput,
  );
}

// deno-lint-ignore no-explicit-any
type Loose = any;

/** Gives networks 1 and 2 IPv4 gateways, network 4 an IPv6 one, and sets one route. */
function routed(m: Loose, route: Loose): void {
  Object.assign(m.networks[0], { gateway: "10.0.0.254", gatewayMac: "0a:58:00:00:00:01" });
  Object.assign(m.networks[1], { gateway: "10.0.1.254", gatewayMac: "0a:58:00:00:00:02" });
  m.networks.push({
    id: 4,
    type: "vxlan",
    segmentId: 5004,
    gateway: "fd00::1",
    gatewayMac: "0a:58:00:00:00:04",
  });
  m.routes = [route];
}
const badCases: [string, (m: Loose) => unknown, string][] = [
  ["null input", () => null, "input: expected an object, got null"],
  [
    "tunnel port 0",
    (m) => (m.tunnelPort = 0),
    "tunnelPort: expected an integer in 1..65279, got 0",
  ],
  ["networks missing", (m) => delete m.networks, "networks: expected an array, got undefined"],
  [
    "network id too big",
    (m) => (m.networks[1].id = 65536),
    "networks[1].id: expected an integer in 1..65535, got 65536",
  ],
  [
    "network type",
    (m) => (m.networks[0].type = "gre"),
    'networks[0].type: expected "vxlan", "vlan" or "flat", got "gre"',
  ],
  [
    "vxlan without VNI",
    (m) => delete m.networks[0].segmentId,
    "networks[0].segmentId (VNI): expected an integer in 1..16777215, got undefined",
  ],
  [
    "vxlan with physnet",
    (m) => (m.networks[0].physnetPort = 200),
    "networks[0].physnetPort: expected none for vxlan, got 200",
  ],
  [
    "VLAN 4095",
    (m) => (m.networks[1].segmentId = 4095),
    "networks[1].segmentId (VLAN ID): expected an integer in 1..4094, got 4095",
  ],
  [
    "vlan without physnet",
    (m) => delete m.networks[1].physnetPort,
    "networks[1].physnetPort: expected an integer in 1..65279, got undefined",
  ],
  [
    "flat with segment",
    (m) => (m.networks[2].segmentId = 5),
    "networks[2].segmentId: expected none for flat, got 5",
  ],
  [
    "ofport fraction",
    (m) => (m.localPorts[0].ofport = 1.5),
    "localPorts[0].ofport: expected an integer in 1..65279, got 1.5",
  ],
  [
    "ofport past max",
    (m) => (m.localPorts[0].ofport = 65280),
    "localPorts[0].ofport: expected an integer in 1..65279, got 65280",
  ],
  [
    "cookie 0",
    (m) => (m.localPorts[1].cookie = 0),
    "localPorts[1].cookie: expected an integer in 1..2147483648, got 0",
  ],
  [
    "ips not an array",
    (m) => (m.localPorts[0].ips = "10.0.0.1"),
    'localPorts[0].ips: expected an array of strings, got "10.0.0.1"',
  ],
  [
    "ip not a string",
    (m) => (m.remotePorts[0].ips = [7]),
    "remotePorts[0].ips[0]: expected a string, got 7",
  ],
  [
    "mac not a string",
    (m) => (m.localPorts[0].mac = 1),
    "localPorts[0].mac: expected a string, got 1",
  ],
  [
    "node ip missing",
    (m) => delete m.remotePorts[0].nodeIp,
    "remotePorts[0].nodeIp: expected a string, got undefined",
  ],
  [
    "port not an object",
    (m) => (m.localPorts[1] = []),
    "localPorts[1]: expected an object, got an array",
  ],
  [
    "duplicate network id",
    (m) => (m.networks[2].id = 1),
    "networks[2]: id 1 is already used by networks[0]",
  ],
  [
    "duplicate VNI",
    (m) => m.networks.push({ id: 4, type: "vxlan", segmentId: 5001 }),
    "networks[3]: VNI 5001 is already used by networks[0]",
  ],
  [
    "duplicate VLAN",
    (m) => m.networks.push({ id: 4, type: "vlan", segmentId: 10, physnetPort: 200 }),
    "networks[3]: VLAN 10 on physnet port 200 is already used by networks[1]",
  ],
  [
    "two flat on one port",
    (m) => m.networks.push({ id: 4, type: "flat", physnetPort: 200 }),
    "networks[3]: the untagged traffic of physnet port 200 already belongs to networks[2]",
  ],
  [
    "physnet is the tunnel",
    (m) => (m.networks[2].physnetPort = 100),
    "networks[2]: physnetPort 100 is the tunnel port",
  ],
  [
    "unknown network (local)",
    (m) => (m.localPorts[1].network = 9),
    "localPorts[1]: unknown network 9",
  ],
  [
    "unknown network (remote)",
    (m) => (m.remotePorts[0].network = 9),
    "remotePorts[0]: unknown network 9",
  ],
  [
    "ofport is the tunnel",
    (m) => (m.localPorts[1].ofport = 100),
    "localPorts[1]: ofport 100 is the tunnel port",
  ],
  [
    "ofport is the physnet",
    (m) => (m.localPorts[0].ofport = 200),
    "localPorts[0]: ofport 200 is the physnet port of networks[1]",
  ],
  [
    "duplicate ofport",
    (m) => (m.localPorts[1].ofport = 1),
    "localPorts[1]: ofport 1 is already used by localPorts[0]",
  ],
  [
    "duplicate cookie",
    (m) => (m.localPorts[1].cookie = 1),
    "localPorts[1]: cookie 1 is already used by localPorts[0]",
  ],
  [
    "short MAC",
    (m) => (m.localPorts[0].mac = "02:00:00:00:01"),
    'localPorts[0].mac: "02:00:00:00:01" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  ],
  [
    "dashed MAC",
    (m) => (m.localPorts[0].mac = "02-00-00-00-00-01"),
    'localPorts[0].mac: "02-00-00-00-00-01" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  ],
  [
    "multicast MAC",
    (m) => (m.remotePorts[0].mac = "01:00:5e:00:00:01"),
    'remotePorts[0].mac: "01:00:5e:00:00:01" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  ],
  [
    "zero MAC",
    (m) => (m.localPorts[0].mac = "00:00:00:00:00:00"),
    'localPorts[0].mac: "00:00:00:00:00:00" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  ],
  [
    "non-hex MAC",
    (m) => (m.localPorts[0].mac = "02:00:00:00:00:0g"),
    'localPorts[0].mac: "02:00:00:00:00:0g" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  ],
  [
    "non-ASCII MAC",
    (m) => (m.localPorts[0].mac = "02:00:00:00:00:0\u0661"),
    'localPorts[0].mac: "02:00:00:00:00:0\u0661" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  ],
  [
    "MAC that narrows to ASCII",
    (m) => (m.localPorts[0].mac = "02:00:00:00:00:0\u0131"),
    'localPorts[0].mac: "02:00:00:00:00:0\u0131" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)',
  ],
  [
    "duplicate MAC (local)",
    (m) =>
      m.localPorts.push({ ofport: 3, network: 1, mac: "02:00:00:00:00:01", ips: [], cookie: 3 }),
    "localPorts[2].mac: 02:00:00:00:00:01 is already used in network 1 by localPorts[0]",
  ],
  [
    "duplicate MAC (remote)",
    (m) => (m.remotePorts[0].mac = "02:00:00:00:00:01"),
    "remotePorts[0].mac: 02:00:00:00:00:01 is already used in network 1 by localPorts[0]",
  ],
  [
    "duplicate MAC in another case",
    (
      m,
    ) => (m.remotePorts[0].mac = "02:00:00:00:00:0A",
      m.remotePorts.push({ network: 1, mac: "02:00:00:00:00:0a", ips: [], nodeIp: "192.168.0.4" })),
    "remotePorts[1].mac: 02:00:00:00:00:0a is already used in network 1 by remotePorts[0]",
  ],
  [
    "duplicate IPv4",
    (m) => (m.remotePorts[0].ips = ["10.0.0.9", "10.0.0.1"]),
    "remotePorts[0].ips[1]: 10.0.0.1 is already used in network 1 by localPorts[0]",
  ],
  [
    "duplicate IPv6 spelled otherwise",
    (
      m,
    ) => (m.localPorts.push({
      ofport: 3,
      network: 2,
      mac: "02:00:00:00:00:04",
      ips: ["FD00:0::0:2"],
      cookie: 3,
    })),
    "localPorts[2].ips[0]: FD00:0::0:2 is already used in network 2 by localPorts[1]",
  ],
  ...[
    "10.0.0",
    "10.0.0.256",
    "10.0.0.01",
    "0.1.2.3",
    "127.0.0.1",
    "224.0.0.1",
    "255.255.255.255",
    "10.0.0.1/24",
    " 10.0.0.1",
    "",
    "::",
    "::1",
    "ff02::1",
    "::ffff:10.0.0.1",
    "1:2:3:4:5:6:7:8:9",
    "1::2::3",
    "12345::1",
    "fe80::1%eth0",
    "1:2:3:4:5:6:7::8",
    "1:2:3:4:5:6:7:1.2.3.4",
    "::1.2.3",
    "1:2:3:4:5:6:7:",
    ":1:2:3:4:5:6:7",
    "1:::2",
  ].map((ip): [string, (m: Loose) => unknown, string] => [
    `bad IP ${JSON.stringify(ip)}`,
    (m) => (m.localPorts[1].ips = ["10.0.0.2", ip]),
    `localPorts[1].ips[1]: ${JSON.stringify(ip)} is not a unicast IPv4 or IPv6 address`,
  ]),
  ["routes not a list", (m) => (m.routes = {}), "routes: expected an array, got object"],
  [
    "a route without dst",
    (m) => (m.routes = [{ from: 1, to: 2 }]),
    "routes[0].dst: expected a string, got undefined",
  ],
  ...([
    [{ from: 9, to: 1 }, "routes[0].from: network 9 is not here or has no IPv4 gateway"],
    [{ from: 1, to: 3 }, "routes[0].to: network 3 is not here or has no IPv4 gateway"],
    [{ from: 1, to: 4 }, "routes[0].to: network 4 is not here or has no IPv4 gateway"],
  ] as const).map(([r, message]): [string, (m: Loose) => unknown, string] => [
    `a route ${JSON.stringify(r)}`,
    (m) => routed(m, { ...r, dst: "10.7.0.0/24" }),
    message,
  ]),
  ...["10.7.0.1/24", "10.7.0.0/33", "10.7.0.0/08", "10.7.0.0", "10.7.0.0/", "/24", "10.7.0/24"].map(
    (
      dst,
    ): [string, (m: Loose) => unknown, string] => [
      `a route to ${JSON.stringify(dst)}`,
      (m) => routed(m, { from: 1, to: 2, dst }),
      `routes[0].dst: ${JSON.stringify(dst)} is not an IPv4 CIDR without host bits (a.b.c.d/n)`,
    ],
  ),
  ...["10.0.0.256", "224.0.0.1", "fd00::2", ""].map((
    via,
  ): [string, (m: Loose) => unknown, string] => [
    `a route via ${JSON.stringify(via)}`,
    (m) => routed(m, { from: 1, to: 2, dst: "10.7.0.0/24", via }),
    `routes[0].via: ${JSON.stringify(via)} is not a unicast IPv4 address`,
  ]),
  // IPv6 routes: networks with an IPv6 gateway (4 here), a CIDR and a next hop of that family.
  ...([
    [{ from: 1, to: 4 }, "routes[0].from: network 1 is not here or has no IPv6 gateway"],
    [{ from: 4, to: 2 }, "routes[0].to: network 2 is not here or has no IPv6 gateway"],
  ] as const).map(([r, message]): [string, (m: Loose) => unknown, string] => [
    `an IPv6 route ${JSON.stringify(r)}`,
    (m) => routed(m, { ...r, dst: "fd00:7::/64" }),
    message,
  ]),
  ...["fd00:7::1/64", "fd00::/129", "fd00::/064", "fd00::", "fd00::/", "fd00::/6x", "fd00:7:/64"]
    .map((dst): [string, (m: Loose) => unknown, string] => [
      `an IPv6 route to ${JSON.stringify(dst)}`,
      (m) => routed(m, { from: 4, to: 4, dst }),
      `routes[0].dst: ${JSON.stringify(dst)} is not an IPv6 CIDR without host bits (x:x::/n)`,
    ]),
  ...["10.0.0.2", "ff02::1", "::1", "fd00::g", ""].map((
    via,
  ): [string, (m: Loose) => unknown, string] => [
    `an IPv6 route via ${JSON.stringify(via)}`,
    (m) => routed(m, { from: 4, to: 4, dst: "fd00:7::/64", via }),
    `routes[0].via: ${JSON.stringify(via)} is not a unicast IPv6 address`,
  ]),
  [
    "gateway without its MAC",
    (m) => (m.networks[1].gateway = "10.0.0.254"),
    "networks[1].gatewayMac: expected a string, got undefined",
  ],
  [
    "gateway MAC without the gateway",
    (m) => (m.networks[2].gatewayMac = "0a:58:00:00:00:01"),
    "networks[2].gateway: expected a string, got undefined",
  ],
  [
    "a local port with the gateway's address",
    (m) => Object.assign(m.networks[0], { gateway: "10.0.0.1", gatewayMac: "0a:58:00:00:00:01" }),
    "localPorts[0].ips[0]: 10.0.0.1 is the gateway of network 1 (networks[0])",
  ],
  [
    "a local port with the gateway MAC",
    (m) => Object.assign(m.networks[0], { gateway: "10.0.0.254", gatewayMac: "02:00:00:00:00:01" }),
    "localPorts[0].mac: 02:00:00:00:00:01 is the gateway MAC of network 1 (networks[0])",
  ],
  [
    "a remote port with the gateway's address",
    (m) => Object.assign(m.networks[0], { gateway: "10.0.0.3", gatewayMac: "0a:58:00:00:00:01" }),
    "remotePorts[0].ips[0]: 10.0.0.3 is the gateway of network 1 (networks[0])",
  ],
  ...["::1", "ff02::1", "10.0.0.256", "224.0.0.1", "", "10.0.0.1/24"].map((
    ip,
  ): [string, (m: Loose) => unknown, string] => [
    `bad gateway ${JSON.stringify(ip)}`,
    (m) => Object.assign(m.networks[0], { gateway: ip, gatewayMac: "0a:58:00:00:00:01" }),
    `networks[0].gateway: ${JSON.stringify(ip)} is not a unicast IPv4 or IPv6 address`,
  ]),
  ...["10.0.0.1", "::1", "ff02::1", "", "fd00::1/64"].map((
    ip,
  ): [string, (m: Loose) => unknown, string] => [
    `bad gateway6 ${JSON.stringify(ip)}`,
    (m) =>
      Object.assign(m.networks[0], {
        gateway: "10.0.0.254",
        gatewayMac: "0a:58:00:00:00:01",
        gateway6: ip,
      }),
    `networks[0].gateway6: ${JSON.stringify(ip)} is not a unicast IPv6 address`,
  ]),
  [
    "gateway6 without the gateway",
    (m) => (m.networks[2].gateway6 = "fd00::1"),
    "networks[2].gateway: expected a string, got undefined",
  ],
  ...["0b:58:00:00:00:01", "0a:58:00:00:00", ""].map((
    mac,
  ): [string, (m: Loose) => unknown, string] => [
    `bad gateway MAC ${JSON.stringify(mac)}`,
    (m) => Object.assign(m.networks[2], { gateway: "10.0.0.254", gatewayMac: mac }),
    `networks[2].gatewayMac: ${
      JSON.stringify(mac)
    } is not a unicast MAC address (xx:xx:xx:xx:xx:xx)`,
  ]),
  ...[64, -1, 4.5, "46"].map((dscp): [string, (m: Loose) => unknown, string] => [
    `bad DSCP ${JSON.stringify(dscp)}`,
    (m) => (m.networks[1].dscp = dscp),
    `networks[1].dscp: expected an integer in 0..63, got ${
      typeof dscp === "string" ? JSON.stringify(dscp) : String(dscp)
    }`,
  ]),
  ...["fd00::1", "10.0.0.256", "127.0.0.1", "192.168.0"].map((
    ip,
  ): [string, (m: Loose) => unknown, string] => [
    `bad node IP ${ip}`,
    (m) => (m.remotePorts[0].nodeIp = ip),
    `remotePorts[0].nodeIp: ${JSON.stringify(ip)} is not a unicast IPv4 address`,
  ]),
];

for (const [name, make] of impls) {
  Deno.test(`${name}: bad input throws an Error naming the item`, () => {
    for (const [what, mutate, message] of badCases) {
      const m = base();
      const replaced = mutate(m);
      const input = replaced === null ? null : m;
      assert.throws(() => make(input as FlowInput), (err: Error) => {
        assert.equal(err.message, message, what);
        return true;
      }, what);
    }
    // The compiler is still usable after an error.
    assert.deepEqual(make(base()), compileFlowsTs(base()));
  });
}

Deno.test("wasm: accepted edge forms of addresses", () => {
  const m = base();
  m.localPorts[1].ips = [
    "10.0.0.2",
    "1:2:3:4:5:6:1.2.3.4",
    "::102:304",
    "1:0:2:3:4:5:6:7",
    "A::",
    "0:0:0:0:0:1:0:0",
  ];
  const lines = compileFlows(m);
  assert.deepEqual(compileFlowsTs(m), lines);
  const sources = lines.filter((l) => l.includes(",ipv6,in_port=2,"))
    .map((l) => l.match(/ipv6_src=([^,]+)/)![1]).sort();
  // As glibc's inet_ntop (hence OVS) prints them.
  assert.deepEqual(sources, [
    "1:0:2:3:4:5:6:7",
    "1:2:3:4:5:6:102:304",
    "::1.2.3.4",
    "::1:0:0",
    "a::",
    "fe80::/10",
  ]);
});

Deno.test("wasm: buffers survive growth and shrinking models", () => {
  const rand = mulberry32(7);
  const before = flowsMemoryBytes();
  const big = randomModel(rand, 3000);
  assert.deepEqual(compileFlows(big), compileFlowsTs(big));
  assert.ok(flowsMemoryBytes() >= before);
  const small = randomModel(rand, 3);
  assert.deepEqual(compileFlows(small), compileFlowsTs(small));
  assert.deepEqual(compileFlows(big), compileFlowsTs(big));
});

Deno.test("wasm: a network without ports still gets its network flows", () => {
  const input: FlowInput = {
    tunnelPort: 100,
    networks: [{ id: 5, type: "vxlan", segmentId: 9 }, { id: 6, type: "flat", physnetPort: 7 }],
    localPorts: [],
    remotePorts: [],
  };
  const lines = compileFlows(input);
  assert.deepEqual(compileFlowsTs(input), lines);
  assert.ok(lines.includes(
    "cookie=0x0000000500000000,table=30,priority=50,reg0=0x5,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
  ));
  assert.ok(lines.includes(
    "cookie=0x0000000600000000,table=30,priority=50,reg0=0x6,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=output:7",
  ));
});

// ---- Reading dump-flows and diffing.

Deno.test("parseDumpFlows: with and without statistics", () => {
  const withStats = `OFPST_FLOW reply (OF1.3) (xid=0x2):
 cookie=0x0, duration=0.017s, table=0, n_packets=0, n_bytes=0, priority=0 actions=drop
 cookie=0x700000005, duration=1.5s, table=10, n_packets=3, n_bytes=180, idle_age=0, priority=100,ip,in_port=1,dl_src=02:00:00:00:00:01,nw_src=10.0.0.1 actions=goto_table:20
 cookie=0x5, duration=0.017s, table=3, n_packets=0, n_bytes=0, ip actions=drop
 cookie=0x0, duration=0.017s, table=4, n_packets=0, n_bytes=0, actions=drop
`;
  const noStats = ` priority=0 actions=drop
 cookie=0x700000005, table=10, priority=100,ip,in_port=1,dl_src=02:00:00:00:00:01,nw_src=10.0.0.1 actions=goto_table:20
 cookie=0x5, table=3, ip actions=drop
 table=4, actions=drop
`;
  const want = [
    "cookie=0x0000000000000000,table=0,priority=0,actions=drop",
    "cookie=0x0000000000000000,table=4,priority=32768,actions=drop",
    "cookie=0x0000000000000005,table=3,priority=32768,ip,actions=drop",
    "cookie=0x0000000700000005,table=10,priority=100,ip,in_port=1,dl_src=02:00:00:00:00:01,nw_src=10.0.0.1,actions=goto_table:20",
  ];
  assert.deepEqual(parseDumpFlows(withStats), want);
  assert.deepEqual(parseDumpFlows(noStats), want);
  assert.throws(() => parseDumpFlows("no actions here"), /not a dump-flows line/);
});

// ---- Conflicting remote entries (flow_conflicts.ts).

Deno.test("conflicts: the local port wins, colliding remotes are all out, malformed ones too", () => {
  const { input, conflicts } = isolateConflicts(scenarios.conflicts);
  assert.deepEqual(
    conflicts.map((c) => [c.remote, c.reason, c.detail]),
    [
      [0, "local", "localPorts[0] (ip 10.0.0.2)"],
      [1, "remote", "remotePorts[2] (mac 02:00:0a:00:00:03)"],
      [2, "remote", "remotePorts[1] (mac 02:00:0a:00:00:03)"],
      [3, "remote", "remotePorts[4] (ip 10.0.0.5)"],
      [4, "remote", "remotePorts[3] (ip 10.0.0.5)"],
      [5, "invalid", 'bad mac "01:00:5e:00:00:01"'],
      [6, "invalid", 'bad nodeIp "224.0.0.1"'],
    ],
  );
  // What each collides on, and with which claimant, as data (the agent reports it to the manager).
  assert.deepEqual(conflicts.map((c) => c.collisions), [
    [{ field: "ip", value: "10.0.0.2", index: 0 }],
    [{ field: "mac", value: "02:00:0a:00:00:03", index: 2 }],
    [{ field: "mac", value: "02:00:0a:00:00:03", index: 1 }],
    [{ field: "ip", value: "10.0.0.5", index: 4 }],
    [{ field: "ip", value: "10.0.0.5", index: 3 }],
    [],
    [],
  ]);
  assert.deepEqual(input.remotePorts.map((p) => p.ips[0]), ["10.0.0.7", "10.0.0.3"]);
  // What is left compiles on both engines to the same lines; the raw model is still rejected.
  assert.deepEqual(compileFlows(input), compileFlowsTs(input));
  assert.throws(() => compileFlows(scenarios.conflicts));
});

Deno.test("conflicts: spellings of one address collide; a model without conflicts is kept as is", () => {
  const base = scenarios.ipv6;
  assert.equal(isolateConflicts(base).input, base);
  const m: FlowInput = structuredClone(base);
  m.remotePorts.push({ ...m.remotePorts[0], mac: "02:00:00:00:09:04", ips: ["FD00:0::3"] });
  const { conflicts } = isolateConflicts(m);
  assert.deepEqual(conflicts.map((c) => c.detail), [
    "remotePorts[1] (ip fd00::3)",
    "remotePorts[0] (ip fd00::3)",
  ]);
  // A remote copy of a local port's MAC (in capitals) and address collides on both.
  const both: FlowInput = structuredClone(base);
  const local = both.localPorts[0];
  both.remotePorts.push({
    network: local.network,
    mac: local.mac.toUpperCase(),
    ips: [...local.ips],
    nodeIp: both.remotePorts[0].nodeIp,
  });
  const taken = isolateConflicts(both).conflicts;
  assert.deepEqual(taken.map((c) => [c.reason, c.collisions.map((k) => [k.field, k.index])]), [
    ["local", [["mac", 0], ...local.ips.map(() => ["ip", 0])]],
  ]);
});

Deno.test("conflicts: a remote port with its network's gateway address or MAC is left out", () => {
  const m: FlowInput = structuredClone(scenarios.gateways);
  const far = m.remotePorts[0];
  m.remotePorts.push(
    { ...far, mac: "02:00:0a:01:00:09", ips: ["10.1.0.1"] },
    { ...far, mac: "0A:58:0A:01:00:01", ips: ["10.1.0.9"] },
    // The gateway of another network (2) is no claim in network 1.
    { ...far, mac: "0a:58:0a:01:00:02", ips: ["10.1.0.10"] },
  );
  const { input, conflicts } = isolateConflicts(m);
  assert.deepEqual(conflicts.map((c) => [c.remote, c.reason, c.detail]), [
    [1, "invalid", "the gateway of network 1 (ip 10.1.0.1)"],
    [2, "invalid", "the gateway of network 1 (mac 0a:58:0a:01:00:01)"],
  ]);
  for (const [, make] of impls) assert.deepEqual(make(input), compileFlowsTs(input));
});

Deno.test("conflicts: random models with injected collisions compile on both engines, identically", () => {
  const rand = mulberry32(1313);
  for (let n = 0; n < 200; n++) {
    const m = randomModel(rand, 12);
    const all = [...m.localPorts, ...m.remotePorts];
    // Copy MACs and addresses of random ports onto random remote ports.
    for (let k = 0; k < 3 && m.remotePorts.length > 0 && all.length > 0; k++) {
      const to = m.remotePorts[Math.floor(rand() * m.remotePorts.length)];
      const from = all[Math.floor(rand() * all.length)];
      to.network = from.network;
      if (rand() < 0.5) to.mac = from.mac;
      else to.ips = [...from.ips];
    }
    const wasm = compileIsolated(m, compileFlows);
    const ts = compileIsolated(m, compileFlowsTs);
    assert.deepEqual(ts.lines, wasm.lines, `model ${n}`);
    assert.deepEqual(ts.conflicts, wasm.conflicts);
  }
});

Deno.test("dscp: a network's marking changes only the actions of its IP SPOOF flows, on both engines", () => {
  const marked = scenarios.dscp;
  const plain: FlowInput = structuredClone(marked);
  for (const n of plain.networks) delete n.dscp;
  for (const [name, make] of impls) {
    const unmark = make(marked).map((l) => l.replace(/set_field:\d+->ip_dscp,/, ""));
    assert.deepEqual(unmark, make(plain), `${name}: the same flows without the marking`);
    const withMark = make(marked).filter((l) => l.includes("->ip_dscp,"));
    for (const line of withMark) {
      assert.match(line, /table=10,priority=100,(ip|ipv6|icmp6),/, `${name}: ${line}`);
      const dscp = line.startsWith("cookie=0x00000001") ? 46 : 26;
      assert.ok(line.endsWith(`actions=set_field:${dscp}->ip_dscp,goto_table:20`), line);
    }
    // IPv4, IPv6, link-local and DAD of red's port, blue's port and the static route it is the
    // next hop of.
    assert.equal(withMark.length, 6, `${name}: ${withMark.join("\n")}`);
  }
  // DSCP 0 is a marking too: it clears what the pods set.
  const zero: FlowInput = structuredClone(plain);
  zero.networks[2].dscp = 0;
  for (const [, make] of impls) {
    assert.ok(make(zero).some((l) => l.includes("nw_src=10.3.0.2,actions=set_field:0->ip_dscp,")));
  }
});

Deno.test("golden: the flows agent/PIPELINE.md shows under DSCP marking are the marked ones of the dscp model", () => {
  const doc = Deno.readTextFileSync(new URL("../agent/PIPELINE.md", import.meta.url));
  const at = doc.indexOf("## DSCP marking");
  assert.ok(at >= 0, "PIPELINE.md has no '## DSCP marking' section");
  const block = doc.slice(at).match(/```text\n([\s\S]*?)```/)![1].split("\n").filter(Boolean);
  assert.deepEqual(block, compileFlows(scenarios.dscp).filter((l) => l.includes("->ip_dscp,")));
});

// ---- Services (service_input.ts, assembly/service.ts)

Deno.test("services: bad input throws the same error naming the item in both engines, and a model without services keeps its flows", () => {
  const base = scenarios.services;
  const bad: [string, (s: FlowService) => void, RegExp][] = [
    ["unknown network", (s) => s.network = 9, /services\[0\]\.network: 9 is no network/],
    ["malformed VIP", (s) => s.vip = "10.0.0.300", /services\[0\]\.vip: "10\.0\.0\.300" is not/],
    [
      "multicast IPv6 VIP",
      (s) => s.vip = "ff02::1",
      /services\[0\]\.vip: "ff02::1" is not a unicast/,
    ],
    [
      "IPv4 backend of an IPv6 VIP",
      (s) => s.vip = "fd00::1",
      /services\[0\]\.backends\[0\]: "10\.0\.0\.3" is not a unicast address of the VIP's family/,
    ],
    ["VIP of a port", (s) => s.vip = "10.0.0.2", /services\[0\]\.vip: 10\.0\.0\.2 is already/],
    ["multicast MAC", (s) => s.mac = "01:00:5e:00:00:01", /services\[0\]\.mac: "01:00:5e/],
    ["bad backend", (s) => s.backends = ["10.0.0.3", "x"], /services\[0\]\.backends\[1\]: "x"/],
    ["no ports", (s) => s.ports = [], /services\[0\]\.ports: expected an array of 1\.\.16/],
    ["port 0", (s) => s.ports[0].port = 0, /services\[0\]\.ports\[0\]\.port: expected/],
    ["SCTP", (s) => (s.ports[0] as { protocol: string }).protocol = "sctp", /protocol: expected/],
  ];
  for (const [what, spoil, message] of bad) {
    const model = structuredClone(base);
    spoil(model.services![0]);
    for (const [engine, compile] of impls) {
      assert.throws(() => compile(model), message, `${engine}: ${what}`);
    }
  }
  const twice = structuredClone(base);
  twice.services![1].id = twice.services![0].id;
  for (const [, compile] of impls) {
    assert.throws(() => compile(twice), /services\[1\]\.id: 1 is listed twice/);
  }
  const sameVip = structuredClone(base);
  sameVip.services![1].vip = sameVip.services![0].vip;
  for (const [, compile] of impls) {
    assert.throws(() => compile(sameVip), /services\[1\]\.vip: 10\.0\.0\.100 is already/);
  }
  // Without services (or with none) the model compiles to what it did before services.
  const without = { ...base, services: undefined };
  assert.deepEqual(compileFlows({ ...base, services: [] }), compileFlows(without));
  assert.ok(
    !compileFlows(without).some((l) => l.includes("table=22") || l.startsWith("group_id=")),
  );
});

Deno.test("services: random models compile to the same flows and groups in both engines", () => {
  for (const seed of SEEDS.slice(0, 20)) {
    const rand = mulberry32(seed);
    const model = structuredClone(scenarios.services);
    const addresses = ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.9"];
    for (const s of model.services!) {
      if (s.network !== 1) continue;
      s.backends = addresses.filter(() => rand() < 0.6);
      s.affinity = rand() < 0.5;
    }
    assert.deepEqual(compileFlowsTs(model), compileFlows(model), `seed ${seed}`);
  }
});
