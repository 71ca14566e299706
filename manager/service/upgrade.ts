/**
 * Brings a store written by an older manager up to what this one expects. Run at start, before the
 * API is served; every step is idempotent and commits with checks, so replicas starting together
 * do no harm. A step that scans writes its marker once nothing is left to do, so that later starts
 * read one key instead of scanning (a start on a million ports is as quick as on none).
 */
import { keys, type PortRecord } from "../model.ts";
import { Tx } from "../store/tx.ts";
import type { Key, Store } from "../store/store.ts";
import { type Ctx, now } from "./context.ts";
import { portKeyId } from "./ports/mod.ts";

/**
 * Set once no port of a tenant on another tenant's (public) network is left under its bare ID. A
 * manager older than tenant-scoped keys that writes to the store after that (a replica not yet
 * upgraded) leaves its new ports to `check --repair` (repair.ts), which moves them whatever the
 * marker says.
 */
const FOREIGN_KEYS_SCOPED = keys.upgraded("foreign-port-keys-scoped");

/**
 * Ports of a tenant on another tenant's (public) network were stored under their bare ID; they now
 * live under "tenant/id". Moves each such port and its index keys, once per store (its marker
 * says it was done). Returns how many moved.
 */
export async function scopeForeignPortKeys(ctx: Ctx): Promise<number> {
  if ((await ctx.store.get(FOREIGN_KEYS_SCOPED)).value) return 0;
  const { moved, left } = await moveForeignPortKeys(ctx.store);
  if (left === 0) await new Tx().set(FOREIGN_KEYS_SCOPED, { at: now() }).commit(ctx.store);
  return moved;
}

/**
 * Moves every port of a tenant on another tenant's network still under its bare ID, reading every
 * such port's index. `left`: those that kept changing under the move (8 attempts each).
 */
export async function moveForeignPortKeys(store: Store): Promise<{ moved: number; left: number }> {
  const legacy: Key[] = [];
  for await (const e of store.list(["port_of_tenant_on_foreign_network"])) {
    const id = e.key.at(-1) as string;
    if (!id.includes("/")) legacy.push(keys.port(e.key.at(-2) as string, id));
  }
  const outcomes: Outcome[] = [];
  for (const key of legacy) outcomes.push(await moveOne(store, key));
  const count = (what: Outcome) => outcomes.filter((o) => o === what).length;
  return { moved: count("moved"), left: count("busy") };
}

/** A port moved, gone or needing no move, or changing under each attempt. */
type Outcome = "moved" | "none" | "busy";

/** Moves one port and its index keys. */
async function moveOne(store: Store, key: Key): Promise<Outcome> {
  for (let attempt = 0; attempt < 8; attempt++) {
    const e = await store.get<PortRecord>(key);
    const p = e.value;
    if (!p || p.tenant === p.networkTenant) return "none";
    const tx = new Tx();
    const id = portKeyId(p);
    const target = keys.port(p.networkId, id);
    tx.check(e).checkAbsent(target).delete(key).set(target, p);
    tx.delete(keys.portOfForeignNetwork(p.tenant, p.networkId, p.id))
      .set(keys.portOfForeignNetwork(p.tenant, p.networkId, id), true);
    // Ports are no longer indexed by node (ports/records.ts): the old key goes, none is made.
    if (p.node) tx.delete(keys.portOfNode(p.node, p.networkId, p.id));
    if (p.pod) {
      tx.delete(keys.portOfPod(p.pod, p.networkId, p.id))
        .set(keys.portOfPod(p.pod, p.networkId, id), true);
    }
    if (await tx.commit(store)) return "moved";
  }
  return "busy";
}
