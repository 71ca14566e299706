/**
 * Clusters: the Kubernetes clusters whose agents and monitors use this manager, and what each may
 * use (tenants, other tenants' networks, physnets). Node and monitor tokens name their cluster
 * (auth.ts); names of nodes, ports and pods are scoped by it (cluster_names.ts).
 *
 * The default cluster holds what has no cluster: every node and port of a single-cluster install.
 * It lets every tenant and physnet in until an admin narrows it, and it cannot be deleted.
 */
import type { z } from "zod";
import type { ClusterReach } from "../auth.ts";
import { ApiError, invalid, notFound } from "../errors.ts";
import { type ClusterRecord, keys, type NodeRecord, type PortRecord } from "../model.ts";
import type { ClusterCreate, ClusterUpdate } from "../schemas.ts";
import { COMMIT_LIMITS, type Entry } from "../store/store.ts";
import { encodeValue } from "../store/value_codec.ts";
import type { Tx } from "../store/tx.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { DEFAULT_CLUSTER, unscoped } from "./cluster_names.ts";
import { checkClusterNodeReach, networkChecks } from "./node_reach.ts";
import { dropNodeReport } from "./conflict_records.ts";

export interface ClusterView extends ClusterRecord {
  /** Its registered nodes, by their bare names. */
  nodes: string[];
}

/** The default cluster as a store written before clusters existed implies it. */
function defaultCluster(at: string): ClusterRecord {
  return {
    name: DEFAULT_CLUSTER,
    description: "nodes and ports that name no cluster",
    tenants: ["*"],
    networks: [],
    physnets: ["*"],
    createdAt: at,
    updatedAt: at,
  };
}

/**
 * Writes the default cluster's record unless it exists (at start, before the API is served), so
 * that an install from before clusters has it to show and to narrow without a manual step. Its
 * nodes and ports need no change: default names are bare (cluster_names.ts).
 */
export async function ensureDefaultCluster(ctx: Ctx): Promise<boolean> {
  return await retry(ctx, async (tx) => {
    const e = await ctx.store.get<ClusterRecord>(keys.cluster(DEFAULT_CLUSTER));
    if (e.value) return false;
    tx.check(e).set(e.key, defaultCluster(now()));
    return true;
  });
}

/** A cluster's record; the default one is implied when it was never written. */
async function findCluster(ctx: Ctx, name: string): Promise<ClusterRecord | null> {
  const found = (await ctx.store.get<ClusterRecord>(keys.cluster(name))).value;
  if (found || name !== DEFAULT_CLUSTER) return found;
  return defaultCluster(new Date(0).toISOString());
}

/** What a node or monitor token of `name` may reach: 403 when its cluster is not registered. */
export async function reachOf(ctx: Ctx, name: string): Promise<ClusterReach> {
  const c = await findCluster(ctx, name);
  if (c) return c;
  throw new ApiError(
    "forbidden",
    `Cluster "${name}" is not registered at the manager, so its tokens reach nothing: an admin creates it (POST /api/v1/clusters) or the token names another cluster`,
  );
}

/**
 * The cluster record a new port of `scopedId` depends on, for its commit to check: a port never
 * goes in after its cluster's delete (which checks that the cluster has none). null in the
 * default cluster, which is never deleted. 404 when the cluster is not registered.
 */
export async function clusterGuard(ctx: Ctx, scopedId: string): Promise<Entry<unknown> | null> {
  const { cluster } = unscoped(scopedId);
  if (cluster === DEFAULT_CLUSTER) return null;
  const e = await ctx.store.get<ClusterRecord>(keys.cluster(cluster));
  if (e.value?.deletingSince) {
    throw new ApiError(
      "conflict",
      `Cluster "${cluster}" is being deleted (since ${e.value.deletingSince}): it takes no new ports`,
    );
  }
  if (e.value) return e;
  throw notFound(
    `Cluster "${cluster}" (of "${scopedId}") does not exist: register it first (POST /api/v1/clusters)`,
  );
}

/**
 * The record of the cluster a new port goes into (its ID's suffix), for its placement and for its
 * commit to check: a port never goes in after its cluster changed or began its delete (which
 * checks that the cluster has none). Remembered between requests (ctx.cache.clusters), so that a
 * port's PUT does not read it each time: the commit's check turns a stale one into a retry, which
 * reads it `fresh`, and a refusal (being deleted, not registered) is decided on a fresh read only.
 * The default cluster's entry may be absent (implied, see {@link reachIn}).
 */
