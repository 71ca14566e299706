/**
 * Port mirrors (manager/README.md, "Port mirrors") as OVS Mirror rows on br-int, computed from the
 * manager's mirrors and this node's ports after every flow sync: the rows this agent wants are
 * made or corrected, its rows no mirror wants any more are removed; rows it did not make are left
 * alone. A node realises a mirror whose collector port it hosts, with the sources it hosts too (a
 * source on another node is skipped: the copies are made where the packets are), and a mirror to
 * a remote collector with the sources it hosts, through a tunnel port of its own towards the address
 * (GRE, ERSPAN or VXLAN: mirror_tunnels.ts).
 * Since the rows live in ovsdb-server, they outlast an agent or ovs-vswitchd restart; the next sync
 * checks them.
 * A filtered mirror is no row (a row copies everything): its rules go into the flow compiler's
 * input (`mirrorFilters`), as flows that copy what a local source sends and matches a rule to the
 * collector's port (agent/PIPELINE.md, "Filtered mirrors").
 */
import {
  isRemoteCollector,
  type Logger,
  type MirrorFilterRule,
  type MirrorInfo,
  type MirrorPort,
  Mutex,
} from "@knitter/common";
import type { FlowMirrorFilter } from "@knitter/wasm";
import { insertPort, type Op, type OvsdbClient } from "./ovsdb.ts";
import { portKey } from "./port_key.ts";
import {
  type Tunnel,
  TUNNEL_PREFIX,
  tunnelName,
  tunnelOf,
  tunnelsNeeded,
} from "./mirror_tunnels.ts";

export { type Tunnel, TUNNEL_PREFIX, tunnelName, tunnelOf };

/** Marks the Mirror rows this agent owns: the mirror's "tenant/name". */
export const MIRROR_ID = "knitter-mirror";

/** One Mirror row as wanted: OVS port names. */
export interface MirrorRow {
  /** "tenant/name", also the row's name. */
  id: string;
  /** Ports whose received packets are copied (what their pods send: "out"). */
  srcPorts: string[];
  /** Ports whose sent packets are copied (what their pods receive: "in"). */
  dstPorts: string[];
  output: string;
  /** A remote collector: `output` is this tunnel port of this agent's. */
  tunnel?: Tunnel;
}

/** Their ofports: below the pods' (port_plugger.ts POD_OFPORT_MIN), above the tunnel and patches. */
const TUNNEL_OFPORTS = { first: 900, last: 999 };

/**
 * The rows this node wants: for each mirror whose collector is one of `local` (OVS port names by
 * "networkId/portId"), its local sources by direction. A mirror with no local source has no row.
 */
export function mirrorRows(
  mirrors: Iterable<MirrorInfo>,
  local: Map<string, string>,
  nodeIps: ReadonlySet<string> = new Set(),
): MirrorRow[] {
  const out: MirrorRow[] = [];
  for (const m of mirrors) {
    const c = m.collector;
    if (m.filter || atNode(c, nodeIps)) continue;
    const tunnel = isRemoteCollector(c) ? tunnelOf(c) : undefined;
    const key = (p: MirrorPort) => portKey({ ...p, tenant: m.tenant });
    const output = tunnel ? tunnel.name : local.get(key(c as MirrorPort));
    if (output === undefined) continue;
    const sources = m.sources.flatMap((s) => local.get(key(s)) ?? []).sort();
    if (sources.length === 0) continue;
    out.push({
      id: `${m.tenant}/${m.name}`,
      srcPorts: m.direction === "in" ? [] : sources,
      dstPorts: m.direction === "out" ? [] : sources,
      output,
      ...(tunnel ? { tunnel } : {}),
    });
  }
  return out;
}

/**
 * The compiler's rules of the filtered mirrors whose collector port is here (`ofports`: active
 * local ports' ofports by "tenant/networkId/portId"): per local source and rule, what it sends
 * that the rule matches goes to the collector's ofport. Keyed by the mirror's tenant, so a port
 * of another tenant with the same ID is never a source nor the collector.
 */
