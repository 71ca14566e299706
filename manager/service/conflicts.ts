/**
 * Conflicts in ports' status: which node leaves which port out of its flows because another port
 * claims its MAC or address there (agent/PIPELINE.md, "Conflicting entries").
 *
 * Each node reports its whole current set (PUT /nodes/{node}/conflicts, node-scoped), again on
 * every change; an empty set clears it. The manager keeps one report per node (its entries a key
 * each, service/conflict_records.ts), so a node's report only ever replaces its own. What a node may say is bounded by what it sees: an entry is kept only
 * when it names a port bound to another node (a node's remote view holds no other ports) that holds
 * the reported MAC or address now. So a hostile node can mark a port only with a claim the port
 * really has, under its own name; it can neither invent a value nor speak for another node. The
 * other claimant (`with`) is the node's word (a local pod whose port the manager released after a
 * lost DEL is known to that node only); a tenant sees it only when it names one of its own ports.
 *
 * Ports are shown with every node's entries that still match them: an entry whose port was
 * released or changed its MAC or address since the report is not shown.
 */
import type { Port } from "@knitter/common";
import type { z } from "zod";
import type { Principal } from "../auth.ts";
import { canonicalIp, parseMac } from "@knitter/common/address";
import { keys, type PortRecord } from "../model.ts";
import type { ConflictReport, ConflictReportItem, PortConflict } from "../schemas.ts";
import type { Key } from "../store/store.ts";
import { type Ctx, now } from "./context.ts";
import {
  type ConflictHead,
  entriesOf,
  readReport,
  type StoredItem,
  writeReport,
} from "./conflict_records.ts";
import { keyId } from "./ports/mod.ts";
import { seesRecord } from "./cluster_view.ts";

type Item = z.infer<typeof ConflictReportItem>;
export type PortConflictView = z.infer<typeof PortConflict>;

/** A node's last report, as answered. */
export interface NodeConflictsRecord {
  node: string;
  updatedAt: string;
  items: StoredItem[];
}

/** A port as answered, with the conflicts nodes report on it. */
export type PortWithConflicts = Port & { conflicts?: PortConflictView[] };

/**
 * Replaces `node`'s report with the entries of its report that hold (module documentation). An
 * entry that was in the last report keeps its `since`. Answers the report and how many entries
 * were not kept.
 */
export async function reportConflicts(
  ctx: Ctx,
  req: { node: string; report: z.infer<typeof ConflictReport>; principal?: Principal },
): Promise<NodeConflictsRecord & { ignored: number }> {
  const { node, report, principal = { scope: "admin" } } = req;
  const kept = await writeReport(ctx, node, async (previous, t) => {
    const before = new Map(previous.map((i) => [identity(i), i.since]));
    const items: StoredItem[] = [];
    const seen = new Set<string>();
    const ports = await portsOf(ctx, report.items);
    for (const [k, item] of report.items.entries()) {
      const id = identity(item);
      const port = ports[k];
      if (seen.has(id) || !port || port.node === undefined || port.node === node) continue;
      if (!holds(port, item.field, item.value)) continue;
      // Another cluster's port only when the node's cluster shares its network (its remote view).
      if (!(await seesRecord(ctx, principal, port))) continue;
      seen.add(id);
      items.push({ ...item, value: canonical(item.field, item.value), since: before.get(id) ?? t });
    }
    return items;
  });
  return { node, ...kept, ignored: report.items.length - kept.items.length };
}

/** A node's report; an empty one when it reported none (or nothing that held). */
export async function nodeConflicts(ctx: Ctx, node: string): Promise<NodeConflictsRecord> {
  const { head, items } = await readReport(ctx.store, node);
  return { node, updatedAt: head.value?.updatedAt ?? now(), items };
}

/**
 * The ports with the conflicts that nodes report on them (as `principal` may see them). Reads one
 * key, whatever the number of ports and nodes: every node's record only when one changed.
 */
