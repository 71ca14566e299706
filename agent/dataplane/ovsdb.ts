/**
 * A client of ovsdb-server (the OVSDB protocol, RFC 7047: JSON-RPC over its unix socket) for what
 * runs on every pod: adding and deleting ports. One connection stays open, so a port costs a
 * transaction and a wait, not two `ovs-vsctl` processes. Like ovs-vsctl, it bumps `next_cfg` in the
 * same transaction and answers once ovs-vswitchd reports that configuration applied (`cur_cfg`),
 * so the ofports it then reads are the ones the switch uses.
 *
 * The same connection monitors what self-healing needs (`watch`): the bridges and interfaces by
 * name, and the Open_vSwitch row's `cur_cfg` and `other_config` (flow-restore-wait). While someone
 * watches, a lost connection (ovsdb-server restarted) is made again at once, with backoff.
 */
import type { OvsPortSpec } from "./ovs.ts";

const DB = "Open_vSwitch";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Row = Record<string, Json>;
export type Op = Record<string, Json>;

/** ovsdb-server refused a transaction, or the switch did not apply it in time. */
export class OvsdbError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "OvsdbError";
  }
}

interface Pending {
  resolve(result: Json): void;
  reject(err: Error): void;
}

export interface PortState {
  /** -1 when the switch could not attach the interface. */
  ofport: number;
  error: string;
}

/** What the monitor shows of the database, kept current. */
export interface OvsdbView {
  /** Bridge names by row UUID. */
  bridges: Map<string, string>;
  /** Interfaces by row UUID: name, ofport (-1 unassigned), external_ids. */
  interfaces: Map<string, { name: string; ofport: number; externalIds: Record<string, string> }>;
  /** The Open_vSwitch row's other_config. */
  otherConfig: Record<string, string>;
}

/**
 * "connected": a (new) connection and the whole view; "changed": rows changed, the tables named;
 * "lost": the connection went (a reconnect follows while watched).
 */
export type OvsdbEvent =
  | { kind: "connected"; first: boolean }
  | { kind: "changed"; tables: string[]; deletedBridges: string[]; deletedInterfaces: string[] }
  | { kind: "lost"; error: string };

const MONITOR: Json = {
  Open_vSwitch: { columns: ["cur_cfg", "other_config"] },
  Bridge: { columns: ["name"] },
  Interface: { columns: ["name", "ofport", "external_ids"] },
};

export class OvsdbClient {
  private conn: Deno.UnixConn | null = null;
  private connecting: Promise<Deno.UnixConn> | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** ovs-vswitchd's applied configuration number, from the monitor; -1 until known. */
  private curCfg = -1;
  private readonly cfgWaiters = new Set<{ cfg: number; done(): void }>();
  private readonly encoder = new TextEncoder();
  private readonly watchers = new Set<(e: OvsdbEvent) => void>();
  private connectedOnce = false;
  private closed = false;
  private reconnecting = false;
  readonly view: OvsdbView = { bridges: new Map(), interfaces: new Map(), otherConfig: {} };

  constructor(readonly socket: string, private readonly timeoutMs = 10_000) {}

  /**
   * Calls `fn` on every event (see {@link OvsdbEvent}) until the returned function is called, and
   * connects now if not connected yet. While anyone watches, a lost connection is made again.
   */
  watch(fn: (e: OvsdbEvent) => void): () => void {
    this.watchers.add(fn);
    if (!this.conn) this.reconnect();
    return () => this.watchers.delete(fn);
  }

  /** Whether ovs-vswitchd is told to wait for the flows before it forwards (`flow-restore-wait`). */
  get flowRestoreWait(): boolean {
    return this.view.otherConfig["flow-restore-wait"] === "true";
  }

  /** Removes `other_config:flow-restore-wait`: the flows are in, ovs-vswitchd may forward. */
  async clearFlowRestoreWait(): Promise<void> {
    await this.transact([{
      op: "mutate",
      table: "Open_vSwitch",
      where: [],
      mutations: [["other_config", "delete", ["set", ["flow-restore-wait"]]]],
    }]);
  }

  /** The default database socket of a system Open vSwitch. */
  static defaultSocket(): string {
    return `${Deno.env.get("OVS_RUNDIR") ?? "/var/run/openvswitch"}/db.sock`;
  }

