/**
 * Loads compiled rule sets into a real Open vSwitch: a private ovsdb-server and ovs-vswitchd in a
 * network namespace of their own, br-int with datapath_type=netdev (no kernel module needed).
 * Checks that `ovs-ofctl -O OpenFlow13 --bundle add-flows` accepts every line, that dump-flows
 * gives back exactly the compiled lines (through parseDumpFlows), and that diffFlows updates one
 * set into another.
 *
 * Needs root and the openvswitch-switch package; fails saying which is missing otherwise.
 * Cleans up by pid (from the pidfiles) and by the names it created, also on failure.
 */
import assert from "node:assert/strict";
import { compileFlows, diffFlows, type FlowInput, parseDumpFlows } from "./flows.ts";
import { mulberry32 } from "./mulberry32.ts";
import { scenarios } from "./testdata/scenarios.ts";

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

  ofctl(args: string[], stdin?: string): Promise<Result> {
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
        "OpenFlow13",
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

/** Replaces the flows of br-int by `lines`; on refusal, names the lines ovs-ofctl rejects. */
async function load(ovs: PrivateOvs, lines: string[], what: string): Promise<void> {
  const del = await ovs.ofctl(["del-flows", "br-int"]);
  assert.equal(del.code, 0, del.stderr);
  const r = await ovs.ofctl(["--bundle", "add-flows", "br-int", "-"], lines.join("\n") + "\n");
  if (r.code === 0) return;
  const rejected: string[] = [];
  for (const line of lines) {
    const one = await ovs.ofctl(["add-flow", "br-int", line]);
    if (one.code !== 0) rejected.push(`${line}\n    ${one.stderr.trim().split("\n")[0]}`);
  }
  assert.fail(`${what}: ovs-ofctl refused the bundle:\n  ${rejected.join("\n  ") || r.stderr}`);
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

Deno.test({
  name: "ovs: ovs-ofctl accepts every compiled line and dumps back the same flows",
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
        "--",
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
      const ports = await ovs.vsctl(["--columns=name,ofport", "list", "interface"]);
      for (const [name, ofport] of [["vxlan0", 100], ["int-phys", 200], ["pod1", 1]] as const) {
        assert.match(ports, new RegExp(`name\\s+: "?${name}"?\\s+ofport\\s+: ${ofport}`), name);
      }

      const models: [string, FlowInput][] = [...Object.entries(scenarios), ["big", bigModel()]];
      for (const [name, input] of models) {
        const lines = compileFlows(input);
        await load(ovs, lines, name);
        const back = await dump(ovs);
        assert.equal(back.length, lines.length, `${name}: flow count`);
        assert.deepEqual(back, lines, `${name}: dump-flows differs from the compiled lines`);
      }

      // Updating in place: from one node state to the next with the commands of diffFlows.
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
      const commands = diffFlows(await dump(ovs), b);
      assert.ok(commands.some((c) => c.startsWith("delete_strict ")));
      const r = await ovs.ofctl(
        ["--bundle", "add-flows", "br-int", "-"],
        commands.join("\n") + "\n",
      );
      assert.equal(r.code, 0, `diff refused: ${r.stderr}`);
      assert.deepEqual(await dump(ovs), b, "after the diff, dump-flows differs from the new set");
    } finally {
      await ovs.stop();
    }
    const left = await run("ip", ["netns", "list"]);
    assert.ok(!left.stdout.includes(ovs.ns), `namespace ${ovs.ns} is still there`);
  },
});