export async function portCluster(
  ctx: Ctx,
  scopedId: string,
  fresh = false,
): Promise<Entry<ClusterRecord>> {
  const { cluster } = unscoped(scopedId);
  const known = fresh ? undefined : ctx.cache.clusters.get(cluster) as Entry<ClusterRecord>;
  if (known && refusal(cluster, known) === null) return known;
  const e = await ctx.store.get<ClusterRecord>(keys.cluster(cluster));
  ctx.cache.clusters.set(cluster, e);
  const why = refusal(cluster, e);
  if (why === "deleting") {
    throw new ApiError(
      "conflict",
      `Cluster "${cluster}" is being deleted (since ${
        e.value!.deletingSince
      }): it takes no new ports`,
    );
  }
  if (why === "absent") {
    throw notFound(
      `Cluster "${cluster}" (of "${scopedId}") does not exist: register it first (POST /api/v1/clusters)`,
    );
  }
  return e;
}

/** Why a cluster's record takes no new port; null when it does. */
function refusal(cluster: string, e: Entry<ClusterRecord>): "deleting" | "absent" | null {
  if (e.value?.deletingSince) return "deleting";
  return e.value || cluster === DEFAULT_CLUSTER ? null : "absent";
}

/** What a cluster's record (as portCluster read it) lets in; the default one is implied. */
export function reachIn(e: Entry<ClusterRecord>): ClusterReach | null {
  if (e.value) return e.value;
  return e.key.at(-1) === DEFAULT_CLUSTER ? IMPLIED_DEFAULT : null;
}

/** The default cluster as implied before it is written: made once, read on every allocation. */
const IMPLIED_DEFAULT: ClusterReach = Object.freeze(defaultCluster(new Date(0).toISOString()));

export async function listClusters(ctx: Ctx): Promise<ClusterRecord[]> {
  const all = await listValues<ClusterRecord>(ctx.store, keys.clusters());
  if (!all.some((c) => c.name === DEFAULT_CLUSTER)) {
    all.unshift((await findCluster(ctx, DEFAULT_CLUSTER))!);
  }
  return all;
}

export async function getCluster(ctx: Ctx, name: string): Promise<ClusterView> {
  const c = await findCluster(ctx, name);
  if (!c) throw notFound(`Cluster "${name}" does not exist`);
  const nodes = (await nodesOf(ctx, name)).map((n) => unscoped(n.name).name);
  return { ...c, nodes };
}

export async function createCluster(
  ctx: Ctx,
  body: z.infer<typeof ClusterCreate>,
): Promise<ClusterRecord> {
  const t = now();
  const record: ClusterRecord = {
    name: body.name,
    tenants: body.tenants ?? [],
    networks: body.networks ?? [],
    physnets: body.physnets ?? [],
    createdAt: t,
    updatedAt: t,
  };
  if (body.description !== undefined) record.description = body.description;
  checkRecordSize(record);
  return await networkChecks(ctx).run(async () => {
    await checkClusterNodeReach(ctx, record);
    return await retry(ctx, async (tx) => {
      const e = await ctx.store.get(keys.cluster(body.name));
      if (e.value || body.name === DEFAULT_CLUSTER) {
        throw new ApiError("already_exists", `Cluster "${body.name}" already exists`, "name");
      }
      tx.check(e).set(e.key, record);
      return record;
    });
  });
}

/**
 * What a cluster's record may take, stored: a value's 64 KiB less room for the encoding's own
 * overhead. The schema's lists (1,000 tenants, 1,000 networks, 256 physnets of the longest names)
 * can take over 200 KB together; many short names, or `*`, fit.
 */
const CLUSTER_RECORD_BYTES = COMMIT_LIMITS.valueBytes - 1024;

/** A 400 naming the lists when the cluster's record would not fit one stored value. */
function checkRecordSize(record: ClusterRecord): void {
  const bytes = encodeValue(record).length;
  if (bytes <= CLUSTER_RECORD_BYTES) return;
  throw invalid(
    "tenants",
    `Cluster "${record.name}": its tenants, networks and physnets take ${bytes} bytes stored, at most ${CLUSTER_RECORD_BYTES} fit one record; name fewer of them, or "*" for all tenants or physnets`,
  );
}

/** Changes what a cluster may use; its tokens see the change on their next request. */
export async function updateCluster(
  ctx: Ctx,
  name: string,
  body: z.infer<typeof ClusterUpdate>,
): Promise<ClusterRecord> {
  // What the cluster's nodes would run together is checked against every network's egress and
  // hostAccess, one at a time with the network changes that set them.
  return await networkChecks(ctx).run(() =>
    retry(ctx, async (tx) => {
      const e = await ctx.store.get<ClusterRecord>(keys.cluster(name));
      const current = e.value ?? await findCluster(ctx, name);
      if (!current) throw notFound(`Cluster "${name}" does not exist`);
      const record: ClusterRecord = { ...current, ...body, updatedAt: now() };
      checkRecordSize(record);
      await checkClusterNodeReach(ctx, record);
      tx.check(e).set(e.key, record);
      return record;
    })
  );
}

/**
 * Deletes a cluster that holds no port, with its nodes and their conflict reports, in commits of
 * a bounded size.
 * 409 while a port of it exists: its pods' ports go first (their monitor releases them).
 */