  /** Runs `ops` as one transaction; the per-operation results, or OvsdbError naming the failure. */
  async transact(ops: Op[]): Promise<Row[]> {
    const results = await this.call("transact", [DB, ...ops]) as Row[];
    const failed = results.findIndex((r) => r && typeof r === "object" && "error" in r);
    if (failed >= 0 || results.length < ops.length) {
      const r = results[failed] ?? results[results.length - 1] ?? {};
      const where = failed >= 0 && failed < ops.length
        ? ` (operation ${failed + 1}, ${ops[failed].op})`
        : "";
      throw new OvsdbError(
        `ovsdb-server refused the transaction${where}: ${r.error} ${r.details ?? ""}`.trim(),
      );
    }
    return results;
  }

  /**
   * Adds the ports to `bridge` in one transaction and answers each one's ofport and error once
   * ovs-vswitchd has applied it. A port that already exists (a retry) is left as it is. Most adds
   * are of new ports: the transaction is sent at once, and only when the database has one of the
   * names already (its name index refuses the insert) are the existing ones looked up and the
   * others added. A round trip fewer before ovs-vswitchd starts on the ports.
   */
  async addPorts(bridge: string, ports: OvsPortSpec[]): Promise<Map<string, PortState>> {
    if (ports.length === 0) return new Map();
    try {
      await this.insertPorts(bridge, ports);
    } catch (err) {
      if (!(err instanceof OvsdbError && /constraint violation/.test(err.message))) throw err;
      const existing = await this.portNames(ports.map((p) => p.name));
      const fresh = ports.filter((p) => !existing.has(p.name));
      if (fresh.length > 0) await this.insertPorts(bridge, fresh);
    }
    return await this.portStates(ports.map((p) => p.name));
  }

  /** Inserts new ports into `bridge`, once ovs-vswitchd has applied them. */
  private async insertPorts(bridge: string, fresh: OvsPortSpec[]): Promise<void> {
    const insert = async (): Promise<number[]> => {
      const ops: Op[] = [];
      const noop = fresh.some((p) => p.keepQdisc) ? await this.noopQos() : undefined;
      fresh.forEach((p, i) => ops.push(...insertPort(p, i, noop)));
      ops.push({
        op: "mutate",
        table: "Bridge",
        where: [["name", "==", bridge]],
        mutations: [["ports", "insert", [
          "set",
          fresh.map((_, i) => ["named-uuid", `port${i}`]),
        ]]],
      });
      return await this.transactApplied(ops, 1);
    };
    let changed: number[];
    try {
      changed = await insert();
    } catch (err) {
      // The QoS row remembered may be gone (the database replaced): look it up again, once.
      if (this.noopQosUuid === undefined || !fresh.some((p) => p.keepQdisc)) throw err;
      if (err instanceof OvsdbError && /constraint violation/.test(err.message)) throw err;
      this.noopQosUuid = undefined;
      changed = await insert();
    }
    if (changed[0] !== 1) throw new OvsdbError(`Bridge "${bridge}" does not exist`);
  }

  /** Removes the named ports from `bridge`, once ovs-vswitchd has let them go; see removePorts. */
  async delPorts(bridge: string, names: string[]): Promise<void> {
    await (await this.removePorts(bridge, names)).applied;
  }

  /**
   * Removes the named ports from `bridge` (names it does not have are skipped) and answers once
   * the database has the change; `applied` settles when ovs-vswitchd has let the ports go (as
   * `ovs-vsctl --no-wait del-port`, then a wait). A switch releases a port at its own pace: on the
   * userspace datapath each costs an RCU grace period to close its packet socket (about 12 ms,
   * one port after another).
   */
  async removePorts(bridge: string, names: string[]): Promise<{ applied: Promise<void> }> {
    const none = { applied: Promise.resolve() };
    if (names.length === 0) return none;
    const uuids = await this.portUuids(names);
    if (uuids.length === 0) return none;
    const { target } = await this.transactCfg([{
      op: "mutate",
      table: "Bridge",
      where: [["name", "==", bridge]],
      mutations: [["ports", "delete", ["set", uuids.map((u) => ["uuid", u])]]],
    }]);
    return { applied: this.waitApplied(target) };
  }

  /** Replaces the external IDs of the interface `name`; an interface not there is an error. */
  async setExternalIds(name: string, externalIds: Record<string, string>): Promise<void> {
    const [r] = await this.transact([{
      op: "update",
      table: "Interface",
      where: [["name", "==", name]],
      row: { external_ids: ovsMap(externalIds) },
    }]);
    if (r.count !== 1) throw new OvsdbError(`no interface "${name}"`);
  }

