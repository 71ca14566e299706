/**
 * Loads compiled rule sets into a real Open vSwitch: a private ovsdb-server and ovs-vswitchd in a
 * network namespace of their own, br-int with datapath_type=netdev (no kernel module needed).
 * Checks that `ovs-ofctl -O OpenFlow13 --bundle add-flows` accepts every line, that dump-flows
 * gives back exactly the compiled lines (through parseDumpFlows), that a bundle of the difference
 * (delete_strict, then add) updates one set into another, and that the ARP responder answers real requests from pods in netns.
 *
 * Needs root and the openvswitch-switch package; fails saying which is missing otherwise.
 * Cleans up by pid (from the pidfiles) and by the names it created, also on failure.
 */
import assert from "node:assert/strict";
import { compileFlows, parseDumpFlows } from "./flows.ts";
import type { FlowInput } from "./flow_input.ts";
import { TABLE } from "./pipeline.ts";
import { mulberry32 } from "./mulberry32.ts";
import { scenarios } from "./testdata/scenarios.ts";
import { GROUP_PREFIX, splitGroups } from "./service_pipeline.ts";
import { isolateConflicts } from "./flow_conflicts.ts";
import { type EvalPacket, evaluate, flowTables } from "./flow_eval.ts";
import { parseOfprotoTrace } from "./flow_trace.ts";

/** What delete_strict takes of a canonical line: table, priority and match (no cookie, no actions). */
function flowKey(line: string): string {
  return line.slice(line.indexOf(",") + 1, line.indexOf(",actions="));
}

const VSWITCHD = "/usr/lib/openvswitch-switch/ovs-vswitchd";
const SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema";
const TOOLS = ["ip", "ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-ofctl"];