export async function deleteCluster(ctx: Ctx, name: string): Promise<void> {
  if (name === DEFAULT_CLUSTER) {
    throw new ApiError(
      "conflict",
      `Cluster "${DEFAULT_CLUSTER}" holds every node and port that names no cluster; it cannot be deleted`,
    );
  }
  if (!(await ctx.store.get(keys.cluster(name))).value) {
    throw notFound(`Cluster "${name}" does not exist`);
  }
  try {
    await refuseWhilePorts(ctx, name);
  } catch (err) {
    // A mark of a delete that never finished (its process died) would refuse the cluster's new
    // ports for ever: a refused delete clears it.
    await markDeleting(ctx, name, undefined).catch(() => {});
    throw err;
  }
  // Then marked, and looked at again: a port PUT checks the record it read, so none goes in once
  // the second scan begins. The mark goes again whatever ends this delete but its commit.
  const mark = now();
  await markDeleting(ctx, name, mark);
  let deleted = false;
  try {
    await refuseWhilePorts(ctx, name);
    // Its nodes go a bounded number per commit (two checks each), the last ones with the record:
    // the mark lets no node in meanwhile, and an interrupted delete leaves a cluster with fewer.
    for (;;) {
      const step = await retry(ctx, async (tx) => {
        const e = await ctx.store.get<ClusterRecord>(keys.cluster(name));
        if (!e.value) throw notFound(`Cluster "${name}" does not exist`);
        if (e.value.deletingSince !== mark) {
          // Another delete, refused, cleared the mark: a port may have gone in since the scan.
          throw new ApiError(
            "conflict",
            `Cluster "${name}" was changed while it was being deleted; try again`,
          );
        }
        const all = await nodesOf(ctx, name);
        const nodes = all.slice(0, NODES_PER_COMMIT);
        const last = all.length <= NODES_PER_COMMIT;
        tx.check(e);
        if (last) tx.delete(e.key);
        await dropNodes(ctx, tx, nodes);
        return { nodes, last };
      });
      for (const node of step.nodes) {
        await dropNodeReport(ctx.store, node.name);
        ctx.feed.publish({ type: "node", op: "delete", node });
      }
      if (step.last) break;
    }
    deleted = true;
  } finally {
    if (!deleted) await markDeleting(ctx, name, undefined, mark).catch(() => {});
  }
}

/** Nodes one commit of a cluster's delete takes along: a check for each and for its conflicts. */
const NODES_PER_COMMIT = 40;

/** Deletes the nodes and their conflict reports in `tx`, each checked as read. */
async function dropNodes(ctx: Ctx, tx: Tx, nodes: NodeRecord[]): Promise<void> {
  const entries = await ctx.store.getMany<unknown>(
    nodes.flatMap((n) => [keys.node(n.name), keys.conflicts(n.name)]),
  );
  let conflicts = false;
  for (const entry of entries) {
    if (entry.value === null) continue;
    tx.check(entry).delete(entry.key);
    conflicts ||= entry.key[0] === keys.allConflicts()[0];
  }
  if (conflicts) tx.set(keys.conflictsChanged(), now());
}

/** Sets or clears a cluster's deletingSince (clears only the mark `ours`, when given). */
async function markDeleting(
  ctx: Ctx,
  name: string,
  since: string | undefined,
  ours?: string,
): Promise<void> {
  await retry(ctx, async (tx) => {
    const e = await ctx.store.get<ClusterRecord>(keys.cluster(name));
    if (!e.value) throw notFound(`Cluster "${name}" does not exist`);
    if (e.value.deletingSince === since) return;
    if (ours !== undefined && e.value.deletingSince !== ours) return;
    const { deletingSince: _, ...rest } = e.value;
    tx.check(e).set(e.key, since === undefined ? rest : { ...rest, deletingSince: since });
  });
}

async function portsOf(ctx: Ctx, name: string): Promise<PortRecord[]> {
  const found: PortRecord[] = [];
  for await (const e of ctx.store.list<PortRecord>(keys.ports())) {
    if (e.value?.cluster === name) found.push(e.value);
  }
  return found;
}

async function refuseWhilePorts(ctx: Ctx, name: string): Promise<void> {
  const held = (await portsOf(ctx, name)).map((p) => `${p.networkTenant}/${p.network}/${p.id}`);
  if (held.length === 0) return;
  throw new ApiError(
    "in_use",
    `Cluster "${name}" still has ${held.length} port(s) (${held.slice(0, 3).join(", ")}${
      held.length > 3 ? ", ..." : ""
    }): delete its pods (its monitor releases their ports) or release the ports, then delete the cluster`,
  );
}

/** The registered nodes of a cluster. */
async function nodesOf(ctx: Ctx, name: string): Promise<NodeRecord[]> {
  const all = await listValues<NodeRecord>(ctx.store, keys.nodes());
  return all.filter((n) => (n.cluster ?? DEFAULT_CLUSTER) === name);
}
