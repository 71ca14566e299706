/**
 * The one wiring of a watch and its reconcile queue, for every kind the monitor follows: the
 * informer (informer.ts) keeps the objects and tells of their changes, the queue (work_queue.ts)
 * runs the kind's reconcile once per key however often it changed. By default every change of an
 * object queues its "namespace/name"; a kind that queues otherwise (per namespace, a pod's
 * tracker) gives its own handlers. A custom resource's reconcile is cr_reconciler.ts's.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "@knitter/common";
import { type Handlers, Informer, type Lister, type WatchSettings } from "./informer.ts";
import { type CrKind, CrReconciler, type KindContext } from "./cr_reconciler.ts";
import { GROUP, VERSION } from "./crd_types.ts";
import type { Kube } from "./kube.ts";
import type { Tenants } from "./namespaces.ts";
import type { Resource } from "./resources.ts";
import { WorkQueue } from "./work_queue.ts";

/** What every watch and queue of one monitor shares. */
export interface Wiring {
  kc: KubeConfig;
  watch: WatchSettings;
  /** Reconciles at a time, per queue. */
  workers: number;
  log: Logger;
}

export type Meta = { metadata?: { name?: string; namespace?: string } };

/** One kind to follow: where it is watched, and what is done with a key. */
export interface Follow<T extends Meta> {
  /** The watch's name (metrics' `resource`, probes); the queue's too unless `queue` names it. */
  name: string;
  queue?: string;
  /** The API path of the kind's watch. */
  path: string;
  lister: Lister<T>;
  reconcile(key: string): Promise<void>;
  /** Handlers of their own, given the queue; absent: every change queues "namespace/name". */
  handlers?(queue: WorkQueue): Handlers<T>;
}

export interface Followed<T extends Meta> {
  informer: Informer<T>;
  queue: WorkQueue;
}

/** A custom resource followed: also queued again, every one, by the periodic resync. */
export interface FollowedResource<R extends Meta> extends Followed<R> {
  resync(): void;
}

/** A queue with no watch of its own (a deleted pod's release). */
export function workQueue(w: Wiring, name: string, fn: (key: string) => Promise<void>): WorkQueue {
  return new WorkQueue(name, fn, w.workers, w.log);
}

/** The watch of a kind with its queue. */
export function follow<T extends Meta>(w: Wiring, f: Follow<T>): Followed<T> {
  const queue = workQueue(w, f.queue ?? f.name, (key) => f.reconcile(key));
  const handlers = f.handlers?.(queue) ?? queueEveryChange<T>(queue);
  const informer = new Informer<T>(f.name, w.kc, f.path, f.lister, handlers, w.watch, w.log);
  return { informer, queue };
}

/** A custom resource kind (ours, knitter.io, unless it names its api), reconciled by cr_reconciler.ts. */
export function followCustomResource<R extends Resource & Meta, M>(
  w: Wiring,
  ctx: KindContext & { kube: Kube; tenants: Tenants; retryMs: number },
  kind: CrKind<R, M>,
): FollowedResource<R> {
  const reconciler = new CrReconciler(kind, ctx, ctx.tenants, ctx.retryMs);
  const followed: Followed<R> = follow<R>(w, {
    name: kind.plural,
    path: `/apis/${kind.api?.group ?? GROUP}/${kind.api?.version ?? VERSION}/${kind.plural}`,
    lister: {
      list: () => ctx.kube.listCustom<R>(kind.plural, kind.api),
      count: () => ctx.kube.countCustom(kind.plural, kind.api),
    },
    reconcile: (key) => {
      const [namespace, name] = splitKey(key);
      return reconciler.reconcile(followed.informer.get(name, namespace));
    },
  });
  const resync = () => {
    for (const o of followed.informer.list()) followed.queue.add(objectKey(o));
  };
  return { ...followed, resync };
}

/** "namespace/name" → [namespace, name]. */
export function splitKey(key: string): [string, string] {
  return key.split("/") as [string, string];
}

function objectKey(o: Meta): string {
  return `${o.metadata?.namespace}/${o.metadata?.name}`;
}

function queueEveryChange<T extends Meta>(queue: WorkQueue): Handlers<T> {
  const add = (o: T) => queue.add(objectKey(o));
  return { add, update: add, delete: add };
}