export function mirrorFilters(
  mirrors: Iterable<MirrorInfo>,
  ofports: Map<string, number>,
): FlowMirrorFilter[] {
  const out: FlowMirrorFilter[] = [];
  // Two mirrors' equal rules on one source would be two flows of one match: the first is kept.
  const seen = new Set<string>();
  for (const m of mirrors) {
    if (!m.filter || isRemoteCollector(m.collector)) continue;
    const key = (p: MirrorPort) => portKey({ ...p, tenant: m.tenant });
    const output = ofports.get(key(m.collector));
    if (output === undefined) continue;
    for (const s of m.sources) {
      const source = ofports.get(key(s));
      if (source === undefined) continue;
      for (const r of m.filter) {
        const match = ruleMatch(r);
        const id = JSON.stringify({ source, ...match });
        if (!seen.has(id)) out.push({ source, output, ...match });
        seen.add(id);
      }
    }
  }
  return out;
}

/** A rule as the compiler reads it: "5000-5003" as portMin and portMax. */
function ruleMatch(r: MirrorFilterRule): Omit<FlowMirrorFilter, "source" | "output"> {
  const [min, max = min] = r.ports?.split("-").map(Number) ?? [];
  return {
    protocol: r.protocol,
    ...(min === undefined ? {} : { portMin: min, portMax: max }),
    ...(r.remote === undefined ? {} : { remote: r.remote }),
  };
}

/**
 * A remote collector at a node's underlay address (the manager refuses one, but a node may be
 * registered with that address later): that node's tunnel port would take the copies in, VXLAN
 * ones into the network of their VNI. Such a mirror gets no row; it is logged.
 */
const atNode = (c: MirrorInfo["collector"], nodeIps: ReadonlySet<string>) =>
  isRemoteCollector(c) && nodeIps.has(c.remote.ip);

/** The mirrors whose remote collector is a node's address (logged: not copied). */
export function collectorsAtNodes(
  mirrors: Iterable<MirrorInfo>,
  nodeIps: ReadonlySet<string>,
): string[] {
  return [...mirrors].flatMap((m) =>
    isRemoteCollector(m.collector) && atNode(m.collector, nodeIps)
      ? [`${m.tenant}/${m.name}: ${m.collector.remote.ip}`]
      : []
  );
}

