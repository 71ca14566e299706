/**
 * Port mirrors (manager/README.md, "Port mirrors") as OVS Mirror rows on br-int, computed from the
 * manager's mirrors and this node's ports after every flow sync: the rows this agent wants are
 * made or corrected, its rows no mirror wants any more are removed; rows it did not make are left
 * alone. A node realises a mirror whose collector port it hosts, with the sources it hosts too (a
 * source on another node is skipped: the copies are made where the packets are). Since the rows
 * live in ovsdb-server, they outlast an agent or ovs-vswitchd restart; the next sync checks them.
 */
import type { Logger, MirrorInfo, MirrorPort } from "@knitter/common";
import type { Op, OvsdbClient } from "./ovsdb.ts";

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
}

/**
 * The rows this node wants: for each mirror whose collector is one of `local` (OVS port names by
 * "networkId/portId"), its local sources by direction. A mirror with no local source has no row.
 */
export function mirrorRows(mirrors: Iterable<MirrorInfo>, local: Map<string, string>): MirrorRow[] {
  const out: MirrorRow[] = [];
  for (const m of mirrors) {
    const output = local.get(portKey(m.collector));
    if (output === undefined) continue;
    const sources = m.sources.flatMap((s) => local.get(portKey(s)) ?? []).sort();
    if (sources.length === 0) continue;
    out.push({
      id: `${m.tenant}/${m.name}`,
      srcPorts: m.direction === "in" ? [] : sources,
      dstPorts: m.direction === "out" ? [] : sources,
      output,
    });
  }
  return out;
}

/** The sources of local-collector mirrors this node does not host (logged: not copied). */
export function awaySources(mirrors: Iterable<MirrorInfo>, local: Map<string, string>): string[] {
  return [...mirrors].flatMap((m) =>
    local.has(portKey(m.collector))
      ? m.sources.filter((s) => !local.has(portKey(s))).map((s) => `${m.tenant}/${m.name}: ${s.id}`)
      : []
  );
}

export function portKey(p: Pick<MirrorPort, "networkId" | "id">): string {
  return `${p.networkId}/${p.id}`;
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

export class MirrorRows {
  private away = "[]";

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

  /** Makes the bridge's mirrors of this agent exactly `wanted`, in one transaction. */
  async reconcile(wanted: MirrorRow[], away: string[] = []): Promise<void> {
    this.logAway(away);
    const [actual, uuids] = await Promise.all([this.ours(), this.portUuids()]);
    const ops: Op[] = [];
    const drop: string[] = [];
    const keep = new Set<string>();
    wanted.forEach((w, i) => {
      const want = resolved(w, uuids);
      if (!want) return;
      const have = actual.find((a) => a.id === w.id);
      if (have && sameSelection(have, want)) {
        keep.add(have.uuid);
        return;
      }
      ops.push(insertRow(w, want, `m${i}`));
    });
    for (const a of actual) if (!keep.has(a.uuid)) drop.push(a.uuid);
    const made = ops.map((op) => ["named-uuid", op["uuid-name"] as string]);
    if (made.length === 0 && drop.length === 0) return;
    ops.push(...bridgeMirrors(this.bridge, "delete", drop.map((u) => ["uuid", u])));
    ops.push(...bridgeMirrors(this.bridge, "insert", made));
    // Answered once ovs-vswitchd uses the rows: a switch left alone may not act on them at once.
    await this.db.transactApplied(ops);
    await this.purge();
    this.log.info("port mirrors updated", { made: made.length, removed: drop.length });
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

  private logAway(away: string[]): void {
    const key = JSON.stringify(away);
    if (key === this.away) return;
    this.away = key;
    if (away.length > 0) {
      this.log.warn("mirror sources on another node than their collector are not copied", {
        sources: away,
      });
    }
  }
}

/** The row's selection in port UUIDs; null while a port is not on the bridge yet. */
function resolved(w: MirrorRow, uuids: Map<string, string>) {
  const all = [...w.srcPorts, ...w.dstPorts, w.output];
  if (all.some((n) => !uuids.has(n))) return null;
  const of = (names: string[]) => names.map((n) => uuids.get(n)!).sort();
  return { src: of(w.srcPorts), dst: of(w.dstPorts), output: [uuids.get(w.output)!] };
}

function sameSelection(a: ActualRow, b: { src: string[]; dst: string[]; output: string[] }) {
  const eq = (x: string[], y: string[]) => JSON.stringify([...x].sort()) === JSON.stringify(y);
  return eq(a.src, b.src) && eq(a.dst, b.dst) && eq(a.output, b.output);
}

function insertRow(
  w: MirrorRow,
  want: { src: string[]; dst: string[]; output: string[] },
  name: string,
): Op {
  const set = (uuids: string[]) => ["set", uuids.map((u) => ["uuid", u])];
  return {
    op: "insert",
    table: "Mirror",
    "uuid-name": name,
    row: {
      name: w.id,
      select_src_port: set(want.src),
      select_dst_port: set(want.dst),
      output_port: ["uuid", want.output[0]],
      external_ids: ["map", [[MIRROR_ID, w.id]]],
    },
  };
}

/** A Mirror row is a child of its bridge: removed from Bridge.mirrors, the row is gone. */
function bridgeMirrors(bridge: string, how: "insert" | "delete", refs: Json[]): Op[] {
  if (refs.length === 0) return [];
  return [{
    op: "mutate",
    table: "Bridge",
    where: [["name", "==", bridge]],
    mutations: [["mirrors", how, ["set", refs]]],
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