/** What keeps this test from running, or null. */
async function missing(): Promise<string | null> {
  if (Deno.uid() !== 0) return "root (network namespaces and Open vSwitch daemons)";
  const gone: string[] = [];
  for (const file of [VSWITCHD, SCHEMA]) {
    try {
      await Deno.stat(file);
    } catch {
      gone.push(file);
    }
  }
  for (const tool of TOOLS) {
    const { success } = await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`] })
      .output();
    if (!success) gone.push(tool);
  }
  return gone.length ? `${gone.join(", ")} (apt-get install openvswitch-switch iproute2)` : null;
}

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(cmd: string, args: string[], stdin?: string): Promise<Result> {
  const child = new Deno.Command(cmd, {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(stdin));
    await writer.close();
  }
  const { code, stdout, stderr } = await child.output();
  const text = new TextDecoder();
  return { code, stdout: text.decode(stdout), stderr: text.decode(stderr) };
}

async function must(cmd: string, args: string[], stdin?: string): Promise<string> {
  const r = await run(cmd, args, stdin);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** A private Open vSwitch; every command runs in its namespace with OVS_RUNDIR set. */
class PrivateOvs {
  readonly ns = `kfl-${Deno.pid}-${Math.floor(Math.random() * 1e6)}`;
  dir = "";
  #nsCreated = false;
  /** The netns of the pods made by addPod, deleted by stop. */
  readonly pods: string[] = [];

  async start(): Promise<void> {
    this.dir = await Deno.makeTempDir({ prefix: "knitter-flows-ovs-" });
    await must("ip", ["netns", "add", this.ns]);
    this.#nsCreated = true;
    const d = this.dir;
    await must("ovsdb-tool", ["create", `${d}/conf.db`, SCHEMA]);
    await this.exec("ovsdb-server", [
      `${d}/conf.db`,
      `--remote=punix:${d}/db.sock`,
      `--pidfile=${d}/ovsdb.pid`,
      "--detach",
      `--log-file=${d}/ovsdb.log`,
      `--unixctl=${d}/ovsdb.ctl`,
    ]);
    await this.vsctl(["--no-wait", "init"]);
    await this.exec(VSWITCHD, [
      `unix:${d}/db.sock`,
      `--pidfile=${d}/vswitchd.pid`,
      "--detach",
      `--log-file=${d}/vswitchd.log`,
      `--unixctl=${d}/vswitchd.ctl`,
    ]);
  }

  exec(cmd: string, args: string[], stdin?: string): Promise<string> {
    return must(
      "ip",
      ["netns", "exec", this.ns, "env", `OVS_RUNDIR=${this.dir}`, cmd, ...args],
      stdin,
    );
  }

  vsctl(args: string[]): Promise<string> {
    return this.exec("ovs-vsctl", [`--db=unix:${this.dir}/db.sock`, ...args]);
  }

  appctl(args: string[]): Promise<string> {
    return this.exec("ovs-appctl", ["-t", `${this.dir}/vswitchd.ctl`, ...args]);
  }

  /**
   * A pod: netns `<ns>-<name>` whose eth0 (`mac`, `cidr`) is the peer of port `name` of br-int at
   * `ofport`. Returns the pod's netns name.
   */
  async addPod(name: string, ofport: number, mac: string, cidr: string): Promise<string> {
    const pod = `${this.ns}-${name}`;
    await must("ip", ["netns", "add", pod]);
    this.pods.push(pod);
    const peer = ["peer", "name", "eth0", "address", mac, "netns", pod];
    await must("ip", ["-n", this.ns, "link", "add", name, "type", "veth", ...peer]);
    await must("ip", ["-n", this.ns, "link", "set", name, "up"]);
    await must("ip", ["-n", pod, "addr", "add", cidr, "dev", "eth0"]);
    await must("ip", ["-n", pod, "link", "set", "eth0", "up"]);
    await this.vsctl([
      "add-port",
      "br-int",
      name,
      "--",
      "set",
      "interface",
      name,
      `ofport_request=${ofport}`,
    ]);
    return pod;
  }

  ofctl(args: string[], stdin?: string, version = "OpenFlow13"): Promise<Result> {
    return run(
      "ip",
      [
        "netns",
        "exec",
        this.ns,
        "env",
        `OVS_RUNDIR=${this.dir}`,
        "ovs-ofctl",
        "-O",
        version,
        ...args,
      ],
      stdin,
    );
  }

  /** Stops the daemons by the pids in their pidfiles, deletes the namespace and the directory. */
  async stop(): Promise<void> {
    for (const name of ["vswitchd", "ovsdb"]) {
      let pid: number;
      try {
        pid = Number((await Deno.readTextFile(`${this.dir}/${name}.pid`)).trim());
      } catch {
        continue;
      }
      if (!Number.isInteger(pid) || pid <= 1) continue;
      await stopPid(pid);
    }
    // A pod's netns takes its end of the veth, and with it the whole pair.
    for (const pod of this.pods) await run("ip", ["netns", "del", pod]);
    if (this.#nsCreated) await run("ip", ["netns", "del", this.ns]);
    if (this.dir) await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}

function alive(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM, then SIGKILL if the process is still there after 3 s. */
async function stopPid(pid: number): Promise<void> {
  try {
    Deno.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  for (let waited = 0; waited < 3000 && alive(pid); waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (alive(pid)) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone meanwhile */ }
  }
}

/**
 * Replaces the flows of br-int by `lines`; on refusal, names the lines ovs-ofctl rejects. Select
 * groups (a model's services) go in first, in one OpenFlow 1.5 bundle with the flows, as the
 * agent sends them (agent/dataplane/ovs.ts).
 */
async function load(ovs: PrivateOvs, all: string[], what: string): Promise<void> {
  const del = await ovs.ofctl(["del-flows", "br-int"]);
  assert.equal(del.code, 0, del.stderr);
  assert.equal((await ovs.ofctl(["del-groups", "br-int"], undefined, "OpenFlow15")).code, 0);
  const { flows: lines, groups } = splitGroups(all);
  if (groups.length > 0) {
    const bundle = [...groups.map((g) => `group add ${g}`), ...lines.map((l) => `flow add ${l}`)];
    const r = await ovs.ofctl(["bundle", "br-int", "-"], bundle.join("\n") + "\n", "OpenFlow15");
    assert.equal(
      r.code,
      0,
      `${what}: ovs-ofctl refused the bundle of groups and flows: ${r.stderr}`,
    );
    return;
  }
  const r = await ovs.ofctl(["--bundle", "add-flows", "br-int", "-"], lines.join("\n") + "\n");
  if (r.code === 0) return;
  const rejected: string[] = [];
  for (const line of lines) {
    const one = await ovs.ofctl(["add-flow", "br-int", line]);
    if (one.code !== 0) rejected.push(`${line}\n    ${one.stderr.trim().split("\n")[0]}`);
  }
  assert.fail(`${what}: ovs-ofctl refused the bundle:\n  ${rejected.join("\n  ") || r.stderr}`);
}

/** The select groups of br-int, as dump-groups prints them (the compiler's group lines). */
async function dumpGroups(ovs: PrivateOvs): Promise<string[]> {
  const r = await ovs.ofctl(["--no-names", "dump-groups", "br-int"], undefined, "OpenFlow15");
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.split("\n").map((l) => l.trim()).filter((l) => l.startsWith(GROUP_PREFIX)).sort();
}

async function dump(ovs: PrivateOvs): Promise<string[]> {
  const r = await ovs.ofctl(["--no-names", "--no-stats", "dump-flows", "br-int"]);
  assert.equal(r.code, 0, r.stderr);
  return parseDumpFlows(r.stdout);
}

/** A bigger model over the ports the bridge has: 3 networks, 60 local and 90 remote ports. */
function bigModel(): FlowInput {
  const rand = mulberry32(99);
  const input: FlowInput = {
    tunnelPort: 100,
    networks: [
      { id: 1, type: "vxlan", segmentId: 4242 },
      { id: 2, type: "vlan", segmentId: 4094, physnetPort: 200 },
      { id: 3, type: "flat", physnetPort: 200 },
    ],
    localPorts: [],
    remotePorts: [],
  };
  const h = (n: number) => n.toString(16).padStart(2, "0");
  for (let i = 1; i <= 60; i++) {
    const net = 1 + (i % 3);
    input.localPorts.push({
      ofport: i,
      network: net,
      mac: `02:00:00:00:${h(net)}:${h(i)}`,
      ips: i % 4 === 0
        ? [`10.${net}.0.${i}`, `fd00:${net}::${i.toString(16)}`]
        : [`10.${net}.0.${i}`],
      cookie: 1000 + i,
    });
  }
  for (let i = 1; i <= 90; i++) {
    const net = 1 + (i % 3);
    input.remotePorts.push({
      network: net,
      mac: `02:00:00:01:${h(net)}:${h(i)}`,
      ips: [`10.${net}.1.${i}`],
      nodeIp: `192.168.0.${2 + Math.floor(rand() * 8)}`,
    });
  }
  return input;
}

/**
 * A test on a private OVS of its own with br-int (userspace datapath). Stops it and deletes its
 * netns (and its pods') also on failure, then checks that none is left.
 */
function ovsTest(name: string, body: (ovs: PrivateOvs) => Promise<void>): void {
  Deno.test({
    name,
    sanitizeResources: false,
    sanitizeOps: false,
    async fn() {
      const lack = await missing();
      if (lack) assert.fail(`this test needs ${lack}`);
      const ovs = new PrivateOvs();
      try {
        await ovs.start();
        await ovs.vsctl([
          "add-br",
          "br-int",
          "--",
          "set",
          "bridge",
          "br-int",
          "datapath_type=netdev",
        ]);
        await body(ovs);
      } finally {
        await ovs.stop();
      }
      const left = (await run("ip", ["netns", "list"])).stdout;
      for (const ns of [ovs.ns, ...ovs.pods]) assert.ok(!left.includes(ns), `${ns} is still there`);
    },
  });
}

/** Internal ports pod1..pod3 at ofports 1..3 of br-int. */
async function addInternalPods(ovs: PrivateOvs): Promise<void> {
  for (let i = 1; i <= 3; i++) {
    await ovs.vsctl([
      "add-port",
      "br-int",
      `pod${i}`,
      "--",
      "set",
      "interface",
      `pod${i}`,
      "type=internal",
      `ofport_request=${i}`,
    ]);
  }
}

ovsTest(
  "ovs: ovs-ofctl accepts every compiled line and dumps back the same flows",
  async (ovs) => {
    await ovs.vsctl([
      "add-br",
      "br-phys",
      "--",
      "set",
      "bridge",
      "br-phys",
      "datapath_type=netdev",
    ]);
    await ovs.vsctl([
      "add-port",
      "br-int",
      "vxlan0",
      "--",
      "set",
      "interface",
      "vxlan0",
      "type=vxlan",
      "ofport_request=100",
      "options:remote_ip=flow",
      "options:key=flow",
      "--",
      "add-port",
      "br-int",
      "int-phys",
      "--",
      "set",
      "interface",
      "int-phys",
      "type=patch",
      "options:peer=phys-int",
      "ofport_request=200",
      "--",
      "add-port",
      "br-phys",
      "phys-int",
      "--",
      "set",
      "interface",
      "phys-int",
      "type=patch",
      "options:peer=int-phys",
    ]);
    // A few pod-like internal ports; flows may name ofports that do not exist (yet) too.
    await addInternalPods(ovs);
    const ports = await ovs.vsctl(["--columns=name,ofport", "list", "interface"]);
    for (const [name, ofport] of [["vxlan0", 100], ["int-phys", 200], ["pod1", 1]] as const) {
      assert.match(ports, new RegExp(`name\\s+: "?${name}"?\\s+ofport\\s+: ${ofport}`), name);
    }

    const models: [string, FlowInput][] = [...Object.entries(scenarios), ["big", bigModel()]];
    for (const [name, input] of models) {
      const compiled = compileFlows(isolateConflicts(input).input);
      await load(ovs, compiled, name);
      const { flows: lines, groups } = splitGroups(compiled);
      const back = await dump(ovs);
      assert.equal(back.length, lines.length, `${name}: flow count`);
      assert.deepEqual(back, lines, `${name}: dump-flows differs from the compiled lines`);
      assert.deepEqual(await dumpGroups(ovs), [...groups].sort(), `${name}: dump-groups differs`);
    }

    // Updating in place: from one node state to the next by difference, as the agent's bundle
    // does (agent/dataplane/ovs.ts): delete_strict of the lines no longer wanted, then add of the new ones.
    const before = bigModel();
    const after = structuredClone(before);
    after.localPorts = after.localPorts.filter((p) => p.ofport % 5 !== 0);
    after.localPorts.push({
      ofport: 61,
      network: 1,
      mac: "02:00:00:00:01:61",
      ips: ["10.1.0.61"],
      cookie: 5000,
    });
    for (const r of after.remotePorts) if (r.network === 1) r.nodeIp = "192.168.0.99";
    after.remotePorts = after.remotePorts.slice(10);
    const a = compileFlows(before);
    const b = compileFlows(after);
    await load(ovs, a, "before");
    const installed = await dump(ovs);
    const want = new Set(b);
    const have = new Set(installed);
    const commands = [
      ...installed.filter((l) => !want.has(l)).map((l) => `delete_strict ${flowKey(l)}`),
      ...b.filter((l) => !have.has(l)).map((l) => `add ${l}`),
    ];
    assert.ok(commands.some((c) => c.startsWith("delete_strict ")));
    const r = await ovs.ofctl(
      ["--bundle", "add-flows", "br-int", "-"],
      commands.join("\n") + "\n",
    );
    assert.equal(r.code, 0, `diff refused: ${r.stderr}`);
    assert.deepEqual(await dump(ovs), b, "after the diff, dump-flows differs from the new set");
  },
);

/** The pods of the ARP test and a port on another node, all in one vxlan network. */
const ARP_MODEL: FlowInput = {
  tunnelPort: 100,
  networks: [{ id: 1, type: "vxlan", segmentId: 1001 }],
  localPorts: [
    { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 1 },
    { ofport: 2, network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], cookie: 2 },
  ],
  remotePorts: [
    { network: 1, mac: "02:00:0a:00:00:04", ips: ["10.0.0.4"], nodeIp: "192.168.0.12" },
  ],
};

/** The neighbour entry of `ip` in `pod`: `lladdr <mac> <STATE>`, or "" when there is none. */
async function neighbour(pod: string, ip: string): Promise<string> {
  const text = await must("ip", ["-n", pod, "neigh", "show", ip, "dev", "eth0"]);
  return text.trim().replace(`${ip} `, "");
}

/** `<arp_tpa or "shared">=<n_packets>` of the responder's flows (ARP's per address, ARP_REPLY). */
async function arpHits(ovs: PrivateOvs): Promise<string[]> {
  const r = await ovs.ofctl(["--no-names", "dump-flows", "br-int"]);
  assert.equal(r.code, 0, r.stderr);
  const perAddress = new RegExp(`table=${TABLE.ARP},.*priority=100,arp,.*arp_tpa=([\\d.]+)`);
  const hits: string[] = [];
  for (const line of r.stdout.split("\n")) {
    const n = line.match(/n_packets=(\d+)/)?.[1];
    const ip = line.match(perAddress)?.[1];
    if (ip) hits.push(`${ip}=${n}`);
    else if (line.includes(`table=${TABLE.ARP_REPLY},`) && /,arp /.test(line)) {
      hits.push(`shared=${n}`);
    }
  }
  assert.equal(hits.length, 4, r.stdout);
  return hits;
}

ovsTest(
  "ovs: the ARP responder answers pods' requests with the compiled MAC, in place",
  async (ovs) => {
    const a = await ovs.addPod("pa", 1, "02:00:0a:00:00:02", "10.0.0.2/24");
    const b = await ovs.addPod("pb", 2, "02:00:0a:00:00:03", "10.0.0.3/24");
    await load(ovs, compileFlows(ARP_MODEL), "arp");

    // Every field of the reply, for a request of pod a for the remote address.
    const trace = await ovs.appctl([
      "ofproto/trace",
      "br-int",
      "in_port=1,arp,dl_src=02:00:0a:00:00:02,dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1," +
      "arp_spa=10.0.0.2,arp_tpa=10.0.0.4,arp_sha=02:00:0a:00:00:02,arp_tha=00:00:00:00:00:00",
    ]);
    const final = trace.match(/^Final flow: (.*)$/m)?.[1] ?? assert.fail(trace);
    const fields = new Map(final.split(",").map((f) => f.split("=") as [string, string]));
    assert.deepEqual(
      ["dl_src", "dl_dst", "arp_op", "arp_spa", "arp_tpa", "arp_sha", "arp_tha", "reg0", "reg1"]
        .map((f) => `${f}=${fields.get(f)}`),
      [
        "dl_src=02:00:0a:00:00:04",
        "dl_dst=02:00:0a:00:00:02",
        "arp_op=2",
        "arp_spa=10.0.0.4",
        "arp_tpa=10.0.0.2",
        "arp_sha=02:00:0a:00:00:04",
        "arp_tha=02:00:0a:00:00:02",
        "reg0=0x1",
        "reg1=0x1",
      ],
      trace,
    );
    assert.match(trace, /^ *IN_PORT$/m, "the reply goes back out of the port it came in on");

    // Real requests: pods a and b resolve each other through the responder, both ways, or the
    // echo would not come back (that the responder, not the other pod, answered: see below).
    const ping = await run("ip", ["netns", "exec", a, "ping", "-c", "1", "-W", "2", "10.0.0.3"]);
    assert.equal(ping.code, 0, `pod a cannot ping pod b: ${ping.stdout}${ping.stderr}`);
    assert.match(
      await neighbour(a, "10.0.0.3"),
      /^lladdr 02:00:0a:00:00:03 (REACHABLE|STALE|DELAY)$/,
    );
    assert.match(
      await neighbour(b, "10.0.0.2"),
      /^lladdr 02:00:0a:00:00:02 (REACHABLE|STALE|DELAY)$/,
    );
    // The remote address: the echo goes into the tunnel and gets no answer, the ARP reply does.
    await run("ip", ["netns", "exec", a, "ping", "-c", "1", "-W", "1", "10.0.0.4"]);
    assert.match(
      await neighbour(a, "10.0.0.4"),
      /^lladdr 02:00:0a:00:00:04 (REACHABLE|STALE|DELAY|PROBE)$/,
    );
    // The three requests went through their address's flow and the shared reply.
    let hits: string[] = [];
    for (let waited = 0; waited <= 3000; waited += 100) {
      hits = await arpHits(ovs);
      if (!hits.some((h) => h.endsWith("=0"))) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(!hits.some((h) => h.endsWith("=0")), `ARP flows not hit: ${hits.join(", ")}`);
  },
);

/** The ofproto/trace flow of a packet of the offline evaluator's (the first of its connection). */
function traceFlow(p: EvalPacket): string {
  const l4 = p.proto === "icmp" ? "icmp_type=8,icmp_code=0" : `${p.proto}_dst=${p.dstPort}`;
  return `in_port=${p.inPort},${p.proto},dl_src=${p.dlSrc},dl_dst=${p.dlDst},` +
    `nw_src=${p.ipSrc},nw_dst=${p.ipDst},${l4}`;
}

ovsTest(
  "ovs: conjunctive security group flows match in Open vSwitch as the offline evaluator says",
  async (ovs) => {
    await addInternalPods(ovs);
    const model = scenarios.security_groups_conjunctions;
    const lines = compileFlows(model);
    await load(ovs, lines, "security_groups_conjunctions");
    const tables = flowTables(lines);
    const ports = model.localPorts;
    let delivered = 0;
    let conjunctions = 0;
    for (const a of ports) {
      for (const b of ports) {
        if (a === b) continue;
        for (const proto of ["tcp", "udp", "icmp"] as const) {
          for (const dstPort of proto === "icmp" ? [0] : [22, 53, 54, 79, 80, 81, 82]) {
            const packet: EvalPacket = {
              proto,
              inPort: a.ofport,
              dlSrc: a.mac,
              dlDst: b.mac,
              ipSrc: a.ips[0],
              ipDst: b.ips[0],
              dstPort: proto === "icmp" ? undefined : dstPort,
            };
            // Each ct(table=…) recirculates: the egress and the ingress ACL see a new connection.
            const trace = await ovs.appctl([
              "ofproto/trace",
              "br-int",
              traceFlow(packet),
              "--ct-next",
              "trk,new",
              "--ct-next",
              "trk,new",
            ]);
            const inOvs = parseOfprotoTrace(trace, "br-int").map((f) => f.line);
            const offline = evaluate(tables, packet).matched.map((f) => f.line);
            assert.deepEqual(inOvs, offline, `${traceFlow(packet)}\n${trace}`);
            // Delivered: by the port's number, or through reg7 (a conjunction's shared flow).
            const out = [`output:${b.ofport}`, "output:NXM_NX_REG7[0..15]"];
            if (offline.some((l) => out.some((o) => l.endsWith(o)))) delivered++;
            if (offline.some((l) => l.includes("conj_id="))) conjunctions++;
          }
        }
      }
    }
    // Both answers occur, and conjunctions decide some of them.
    assert.ok(delivered > 0 && delivered < 6 * 15, `${delivered} delivered`);
    assert.ok(conjunctions > 0, "no packet went through a conjunction");
  },
);