  /** The ofports of every interface in the database (any bridge), those not yet assigned left out. */
  async ofports(): Promise<number[]> {
    const [r] = await this.transact([
      { op: "select", table: "Interface", where: [], columns: ["ofport"] },
    ]);
    return (r.rows as Row[]).flatMap((row) => typeof row.ofport === "number" ? [row.ofport] : []);
  }

  /** The ofport of every interface the database has, by name (-1 or absent: none yet). */
  async ofportsByName(): Promise<Map<string, number>> {
    const [r] = await this.transact([
      { op: "select", table: "Interface", where: [], columns: ["name", "ofport"] },
    ]);
    return new Map(
      (r.rows as Row[]).flatMap((row) =>
        typeof row.ofport === "number" ? [[row.name as string, row.ofport]] : []
      ),
    );
  }

  close(): void {
    this.closed = true;
    this.watchers.clear();
    this.conn?.close();
    this.conn = null;
  }

  /**
   * Commits `ops` with next_cfg incremented, then waits until ovs-vswitchd has applied it (as
   * ovs-vsctl without --no-wait). Answers the `count` fields of the first mutate results (rows
   * matched), to tell a missing bridge apart.
   */
  async transactApplied(ops: Op[], count = 0): Promise<number[]> {
    const { target, counts } = await this.transactCfg(ops, count);
    await this.waitApplied(target);
    return counts;
  }

  /** Commits `ops` with next_cfg incremented: the configuration number to wait for, and counts. */
  private async transactCfg(
    ops: Op[],
    count = 0,
  ): Promise<{ target: number; counts: number[] }> {
    await this.connection();
    const results = await this.transact([
      ...ops,
      { op: "mutate", table: "Open_vSwitch", where: [], mutations: [["next_cfg", "+=", 1]] },
      { op: "select", table: "Open_vSwitch", where: [], columns: ["next_cfg"] },
    ]);
    const rows = results[results.length - 1].rows as Row[];
    return {
      target: rows[0]?.next_cfg as number,
      counts: results.filter((r) => "count" in r).slice(0, count).map((r) => r.count as number),
    };
  }