export async function withConflicts(
  ctx: Ctx,
  principal: Principal,
  ports: Port[],
): Promise<PortWithConflicts[]> {
  const byPort = await reportedByPort(ctx);
  if (byPort.size === 0) return ports;
  return ports.map((p) => {
    const found = byPort.get(portKey(p))
      ?.filter(({ item }) => holds(p, item.field, item.value))
      .map(({ node, item }) => {
        const view: PortConflictView = {
          node,
          field: item.field,
          value: item.value,
          reason: item.reason,
          since: item.since,
        };
        const w = item.with;
        if (w && (principal.scope !== "tenant" || w.tenant === principal.tenant)) view.with = w;
        return view;
      });
    return found?.length ? { ...p, conflicts: found } : p;
  });
}

type Reported = Map<string, { node: string; item: StoredItem }[]>;

/** Every node's entries by port, as read at a version of keys.conflictsChanged(). */
const reported = new WeakMap<Ctx, { version: string; byPort: Reported }>();

/**
 * Every node's entries, by port: read from the records when keys.conflictsChanged() moved since
 * the last read (another replica's report moves it too), else from memory. Without that key (no
 * report yet, or records from a manager before it) the records are read each time.
 */
async function reportedByPort(ctx: Ctx): Promise<Reported> {
  const changed = await ctx.store.get(keys.conflictsChanged());
  const cached = reported.get(ctx);
  if (changed.version !== null && cached?.version === changed.version) return cached.byPort;
  // Read after the version: a report in between is newer than the version kept, read again later.
  const byPort: Reported = new Map();
  for await (const head of ctx.store.list<ConflictHead>(keys.allConflicts())) {
    const node = head.value!.node;
    const items = await entriesOf(ctx.store, head) ?? (await readReport(ctx.store, node)).items;
    for (const item of items) {
      const k = portKey(item);
      const list = byPort.get(k) ?? [];
      list.push({ node, item });
      byPort.set(k, list);
    }
  }
  if (changed.version !== null) reported.set(ctx, { version: changed.version, byPort });
  return byPort;
}

function portKey(p: { networkId: string; tenant: string; id: string }): string {
  return `${p.networkId} ${p.tenant} ${p.id}`;
}

/** The same as {@link withConflicts}, for one port. */
export async function withConflictsOne(
  ctx: Ctx,
  principal: Principal,
  port: Port,
): Promise<PortWithConflicts> {
  return (await withConflicts(ctx, principal, [port]))[0];
}

/** The record of each item's port, or null; a port is stored under its network's tenant's scope. */
async function portsOf(ctx: Ctx, items: Item[]): Promise<(PortRecord | null)[]> {
  // The network's tenant is not in the report: a port is under "id" on its own tenant's network
  // and under "tenant/id" on another's; the record says which one it is.
  const candidates: Key[] = items.flatMap((i) => [
    keys.port(i.networkId, i.id),
    keys.port(i.networkId, `${i.tenant}/${i.id}`),
  ]);
  const entries = await ctx.store.getMany<PortRecord>(candidates);
  return items.map((item, k) => {
    for (const e of entries.slice(2 * k, 2 * k + 2)) {
      const p = e.value;
      if (
        p && p.networkId === item.networkId && p.tenant === item.tenant && p.id === item.id &&
        e.key.at(-1) === keyId(p.networkTenant, p.tenant, p.id)
      ) return p;
    }
    return null;
  });
}

/** Whether the port holds that MAC or address now (a dual-stack port: either address). */
function holds(
  port: { mac: string; ip: string; ip6?: string },
  field: "mac" | "ip",
  value: string,
): boolean {
  const held = field === "mac" ? [port.mac] : [port.ip, port.ip6];
  return held.some((h) => h !== undefined && canonical(field, value) === canonical(field, h));
}

/** A MAC or address in the form ports hold it (any other text as it is). */
function canonical(field: "mac" | "ip", value: string): string {
  return field === "ip" ? canonicalIp(value) : parseMac(value) ?? value;
}

function identity(i: Item): string {
  return `${i.networkId} ${i.tenant} ${i.id} ${i.field} ${i.reason}`;
}