/** The sources of local-collector mirrors this node does not host (logged: not copied). */
export function awaySources(mirrors: Iterable<MirrorInfo>, local: Map<string, string>): string[] {
  return [...mirrors].flatMap((m) => {
    const key = (p: MirrorPort) => portKey({ ...p, tenant: m.tenant });
    const here = !isRemoteCollector(m.collector) && local.has(key(m.collector));
    return here
      ? m.sources.filter((s) => !local.has(key(s))).map((s) => `${m.tenant}/${m.name}: ${s.id}`)
      : [];
  });
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Row = Record<string, Json>;

/** A Mirror row as read: its UUID and what it selects, in port UUIDs. */
interface ActualRow {
  uuid: string;
  id: string;
  src: string[];
  dst: string[];
  output: string[];
}

/** The warnings of what is not copied, by the field that lists them. */
const NOT_COPIED = {
  sources: "mirror sources on another node than their collector are not copied",
  mirrors: "mirrors to a node's underlay address are not copied (delete them)",
};

export class MirrorRows {
  /** What each warning last listed. */
  private readonly warned = { sources: "[]", mirrors: "[]" };
  private readonly mutex = new Mutex();
  /** What the last sync wanted, and whether a row of it waits for a port to be on the bridge. */
  private last: { wanted: MirrorRow[]; away: string[]; atNodes: string[] } | null = null;
  private waiting = false;
  private watching = false;
  /** Interface table changes seen: one during a reconciliation may be the port it waits for. */
  private changes = 0;
  /** The bridge had no row nor GRE port of this agent's, and none was wanted, when last read. */
  private clean = false;

  constructor(
    private readonly db: OvsdbClient,
    private readonly bridge: string,
    private readonly log: Logger,
    /**
     * Drops the datapath's cached flows (`ovs-appctl revalidator/purge`): the userspace datapath
     * keeps using a cached flow made before a mirror changed for seconds (a busy one, as long as
     * it is busy), so that copies would start late and go on after a mirror is deleted. The next
     * packets are translated again, with the mirrors as they now are; none is lost.
     */
    private readonly purge: () => Promise<unknown> = () => Promise.resolve(),
  ) {}

  /**
   * Makes the bridge's mirrors of this agent exactly `wanted`, and its tunnel ports those the remote
   * collectors need, in one transaction.
   */
  reconcile(wanted: MirrorRow[], away: string[] = [], atNodes: string[] = []): Promise<void> {
    this.last = { wanted, away, atNodes };
    this.warnOnce("mirrors", atNodes);
    return this.mutex.run(() => this.apply(wanted, away));
  }

  /** Makes the next reconciliation read the bridge again (after a heal: the switch may be new). */
  forget(): void {
    this.clean = false;
  }

  /**
   * A pod's flows are synced while its port is being plugged (interfaces/wiring.ts): a row whose
   * port is not on the bridge yet is made when the database has the port, not at the next sync.
   */
  private watchPorts(): void {
    if (this.watching) return;
    this.watching = true;
    this.db.watch((e) => {
      if (e.kind !== "changed" || !e.tables.includes("Interface")) return;
      this.changes++;
      if (this.waiting) this.again();
    });
  }

  /** Reconciles the last wanted rows again (a port they wait for may be there now). */
  private again(): void {
    const last = this.last!;
    this.reconcile(last.wanted, last.away, last.atNodes).catch((err) =>
      this.log.warn("port mirrors not updated", { error: String(err?.message ?? err) })
    );
  }

  private async apply(wanted: MirrorRow[], away: string[]): Promise<void> {
    this.warnOnce("sources", away);
    // No mirror here, and none of ours on the bridge when last read: a sync (every pod's) costs
    // no OVSDB round trip. A heal makes the next sync read again (forget()).
    if (wanted.length === 0 && this.clean) return;
    this.watchPorts();
    const seen = this.changes;
    const [actual, ports] = await Promise.all([this.ours(), this.portUuids()]);
    this.clean = wanted.length === 0 && actual.length === 0 &&
      ![...ports.keys()].some((n) => n.startsWith(TUNNEL_PREFIX));
    const refs = new Map([...ports].map(([name, uuid]) => [name, `uuid:${uuid}`]));
    const ops = await this.tunnels(wanted, ports, refs);
    const made = ops.length;
    const keep = new Set<string>();
    this.waiting = wanted.some((w) => !resolved(w, refs));
    // The port came while the bridge's ports were being read: its event found nothing waiting.
    if (this.waiting && this.changes !== seen) this.again();
    wanted.forEach((w, i) => {
      const want = resolved(w, refs);
      if (!want) return;
      const have = actual.find((a) => a.id === w.id);
      if (have && sameSelection(have, want)) {
        keep.add(have.uuid);
        return;
      }
      ops.push(insertRow(w, want, `m${i}`));
    });
    const rows = ops.slice(made).map((op) => ["named-uuid", op["uuid-name"] as string]);
    const drop = actual.filter((a) => !keep.has(a.uuid)).map((a) => ["uuid", a.uuid]);
    if (ops.length === 0 && drop.length === 0) return;
    ops.push(...bridgeSet(this.bridge, "mirrors", "delete", drop));
    ops.push(...bridgeSet(this.bridge, "mirrors", "insert", rows));
    // Answered once ovs-vswitchd uses the rows: a switch left alone may not act on them at once.
    await this.db.transactApplied(ops);
    await this.purge();
    this.log.info("port mirrors updated", { made: rows.length, removed: drop.length });
  }

  /**
   * The operations that add the tunnel ports the wanted rows need and remove those none needs; the
   * new ones' references go into `refs` (named UUIDs of this transaction).
   */
  private async tunnels(
    wanted: MirrorRow[],
    ports: Map<string, string>,
    refs: Map<string, string>,
  ): Promise<Op[]> {
    const need = tunnelsNeeded(wanted);
    const ops: Op[] = [];
    const added: Json[] = [];
    const fresh = [...need.values()].filter((t) => !ports.has(t.name));
    const free = fresh.length > 0 ? await this.freeTunnelOfports() : [];
    for (const { name, type, options } of fresh) {
      const ofportRequest = free.shift();
      if (ofportRequest === undefined) throw new Error("no free ofport left for a mirror tunnel");
      const k = added.length;
      ops.push(...insertPort({ name, type, ofportRequest, options }, k));
      refs.set(name, `named:port${k}`);
      added.push(["named-uuid", `port${k}`]);
    }
    const gone = [...ports].filter(([n]) => n.startsWith(TUNNEL_PREFIX) && !need.has(n));
    ops.push(...bridgeSet(this.bridge, "ports", "insert", added));
    ops.push(...bridgeSet(this.bridge, "ports", "delete", gone.map(([, u]) => ["uuid", u])));
    return ops;
  }

  /** The tunnel ofports no interface asks for. */
  private async freeTunnelOfports(): Promise<number[]> {
    const [r] = await this.db.transact([
      { op: "select", table: "Interface", where: [], columns: ["ofport_request"] },
    ]);
    const taken = new Set((r.rows as Row[]).map((row) => row.ofport_request));
    const out: number[] = [];
    for (let n = TUNNEL_OFPORTS.first; n <= TUNNEL_OFPORTS.last; n++) {
      if (!taken.has(n)) out.push(n);
    }
    return out;
  }

  /** The Mirror rows this agent made (any bridge's: a row is only ever on br-int). */
  private async ours(): Promise<ActualRow[]> {
    const [r] = await this.db.transact([{
      op: "select",
      table: "Mirror",
      where: [],
      columns: ["_uuid", "external_ids", "select_src_port", "select_dst_port", "output_port"],
    }]);
    return (r.rows as Row[]).flatMap((row) => {
      const id = mapOf(row.external_ids)[MIRROR_ID];
      if (id === undefined) return [];
      return [{
        uuid: uuidOf(row._uuid),
        id,
        src: setOf(row.select_src_port),
        dst: setOf(row.select_dst_port),
        output: setOf(row.output_port),
      }];
    });
  }

  private async portUuids(): Promise<Map<string, string>> {
    const [r] = await this.db.transact([
      { op: "select", table: "Port", where: [], columns: ["_uuid", "name"] },
    ]);
    return new Map((r.rows as Row[]).map((row) => [row.name as string, uuidOf(row._uuid)]));
  }

  /** Warns of what is not copied, once each time the list changes. */
  private warnOnce(what: keyof typeof NOT_COPIED, list: string[]): void {
    const key = JSON.stringify(list);
    if (key === this.warned[what]) return;
    this.warned[what] = key;
    if (list.length > 0) this.log.warn(NOT_COPIED[what], { [what]: list });
  }
}

/**
 * The row's selection as references ("uuid:U", or "named:N" for a port made in the same
 * transaction); null while a port is not on the bridge yet.
 */
function resolved(w: MirrorRow, refs: Map<string, string>) {
  const all = [...w.srcPorts, ...w.dstPorts, w.output];
  if (all.some((n) => !refs.has(n))) return null;
  const of = (names: string[]) => names.map((n) => refs.get(n)!).sort();
  return { src: of(w.srcPorts), dst: of(w.dstPorts), output: [refs.get(w.output)!] };
}

/** A reference as OVSDB takes it. */
function ref(r: string): Json {
  const [kind, value] = r.split(/:(.*)/);
  return kind === "named" ? ["named-uuid", value] : ["uuid", value];
}

function sameSelection(a: ActualRow, b: { src: string[]; dst: string[]; output: string[] }) {
  const uuids = (x: string[]) => x.map((u) => `uuid:${u}`).sort();
  const eq = (x: string[], y: string[]) => JSON.stringify(uuids(x)) === JSON.stringify(y);
  return eq(a.src, b.src) && eq(a.dst, b.dst) && eq(a.output, b.output);
}

function insertRow(
  w: MirrorRow,
  want: { src: string[]; dst: string[]; output: string[] },
  name: string,
): Op {
  const set = (refs: string[]) => ["set", refs.map(ref)];
  return {
    op: "insert",
    table: "Mirror",
    "uuid-name": name,
    row: {
      name: w.id,
      select_src_port: set(want.src),
      select_dst_port: set(want.dst),
      output_port: ref(want.output[0]),
      external_ids: ["map", [[MIRROR_ID, w.id]]],
    },
  };
}

/**
 * Adds to or removes from a set column of the bridge: a Mirror or Port row is a child of its
 * bridge, gone once no bridge refers to it.
 */
function bridgeSet(
  bridge: string,
  column: "mirrors" | "ports",
  how: "insert" | "delete",
  refs: Json[],
): Op[] {
  if (refs.length === 0) return [];
  return [{
    op: "mutate",
    table: "Bridge",
    where: [["name", "==", bridge]],
    mutations: [[column, how, ["set", refs]]],
  }];
}

function uuidOf(v: Json): string {
  return (v as Json[])[1] as string;
}

/** An OVSDB set column: ["set", [...]] or a single atom. */
function setOf(v: Json): string[] {
  const a = v as Json[];
  if (a[0] === "set") return (a[1] as Json[]).map(uuidOf);
  return [uuidOf(v)];
}

function mapOf(v: Json): Record<string, string> {
  return Object.fromEntries(((v as Json[])[1] as [string, string][]) ?? []);
}