  private waitApplied(cfg: number): Promise<void> {
    if (this.curCfg >= cfg) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = {
        cfg,
        done: () => {
          clearTimeout(timer);
          this.cfgWaiters.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.cfgWaiters.delete(waiter);
        reject(
          new OvsdbError(
            `ovs-vswitchd did not apply the change within ${this.timeoutMs} ms (is it running?)`,
          ),
        );
      }, this.timeoutMs);
      this.cfgWaiters.add(waiter);
    });
  }

  /**
   * The UUID of the one QoS row of type linux-noop the agent's ports share (made on first use; a
   * QoS row is a root row, so one shared row is all that is ever left behind).
   */
  private async noopQos(): Promise<string> {
    if (this.noopQosUuid !== undefined) return this.noopQosUuid;
    this.noopQosUuid = await this.findOrMakeNoopQos();
    return this.noopQosUuid;
  }

  /** The shared QoS row's UUID, remembered: a lookup costs a round trip before each add. */
  private noopQosUuid?: string;

  private async findOrMakeNoopQos(): Promise<string> {
    const mark = ["map", [["knitter", "keep-qdisc"]]];
    const [found] = await this.transact([{
      op: "select",
      table: "QoS",
      where: [["external_ids", "includes", mark]],
      columns: ["_uuid"],
    }]);
    const row = (found.rows as Row[])[0];
    if (row) return (row._uuid as Json[])[1] as string;
    const [made] = await this.transact([{
      op: "insert",
      table: "QoS",
      row: { type: "linux-noop", external_ids: mark },
    }]);
    return (made.uuid as Json[])[1] as string;
  }

  private async portNames(names: string[]): Promise<Set<string>> {
    const results = await this.transact(names.map((name) => ({
      op: "select",
      table: "Port",
      where: [["name", "==", name]],
      columns: ["name"],
    })));
    return new Set(results.flatMap((r) => (r.rows as Row[]).map((row) => row.name as string)));
  }

  private async portUuids(names: string[]): Promise<string[]> {
    const results = await this.transact(names.map((name) => ({
      op: "select",
      table: "Port",
      where: [["name", "==", name]],
      columns: ["_uuid"],
    })));
    return results.flatMap((r) =>
      (r.rows as Row[]).map((row) => (row._uuid as Json[])[1] as string)
    );
  }

  private async portStates(names: string[]): Promise<Map<string, PortState>> {
    const results = await this.transact(names.map((name) => ({
      op: "select",
      table: "Interface",
      where: [["name", "==", name]],
      columns: ["ofport", "error"],
    })));
    return new Map(names.map((name, i) => {
      const row = (results[i].rows as Row[])[0];
      const ofport = typeof row?.ofport === "number" ? row.ofport : -1;
      const error = typeof row?.error === "string" ? row.error : row ? "" : "no such interface";
      return [name, { ofport, error }];
    }));
  }

  private call(method: string, params: Json[]): Promise<Json> {
    return this.connection().then((conn) =>
      new Promise<Json>((resolve, reject) => {
        const id = this.nextId++;
        this.pending.set(id, { resolve, reject });
        this.send(conn, { method, params, id }).catch((err) => {
          this.pending.delete(id);
          reject(err);
        });
      })
    );
  }

  private async send(conn: Deno.UnixConn, message: Json): Promise<void> {
    const bytes = this.encoder.encode(JSON.stringify(message));
    for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
  }

  /** The open connection, made (with the cur_cfg monitor) on first use and after a loss. */
  private connection(): Promise<Deno.UnixConn> {
    if (this.conn) return Promise.resolve(this.conn);
    this.connecting ??= this.open().finally(() => (this.connecting = null));
    return this.connecting;
  }

  private async open(): Promise<Deno.UnixConn> {
    let conn: Deno.UnixConn;
    try {
      conn = await Deno.connect({ transport: "unix", path: this.socket });
    } catch (err) {
      throw new OvsdbError(
        `Cannot reach ovsdb-server at ${this.socket} (${
          (err as Error).message
        }): is Open vSwitch running?`,
        { cause: err },
      );
    }
    this.conn = conn;
    void this.read(conn);
    const id = this.nextId++;
    const initial = new Promise<Json>((resolve, reject) =>
      this.pending.set(id, { resolve, reject })
    );
    await this.send(conn, { method: "monitor", params: [DB, "cfg", MONITOR], id });
    this.view.bridges.clear();
    this.view.interfaces.clear();
    this.onTableUpdates(await initial, false);
    const first = !this.connectedOnce;
    this.connectedOnce = true;
    this.tell({ kind: "connected", first });
    return conn;
  }

  private tell(e: OvsdbEvent): void {
    for (const fn of [...this.watchers]) {
      try {
        fn(e);
      } catch { /* a watcher's failure is its own */ }
    }
  }

  /** Connects again (backoff 50 ms .. 1 s) while anyone watches and the client is not closed. */
  private reconnect(): void {
    if (this.reconnecting || this.closed) return;
    this.reconnecting = true;
    void (async () => {
      for (let pause = 50; !this.closed && this.watchers.size > 0 && !this.conn;) {
        try {
          await this.connection();
        } catch {
          await new Promise((r) => setTimeout(r, pause));
          pause = Math.min(pause * 2, 1000);
        }
      }
      this.reconnecting = false;
    })();
  }

  private async read(conn: Deno.UnixConn): Promise<void> {
    const splitter = new JsonSplitter();
    const decoder = new TextDecoder();
    let failure: Error = new OvsdbError(`ovsdb-server at ${this.socket} closed the connection`);
    try {
      for await (const chunk of conn.readable) {
        for (const text of splitter.push(decoder.decode(chunk, { stream: true }))) {
          this.onMessage(conn, JSON.parse(text));
        }
      }
    } catch (err) {
      failure = new OvsdbError(
        `Lost the connection to ovsdb-server at ${this.socket}: ${(err as Error).message}`,
      );
    }
    if (this.conn === conn) this.conn = null;
    for (const p of this.pending.values()) p.reject(failure);
    this.pending.clear();
    if (this.closed) return;
    this.tell({ kind: "lost", error: failure.message });
    if (this.watchers.size > 0) this.reconnect();
  }

  private onMessage(conn: Deno.UnixConn, msg: Row): void {
    if (msg.method === "echo") {
      void this.send(conn, { result: msg.params, error: null, id: msg.id }).catch(() => {});
    } else if (msg.method === "update") {
      this.onTableUpdates((msg.params as Json[])[1]);
    } else if (typeof msg.id === "number" && msg.method === undefined) {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (!p) return;
      if (msg.error) p.reject(new OvsdbError(`ovsdb-server: ${JSON.stringify(msg.error)}`));
      else p.resolve(msg.result);
    }
  }

  private onTableUpdates(updates: Json, notify = true): void {
    const tables = (updates ?? {}) as Record<string, Record<string, { new?: Row; old?: Row }>>;
    for (const change of Object.values(tables.Open_vSwitch ?? {})) {
      const cfg = change.new?.cur_cfg;
      if (typeof cfg === "number") this.curCfg = cfg;
      if (change.new?.other_config !== undefined) {
        this.view.otherConfig = mapOf(change.new.other_config);
      }
    }
    const deletedBridges: string[] = [];
    for (const [uuid, change] of Object.entries(tables.Bridge ?? {})) {
      if (change.new) this.view.bridges.set(uuid, change.new.name as string);
      else {
        const name = this.view.bridges.get(uuid);
        if (name !== undefined) deletedBridges.push(name);
        this.view.bridges.delete(uuid);
      }
    }
    const deletedInterfaces: string[] = [];
    for (const [uuid, change] of Object.entries(tables.Interface ?? {})) {
      if (change.new) {
        this.view.interfaces.set(uuid, {
          name: change.new.name as string,
          ofport: typeof change.new.ofport === "number" ? change.new.ofport : -1,
          externalIds: mapOf(change.new.external_ids),
        });
      } else {
        const name = this.view.interfaces.get(uuid)?.name;
        if (name !== undefined) deletedInterfaces.push(name);
        this.view.interfaces.delete(uuid);
      }
    }
    for (const w of [...this.cfgWaiters]) if (this.curCfg >= w.cfg) w.done();
    if (notify) {
      this.tell({
        kind: "changed",
        tables: Object.keys(tables),
        deletedBridges,
        deletedInterfaces,
      });
    }
  }
}

