/**
 * The one reconciler of Knitter's custom resources (Network, IPGroup, Router, Mirror, and the
 * community's IPAMClaim). A kind plugs in what
 * is its own (how the manager's record of a resource is found, made, changed and released, and the
 * status that shows it); the rest is done here, once for every kind:
 *
 * - our finalizer on the resource before the manager holds anything for it;
 * - the tenant (the namespace) ensured before the record is made;
 * - a manager refusal (a quota, an overlap, a field that cannot change) becomes the Ready condition,
 *   and the resource is tried again after `retryMs`; the manager away is thrown on (the queue's
 *   backoff);
 * - the status: the kind's fields, `observedGeneration` and the Ready condition, written only when
 *   it says something new;
 * - a resource being deleted: its record released at the manager (already gone is fine), then the
 *   finalizer dropped; a refused release goes into the status and is tried again.
 *
 * A new custom resource is one small module with its CrKind, followed in monitor.ts through
 * watch_queue.ts's followCustomResource.
 */
import type { Logger, ManagerClient } from "@knitter/common";
import { readyCondition } from "./conditions.ts";
import type { Condition } from "./crd_types.ts";
import type { CustomApi, Kube } from "./kube.ts";
import type { Tenants } from "./namespaces.ts";
import {
  dropFinalizer,
  ensureFinalizer,
  isGone,
  keyOf,
  managerRecord,
  type Problem,
  problemOf,
  type Resource,
  tenantPath,
  writeStatus,
} from "./resources.ts";
import { Requeue } from "./work_queue.ts";

/** What a kind's functions may use. */
export interface KindContext {
  kube: Kube;
  manager: ManagerClient;
  log: Logger;
}

/** A record as the kind's update left it, with what the spec asks that could not be applied. */
export interface Updated<M> {
  record: M;
  problem?: Problem;
}

/** One kind of custom resource: what differs from the others. */
export interface CrKind<R extends Resource, M> {
  /** The API's plural (networks, ipgroups, routers): its watch, queue and patches. */
  plural: string;
  /** Its API group and version, when it is not one of ours (knitter.io): IPAMClaim's. */
  api?: CustomApi;
  /**
   * Whether its status has `observedGeneration` (ours do; a kind of another group whose schema has
   * none: false, or the API server would prune it and every status would look new).
   */
  observedGeneration?: false;
  /** "network", "IP group", "router": for the log. */
  what: string;
  /** Throws a Refusal for what this monitor refuses before anything is made (an admin's choice). */
  refuse?(cr: R): void;
  /** The manager's record of the resource, if any; a record not the resource's: a Refusal. */
  find(cr: R, ctx: KindContext): Promise<M | undefined>;
  create(cr: R, ctx: KindContext): Promise<M>;
  /** Applies what may change; a problem names what the spec asks that may not. */
  update(cr: R, have: M, ctx: KindContext): Promise<Updated<M>>;
  /**
   * Deletes what the resource stands for at the manager (a 404 may be thrown: gone is fine).
   * Answers false when nothing of the resource's was there to delete.
   */
  release(cr: R, ctx: KindContext): Promise<boolean>;
  /**
   * The status fields that show the record as the manager has it; undefined: none now (a refusal,
   * a release), so what the last status said of it is kept.
   */
  fields(cr: R, record: M | undefined): Record<string, unknown>;
  /** The Ready condition's message when everything the spec asks is applied. */
  ready(record: M): string;
  /** A release the manager refused, as the status says it (what it means meanwhile). */
  refusedRelease?(problem: Problem): Problem;
}

/**
 * `find` and `release` of a kind whose record is the tenant's of the resource's name in the
 * manager's `collection` (ipgroups, routers): found by GET (404: none), released by DELETE.
 */
export function tenantRecord<R extends Resource, M>(
  collection: string,
): Pick<CrKind<R, M>, "find" | "release"> {
  const path = (cr: R) => tenantPath(collection, cr.metadata.namespace, cr.metadata.name);
  return {
    find: (cr, { manager }) => managerRecord<M>(manager, path(cr)),
    async release(cr, { manager }) {
      await manager.request("DELETE", path(cr));
      return true;
    },
  };
}

export class CrReconciler<R extends Resource, M> {
  constructor(
    private readonly kind: CrKind<R, M>,
    private readonly ctx: KindContext,
    private readonly tenants: Tenants,
    private readonly retryMs: number,
  ) {}

  /** Brings the manager in line with the resource (undefined: deleted and gone: nothing to do). */
  async reconcile(cr: R | undefined): Promise<void> {
    if (!cr) return;
    if (cr.metadata.deletionTimestamp) return await this.finalize(cr);
    const { kind, ctx } = this;
    await ensureFinalizer(ctx.kube, kind, cr);
    let record: M | undefined;
    let problem: Problem | undefined;
    try {
      kind.refuse?.(cr);
      await this.tenants.ensure(cr.metadata.namespace);
      record = await kind.find(cr, ctx);
      if (record === undefined) record = await kind.create(cr, ctx);
      else ({ record, problem } = await kind.update(cr, record, ctx));
    } catch (err) {
      problem = problemOf(err);
    }
    await writeStatus(ctx.kube, kind, cr, this.status(cr, record, problem));
    if (problem) throw new Requeue(this.retryMs, problem.message);
  }

  /** The kind's fields, the generation seen, and the Ready condition: the problem, or all well. */
  private status(cr: R, record: M | undefined, problem: Problem | undefined): unknown {
    const generation = cr.metadata.generation;
    const before = (cr.status as { conditions?: Condition[] } | undefined)?.conditions;
    const observed = generation !== undefined && this.kind.observedGeneration !== false;
    return {
      ...this.kind.fields(cr, record),
      ...(observed ? { observedGeneration: generation } : {}),
      conditions: readyCondition(
        before,
        !problem,
        problem?.reason ?? "Reconciled",
        problem?.message ?? this.kind.ready(record!),
        generation,
      ),
    };
  }

  /** The resource is being deleted: its record goes at the manager, then our finalizer. */
  private async finalize(cr: R): Promise<void> {
    const { kind, ctx } = this;
    try {
      if (await kind.release(cr, ctx)) {
        ctx.log.info(`${kind.what} deleted`, { resource: keyOf(cr) });
      }
    } catch (err) {
      if (!isGone(err)) {
        const refused = problemOf(err);
        const problem = kind.refusedRelease?.(refused) ?? refused;
        await writeStatus(ctx.kube, kind, cr, this.status(cr, undefined, problem));
        throw new Requeue(this.retryMs, problem.message);
      }
    }
    await dropFinalizer(ctx.kube, kind, cr);
  }
}
