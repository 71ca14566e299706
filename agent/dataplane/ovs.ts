/**
 * Open vSwitch through `ovs-vsctl`, `ovs-ofctl` and `ovs-appctl`. Each method is one process where it can be
 * (spawning dominates the cost): many ports go in one OVSDB transaction, many flows in one bundle.
 */
import { CommandError, run, type RunOptions, start, type StartedCommand } from "@knitter/common";

export interface OvsTarget {
  /** ovsdb-server's unix socket; default: the system database. */
  dbSock?: string;
  /** OVS_RUNDIR for ovs-ofctl, which finds a bridge at $OVS_RUNDIR/BRIDGE.mgmt. */
  rundir?: string;
  /**
   * Where to run the tools. Usually unneeded: they talk over unix sockets, so they work from any
   * netns, and entering one costs an extra exec.
   */
  netns?: string;
}

export interface OvsPortSpec {
  name: string;
  externalIds?: Record<string, string>;
  ofportRequest?: number;
  /** VLAN access tag. */
  tag?: number;
  /** Interface type ("internal", "patch", "vxlan" ...); default: a system device of that name. */
  type?: string;
  options?: Record<string, string>;
  /**
   * Open vSwitch leaves the interface's qdisc alone (QoS type `linux-noop`): without it, adding
   * the port, and every restart of ovs-vswitchd, replaces a root qdisc made with tc (shaper.ts).
   */
  keepQdisc?: boolean;
}

export interface OvsPort {
  name: string;
  /** -1 when OVS could not attach the interface. */
  ofport: number;
  externalIds: Record<string, string>;
}

export interface BridgeOptions {
  /** "netdev" for the userspace datapath (no kernel module). */
  datapathType?: string;
  /** "secure": no flows means drop (no fallback to NORMAL switching) while the agent is away. */
  failMode?: "secure" | "standalone";
}

export interface OvsOptions {
  /**
   * Keep one `ovs-ofctl bundle` process per bridge started and waiting for its input, so that a
   * bundle does not wait for the exec and dynamic linking (about 2 ms). ovs-ofctl reads its whole
   * input before it connects to the switch, so a waiting one holds nothing open. Call
   * {@link Ovs.close} when done.
   */
  prestartBundles?: boolean;
}

export class Ovs {
  readonly target: OvsTarget;
  private readonly prestart: boolean;
  private readonly spares = new Map<string, StartedCommand>();
  private closed = false;
  /** ovs-appctl's `-t` for ovs-vswitchd, looked for once (appctl). */
  private vswitchd: Promise<string[]> | null = null;

  constructor(target: OvsTarget = {}, opts: OvsOptions = {}) {
    this.target = target;
    this.prestart = opts.prestartBundles ?? false;
  }

  /** Ends the waiting bundle processes. */
  async close(): Promise<void> {
    this.closed = true;
    const spares = [...this.spares.values()];
    this.spares.clear();
    await Promise.all(spares.map((c) => c.abandon()));
  }

  /** Runs ovs-vsctl against the target database; returns stdout. */
  async vsctl(args: string[]): Promise<string> {
    const db = this.target.dbSock ? [`--db=unix:${this.target.dbSock}`] : [];
    const result = await run(["ovs-vsctl", ...db, "--timeout=10", ...args], this.options());
    return result.stdout;
  }

  /**
   * Runs ovs-ofctl with OpenFlow 1.3 (needed for bundles); returns stdout. `--no-names`: our flows
   * name ports and tables by number, and without it ovs-ofctl first fetches every port's and all
   * 254 tables' descriptions from the switch, which triples the cost of a small bundle.
   */
  async ofctl(args: string[], stdin?: string): Promise<string> {
    const result = await run(ofctlArgv(args), { ...this.ofctlOptions(), stdin });
    return result.stdout;
  }

  /**
   * Runs ovs-appctl against ovs-vswitchd; returns stdout. ovs-appctl finds the daemon by its
   * pidfile in OVS_RUNDIR; a switch started with a control socket of its own name there
   * (`*vswitchd*.ctl`, as the simulated nodes of the tests do) is named with -t, looked for on the
   * first call and again after a failure.
   */
  async appctl(args: string[]): Promise<string> {
    this.vswitchd ??= this.findVswitchd();
    try {
      const r = await run(["ovs-appctl", ...await this.vswitchd, ...args], {
        ...this.ofctlOptions(),
        timeoutMs: 10_000,
      });
      return r.stdout;
    } catch (err) {
      this.vswitchd = null;
      throw err;
    }
  }