/** The operations that create one port with its one interface; named port{i} / iface{i}. */
/** The rows of a new port and its interface, named `port${i}` and `iface${i}` in the transaction. */
export function insertPort(p: OvsPortSpec, i: number, noopQos?: string): Op[] {
  const iface: Row = { name: p.name };
  if (p.type) iface.type = p.type;
  if (p.ofportRequest !== undefined) iface.ofport_request = p.ofportRequest;
  if (p.options) iface.options = ovsMap(p.options);
  if (p.externalIds) iface.external_ids = ovsMap(p.externalIds);
  const port: Row = { name: p.name, interfaces: ["named-uuid", `iface${i}`] };
  if (p.tag !== undefined) port.tag = p.tag;
  if (p.keepQdisc && noopQos) port.qos = ["uuid", noopQos];
  return [
    { op: "insert", table: "Interface", row: iface, "uuid-name": `iface${i}` },
    { op: "insert", table: "Port", row: port, "uuid-name": `port${i}` },
  ];
}

/** OVSDB maps are `["map", [[k, v], ...]]`. */
function mapOf(cell: Json | undefined): Record<string, string> {
  if (!Array.isArray(cell) || cell[0] !== "map") return {};
  return Object.fromEntries(cell[1] as [string, string][]);
}

function ovsMap(map: Record<string, string>): Json {
  return ["map", Object.entries(map)];
}

/**
 * Cuts a stream of concatenated JSON texts (what ovsdb-server sends: no framing) into single
 * texts, by tracking nesting outside of strings.
 */
export class JsonSplitter {
  private buffer = "";
  private depth = 0;
  private inString = false;
  private escaped = false;
  private scanned = 0;

  push(text: string): string[] {
    this.buffer += text;
    const out: string[] = [];
    let start = 0;
    for (let i = this.scanned; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === "\\") this.escaped = true;
        else if (c === '"') this.inString = false;
      } else if (c === '"') {
        this.inString = true;
      } else if (c === "{" || c === "[") {
        this.depth++;
      } else if (c === "}" || c === "]") {
        if (--this.depth === 0) {
          out.push(this.buffer.slice(start, i + 1).trim());
          start = i + 1;
        }
      }
    }
    this.buffer = this.buffer.slice(start);
    this.scanned = this.buffer.length;
    return out;
  }
}
