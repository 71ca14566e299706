/**
 * Batching: PUTs of new ports that ask for no fixed address, group or MAC wait a moment for
 * others of their network and go in one commit, which checks only that each port is absent. When
 * that commit fails, each of its ports takes the careful path (put.ts), which reads first:
 * a port that already existed is answered as it is, anything else was a lost race.
 */
import { GroupCommit } from "@knitter/common";
import { keys, type NetworkRecord } from "../../model.ts";
import { Tx } from "../../store/tx.ts";
import { COMMIT_LIMITS, type Entry } from "../../store/store.ts";
import type { Ctx } from "../context.ts";
import type { NetworkRef } from "../network_lookup.ts";
import { QuotaCharges } from "../quotas.ts";
import { MAX_SOURCES } from "../quota_shares.ts";
import { buildPut } from "./allocation.ts";
import { keyId, type PortBody, type PutResult } from "./records.ts";
import { checkNetwork, Restart } from "./guards.ts";

/** A PUT waiting for its batch. */
interface Pending {
  owner: string;
  id: string;
  body: PortBody;
  /** Its cluster's record, which the commit checks (../clusters.ts clusterGuard). */
  guard: Entry<unknown>;
  /** null: the batch could not settle it; the caller takes the careful path. */
  resolve(r: PutResult | null): void;
  reject(err: unknown): void;
}

/**
 * Ports per batch, at most: a commit of them takes one fsync. Each port's two checks (its absent key
 * and, on a network where one was ever bound, its floating binding's), with the network's, the
 * pool's, the floating marker's, a quota's record and share, a cluster's and room for the
 * quarantine count's, fill a commit's 100 checks at 46.
 */
export const MAX_BATCH = 46;

/**
 * The checks one more port may add: its absent key, its floating address binding's (absent or not:
 * floating.ts), its tenant's quota record and share, and the shares a rebalance takes room from
 * (../quota_shares.ts), and its cluster's (on a public network every port may be another tenant's,
 * of another cluster). A batch takes ports while they fit into one commit's checks; the others take
 * the careful path.
 */
const CHECKS_PER_PORT = 5 + MAX_SOURCES;

/** Kept free for the network's quarantine count, which the first port to end a quarantine checks. */
const COUNT_CHECK = 1;

/** The PUT in a batch of its network: its answer, or null when the careful path must settle it. */
export function batchedPut(
  ctx: Ctx,
  opts: {
    ref: NetworkRef;
    owner: string;
    id: string;
    body: PortBody;
    guard: Entry<unknown>;
  },
): Promise<PutResult | null> {
  const { ref, owner, id, body, guard } = opts;
  return new Promise<PutResult | null>((resolve, reject) =>
    batcherOf(ctx, ref).submit({ owner, id, body, guard, resolve, reject })
  );
}

function batcherOf(ctx: Ctx, ref: NetworkRef): GroupCommit<Pending> {
  return ctx.pools.perNetwork(
    ref.net,
    "ports",
    () => new GroupCommit<Pending>(MAX_BATCH, (p) => p.id, (batch) => commitBatch(ctx, ref, batch)),
  );
}

/** Allocates a batch of new ports in one commit, checking only that each is absent. */
async function commitBatch(ctx: Ctx, ref: NetworkRef, batch: Pending[]): Promise<void> {
  const pool = ctx.pools.addresses(ref.net);
  await pool.exclusive(async () => {
    const tx = new Tx();
    const done: [Pending, PutResult][] = [];
    const unsettled: Pending[] = [];
    try {
      const edit = await pool.edit(tx);
      checkNetwork(tx, ref);
      const charges = new QuotaCharges(ctx, tx, ref.net.id);
      const clusters = new Set<string>();
      for (const p of batch) {
        if (tx.checks.length + CHECKS_PER_PORT + COUNT_CHECK > COMMIT_LIMITS.checks) {
          unsettled.push(p);
          continue;
        }
        checkCluster(tx, p, clusters);
        try {
          done.push([
            p,
            await buildPut(ctx, {
              tx,
              edit,
              charges,
              net: ref.net,
              owner: p.owner,
              id: p.id,
              body: p.body,
              fresh: false,
              readFirst: false,
            }),
          ]);
        } catch (err) {
          if (err instanceof Restart) unsettled.push(p);
          else p.reject(err);
        }
      }
      edit.flush();
      charges.flush();
      if (done.length > 0 && await tx.commit(ctx.store)) {
        for (const [p, r] of done) p.resolve(r);
        // Those the cache found no room for still need an answer, from the careful path.
        for (const p of unsettled) p.resolve(null);
        return;
      }
      tx.abort();
      if (done.length > 0 && !(await anyExists(ctx, ref.net, done.map(([p]) => p)))) {
        ctx.metrics.conflicts.inc();
      }
      unsettled.push(...done.map(([p]) => p));
    } catch (err) {
      tx.abort();
      for (const p of batch) p.reject(err);
      return;
    }
    for (const p of unsettled) p.resolve(null);
  });
}

/** The cluster record the port depends on, checked once per commit. */
function checkCluster(tx: Tx, { guard }: Pending, seen: Set<string>): void {
  const key = JSON.stringify(guard.key);
  if (seen.has(key)) return;
  seen.add(key);
  tx.check(guard);
}

/** Whether a failed batch is explained by a port that already existed (a repeated PUT). */
async function anyExists(ctx: Ctx, net: NetworkRecord, batch: Pending[]): Promise<boolean> {
  const found = await ctx.store.getMany(
    batch.map((p) => keys.port(net.id, keyId(net.tenant, p.owner, p.id))),
  );
  return found.some((e) => e.value !== null);
}