  /** `ovs-appctl ofproto/trace BRIDGE FLOW`: a packet through the bridge's pipeline, step by step. */
  ofprotoTrace(bridge: string, flow: string): Promise<string> {
    // A traced packet is the first of its connection: after each ct it goes on as +trk+new.
    return this.appctl(["ofproto/trace", bridge, flow, "--ct-next", "trk,new"]);
  }

  private async findVswitchd(): Promise<string[]> {
    const dir = this.target.rundir;
    if (!dir) return [];
    try {
      await Deno.stat(`${dir}/ovs-vswitchd.pid`);
      return [];
    } catch {
      try {
        for await (const e of Deno.readDir(dir)) {
          if (e.name.endsWith(".ctl") && e.name.includes("vswitchd")) {
            return ["-t", `${dir}/${e.name}`];
          }
        }
      } catch { /* no rundir: ovs-appctl says what is wrong */ }
      return [];
    }
  }

  /** `ovs-ofctl bundle BRIDGE -` fed `text`, through the waiting process when there is one. */
  private async bundleFile(bridge: string, text: string): Promise<void> {
    const args = ["bundle", bridge, "-"];
    const spare = this.spares.get(bridge);
    this.spares.delete(bridge);
    const cmd = spare ?? start(ofctlArgv(args), this.ofctlOptions());
    const done = cmd.finish(text);
    // The next one starts while this one talks to the switch: the exec blocks the event loop for a
    // moment, and here nobody waits for it (once this bundle is done, its caller would).
    if (this.prestart && !this.closed && !this.spares.has(bridge)) {
      this.spares.set(bridge, start(ofctlArgv(args), this.ofctlOptions()));
    }
    await done.catch((err) => {
      // A waiting process someone killed never saw the input: a fresh one does the same work.
      if (!spare || !(err instanceof CommandError) || err.result.code <= 128) throw err;
      return start(ofctlArgv(args), this.ofctlOptions()).finish(text);
    });
  }

  private ofctlOptions(): RunOptions {
    const env = this.target.rundir ? { OVS_RUNDIR: this.target.rundir } : undefined;
    return { ...this.options(), env };
  }

  async ensureBridge(name: string, opts: BridgeOptions = {}): Promise<void> {
    const settings = [
      ...(opts.datapathType ? [`datapath_type=${opts.datapathType}`] : []),
      ...(opts.failMode ? [`fail_mode=${opts.failMode}`] : []),
    ];
    const set = settings.length ? ["--", "set", "Bridge", name, ...settings] : [];
    await this.vsctl(["--", "--may-exist", "add-br", name, ...set])
      .catch(fail(`Cannot create bridge "${name}"`));
  }

  /**
   * The one flow-based tunnel port: remote and VNI come from the flows (tun_dst, tun_id). The
   * outer header's DSCP and ECN are copied from the inner packet (`tos=inherit`), so a network's
   * DSCP marking (PIPELINE.md, "DSCP marking") is what the underlay sees. Set on an existing port
   * too: an agent upgraded over a bridge made before gets the option.
   */
  async ensureVxlanPort(bridge: string, name: string, ofport: number): Promise<void> {
    const port = {
      name,
      type: "vxlan",
      ofportRequest: ofport,
      options: { remote_ip: "flow", key: "flow", ...TUNNEL_TOS },
    };
    await this.ensurePorts(bridge, [port], `Cannot create VXLAN port "${name}" on "${bridge}"`);
  }

  async ensurePatchPair(
    bridgeA: string,
    portA: string,
    bridgeB: string,
    portB: string,
    ofportA?: number,
  ): Promise<void> {
    const a = { name: portA, type: "patch", ofportRequest: ofportA, options: { peer: portB } };
    const b = { name: portB, type: "patch", options: { peer: portA } };
    const what = `Cannot patch "${bridgeA}" port "${portA}" to "${bridgeB}" port "${portB}"`;
    const args = [...addPortArgs(bridgeA, a), ...addPortArgs(bridgeB, b)];
    await this.vsctl(args).catch(fail(what));
    const ofports = await this.ofports([portA, portB]).catch(fail(what));
    checkAttached(what, ofports);
    checkRequested(what, [a], ofports);
  }

  /**
   * Adds (or updates) many ports in ONE transaction, then reads their ofports in one more call.
   * ovs-vsctl waits for ovs-vswitchd to apply a transaction, so the ofports are assigned by then.
   * A port OVS could not attach is an error naming it; it stays in the database (delPorts it).
   */
  async addPorts(bridge: string, ports: OvsPortSpec[]): Promise<Map<string, number>> {
    if (ports.length === 0) return new Map();
    const names = ports.map((p) => p.name).join(", ");
    const what = `Cannot add ${ports.length === 1 ? "port" : "ports"} ${names} to "${bridge}"`;
    return await this.ensurePorts(bridge, ports, what);
  }

  async delPorts(bridge: string, names: string[]): Promise<void> {
    if (names.length === 0) return;
    const args = names.flatMap((n) => ["--", "--if-exists", "del-port", bridge, n]);
    await this.vsctl(args).catch(fail(`Cannot delete ports ${names.join(", ")} from "${bridge}"`));
  }

  /** The bridge's interfaces (not its local port), for reconciling after a restart. */
  async listPorts(bridge: string): Promise<OvsPort[]> {
    const out = await this.vsctl([
      "--format=json",
      "--columns=name,ofport,external_ids",
      "list",
      "Interface",
      "--",
      "list-ifaces",
      bridge,
    ]).catch(fail(`Cannot list ports of "${bridge}"`));
    // One JSON table on the first line, then list-ifaces' names, one a line.
    const [table, ...rest] = out.split("\n");
    const onBridge = new Set(rest.filter((line) => line !== ""));
    return parseTable(table)
      .filter((row) => onBridge.has(row.name as string))
      .map((row) => ({
        name: row.name as string,
        ofport: ofportOf(row.ofport),
        externalIds: mapOf(row.external_ids),
      }));
  }

  /** How many flows the bridge holds (`dump-aggregate`: the switch counts, nothing is listed). */
  async flowCount(bridge: string): Promise<number> {
    const out = await this.ofctl(["dump-aggregate", bridge])
      .catch(fail(`Cannot count the flows of "${bridge}"`));
    const m = out.match(/flow_count=(\d+)/);
    if (!m) {
      throw new Error(`Cannot count the flows of "${bridge}": no flow_count in "${out.trim()}"`);
    }
    return Number(m[1]);
  }

  /**
   * The bridge's flows (optionally only those matching `match`, e.g. "table=3"), without
   * statistics, sorted, so that two dumps compare equal when the flows are the same.
   */
  async dumpFlows(bridge: string, match?: string): Promise<string[]> {
    const args = ["--no-stats", "dump-flows", bridge, ...(match ? [match] : [])];
    const out = await this.ofctl(args).catch(fail(`Cannot dump flows of "${bridge}"`));
    return out.split("\n").map(normalizeFlow).filter((line) => line !== "").sort();
  }

  /**
   * Deletes (strictly: same table, priority and match) and adds flows in ONE atomic bundle: either
   * all of it applies or none. `del` entries may be full flows (as added or dumped): only their
   * table, priority and match count. With `replaceAll`, `add` becomes the whole table (`del` is
   * not needed); with `empty` as well, the caller saw the table without any flow a moment ago, and
   * the flows are added in one bundle without reading the table first (`--bundle add-flows`).
   *
   * `groups` (a service's select groups, agent/PIPELINE.md "Services") go in the same bundle, in
   * OpenFlow 1.5 (which select groups with hash fields need): added and changed before the flows
   * that name them, deleted after the flows that named them. Replacing the table, the groups are
   * added or changed first and deleted after it, each in a bundle of its own.
   */
  async bundle(
    bridge: string,
    add: string[],
    del: string[],
    opts: { replaceAll?: boolean; empty?: boolean; groups?: GroupChanges } = {},
  ): Promise<void> {
    const g = opts.groups ?? NO_GROUP_CHANGES;
    if ([...add, ...del, ...g.add, ...g.modify].some((flow) => /[\n\r]/.test(flow))) {
      throw new Error(`Cannot apply a bundle to "${bridge}": a flow has a line break`);
    }
    if (opts.replaceAll) {
      await this.groupBundle(bridge, groupLines({ ...g, del: [] }));
      await this.replaceFlows(bridge, add, opts.empty ?? false);
      await this.groupBundle(bridge, groupLines({ add: [], modify: [], del: g.del }));
      return;
    }
    const lines = [
      ...groupLines({ ...g, del: [] }),
      ...del.map((flow) => `flow delete_strict ${matchPart(flow)}`),
      ...add.map((flow) => `flow add ${flow.trim()}`),
      ...groupLines({ add: [], modify: [], del: g.del }),
    ];
    if (lines.length === 0) return;
    try {
      if (hasGroupChanges(g)) await this.ofctl15(["bundle", bridge, "-"], lines.join("\n") + "\n");
      else await this.bundleFile(bridge, lines.join("\n") + "\n");
    } catch (err) {
      throw bundleError(bridge, lines, err);
    }
  }

  /** The bridge's select groups by id, as `dump-groups` prints them (the compiler's lines). */
  async dumpGroups(bridge: string): Promise<Map<number, string>> {
    const out = await this.ofctl15(["dump-groups", bridge])
      .catch(fail(`Cannot dump the groups of "${bridge}"`));
    const groups = new Map<number, string>();
    for (const raw of out.split("\n")) {
      const line = raw.trim();
      const id = groupId(line);
      if (id !== null) groups.set(id, line);
    }
    return groups;
  }

  /** ovs-ofctl in OpenFlow 1.5: select groups with hash fields (never the waiting process). */
  private async ofctl15(args: string[], stdin?: string): Promise<string> {
    const argv = ["ovs-ofctl", "-O", "OpenFlow15", "--no-names", ...args];
    return (await run(argv, { ...this.ofctlOptions(), stdin })).stdout;
  }

  private async groupBundle(bridge: string, lines: string[]): Promise<void> {
    if (lines.length === 0) return;
    try {
      await this.ofctl15(["bundle", bridge, "-"], lines.join("\n") + "\n");
    } catch (err) {
      throw bundleError(bridge, lines, err);
    }
  }

  /**
   * Makes `flows` the bridge's whole flow table in one atomic bundle. ovs-ofctl changes only the
   * difference, so flows that stay keep their counters.
   */
  private async replaceFlows(bridge: string, flows: string[], empty: boolean): Promise<void> {
    const lines = flows.map((flow) => flow.trim());
    const verb = empty ? "add-flows" : "replace-flows";
    try {
      await this.ofctl(["--bundle", verb, bridge, "-"], lines.join("\n") + "\n");
    } catch (err) {
      throw bundleError(bridge, lines, err);
    }
  }

  private options(): RunOptions {
    return this.target.netns ? { netns: this.target.netns } : {};
  }

  private async ensurePorts(
    bridge: string,
    ports: OvsPortSpec[],
    what: string,
  ): Promise<Map<string, number>> {
    await this.vsctl(ports.flatMap((p) => addPortArgs(bridge, p))).catch(fail(what));
    const ofports = await this.ofports(ports.map((p) => p.name)).catch(fail(what));
    checkAttached(what, ofports);
    checkRequested(what, ports, ofports);
    return new Map([...ofports].map(([name, state]) => [name, state.ofport]));
  }

  /** ofport and error of each named interface, in one read-only call. */
  private async ofports(names: string[]): Promise<Map<string, { ofport: number; error: string }>> {
    const out = await this.vsctl([
      "--format=json",
      "--columns=name,ofport,error",
      "list",
      "Interface",
      ...names,
    ]);
    const rows = parseTable(out);
    return new Map(rows.map((row) => [row.name as string, {
      ofport: ofportOf(row.ofport),
      error: typeof row.error === "string" ? row.error : "",
    }]));
  }
}

/** Select groups a bundle adds and changes (as dump-groups prints them) and deletes (by id). */
export interface GroupChanges {
  add: string[];
  modify: string[];
  del: number[];
}

const NO_GROUP_CHANGES: GroupChanges = { add: [], modify: [], del: [] };

function hasGroupChanges(g: GroupChanges): boolean {
  return g.add.length + g.modify.length + g.del.length > 0;
}

function groupLines(g: GroupChanges): string[] {
  return [
    ...g.add.map((line) => `group add ${line}`),
    ...g.modify.map((line) => `group modify ${line}`),
    ...g.del.map((id) => `group delete group_id=${id}`),
  ];
}

/** The id of a group line (`group_id=N,…`), or null for any other line. */
export function groupId(line: string): number | null {
  const m = /^group_id=(\d+),/.exec(line);
  return m ? Number(m[1]) : null;
}

function ofctlArgv(args: string[]): string[] {
  return ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", ...args];
}

/** `--may-exist add-port` plus the settings: re-running it updates an existing port. */
/**
 * The tunnel port's outer TOS: the inner packet's. Open vSwitch refuses `set_field:…->tun_tos`
 * (read-only), so `tos=flow` could not set it per network; the inner header carries the marking.
 */
const TUNNEL_TOS = { tos: "inherit" } as const;

function addPortArgs(bridge: string, port: OvsPortSpec): string[] {
  const iface = [
    ...(port.type ? [`type=${port.type}`] : []),
    ...(port.ofportRequest !== undefined ? [`ofport_request=${port.ofportRequest}`] : []),
    ...mapArgs("options", port.options),
    ...mapArgs("external_ids", port.externalIds),
  ];
  return [
    ...["--", "--may-exist", "add-port", bridge, port.name],
    ...(iface.length ? ["--", "set", "Interface", port.name, ...iface] : []),
    ...(port.tag !== undefined ? ["--", "set", "Port", port.name, `tag=${port.tag}`] : []),
  ];
}

/** `column:"key"="value"`: quoted as OVSDB string atoms (JSON syntax) so any text is safe. */
function mapArgs(column: string, map: Record<string, string> | undefined): string[] {
  return Object.entries(map ?? {}).map(([k, v]) =>
    `${column}:${JSON.stringify(k)}=${JSON.stringify(v)}`
  );
}

function checkAttached(what: string, ofports: Map<string, { ofport: number; error: string }>) {
  const broken = [...ofports].filter(([, state]) => state.ofport <= 0);
  if (broken.length === 0) return;
  const why = broken.map(([name, state]) => `${name}: ${state.error || "no ofport assigned"}`);
  throw new Error(`${what}: ${why.join("; ")}`);
}

function checkRequested(
  what: string,
  ports: OvsPortSpec[],
  ofports: Map<string, { ofport: number }>,
) {
  for (const port of ports) {
    const got = ofports.get(port.name)?.ofport;
    if (port.ofportRequest === undefined || got === port.ofportRequest) continue;
    throw new Error(`${what}: ${port.name} got ofport ${got}, not ${port.ofportRequest} (taken?)`);
  }
}

type Row = Record<string, unknown>;

/** `ovs-vsctl --format=json` output: {"headings": [...], "data": [[...], ...]}. */
function parseTable(text: string): Row[] {
  const table = JSON.parse(text) as { headings: string[]; data: unknown[][] };
  return table.data.map((cells) =>
    Object.fromEntries(table.headings.map((heading, i) => [heading, cells[i]]))
  );
}

/** An unassigned ofport is the empty set `["set", []]`. */
function ofportOf(cell: unknown): number {
  return typeof cell === "number" ? cell : -1;
}

/** OVSDB maps are `["map", [[k, v], ...]]`. */
function mapOf(cell: unknown): Record<string, string> {
  if (!Array.isArray(cell) || cell[0] !== "map") return {};
  return Object.fromEntries(cell[1] as [string, string][]);
}

const STATS = /\b(duration|n_packets|n_bytes|idle_age|hard_age)=[^,\s]*,?\s*/g;

function normalizeFlow(line: string): string {
  if (/^(OFPST|NXST)_FLOW reply/.test(line)) return "";
  return line.replace(STATS, "").trim();
}

/**
 * What delete_strict identifies a flow by: table, priority and match. Drops the actions and the
 * fields that are not part of the match (ovs-ofctl refuses a cookie without a mask there).
 */
function matchPart(flow: string): string {
  return flow
    .replace(/[\s,]*actions=.*$/s, "")
    .split(/[\s,]+/)
    .filter((field) => field !== "" && !NOT_MATCH.test(field))
    .join(",");
}

const NOT_MATCH =
  /^(cookie=[^/]*|idle_timeout=.*|hard_timeout=.*|importance=.*|send_flow_rem|check_overlap|reset_counts|no_packet_counts|no_byte_counts)$/;

/** Names the bundle line ovs-ofctl refused (`-:N: ...`), or quotes the switch's complaint. */
function bundleError(bridge: string, lines: string[], err: unknown): Error {
  const stderr = err instanceof CommandError ? err.result.stderr : String(err);
  const at = /-:(\d+):/.exec(stderr);
  const line = at ? ` at line ${at[1]} "${lines[Number(at[1]) - 1]}"` : "";
  const message = `Cannot apply a bundle of ${lines.length} flow changes to "${bridge}"` +
    ` (nothing was applied)${line}: ${stderr}`;
  return new Error(message, { cause: err });
}

function fail(what: string): (err: unknown) => never {
  return (err: unknown) => {
    const why = err instanceof CommandError ? err.result.stderr || err.message : String(err);
    throw new Error(`${what}: ${why}`, { cause: err });
  };
}
