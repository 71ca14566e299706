/**
 * The steps cr_reconciler.ts takes for every custom resource: our finalizer on the resource while
 * the manager holds something for it, the status written only when it changes, refusals turned into
 * a Ready condition a user reads with `kubectl get` / `describe`; and the manager's paths.
 */
import { type ManagerClient, ManagerError } from "@knitter/common";
import { sameJson } from "./conditions.ts";
import { FINALIZER, type ObjectMeta } from "./crd_types.ts";
import type { CustomApi, Kube } from "./kube.ts";

export interface Resource {
  metadata: ObjectMeta;
  status?: unknown;
}

/** A refusal the user can act on: the condition's reason and message. */
export interface Problem {
  reason: string;
  message: string;
}

/** A custom resource's kind as the API names it: its plural, and its group if not ours. */
export interface KindPath {
  plural: string;
  api?: CustomApi;
}

export async function ensureFinalizer(kube: Kube, kind: KindPath, r: Resource): Promise<void> {
  const list = r.metadata.finalizers ?? [];
  if (list.includes(FINALIZER)) return;
  await kube.patchCustom(kind.plural, r.metadata.namespace, r.metadata.name, {
    metadata: { finalizers: [...list, FINALIZER], resourceVersion: r.metadata.resourceVersion },
  }, kind.api);
}

export async function dropFinalizer(kube: Kube, kind: KindPath, r: Resource): Promise<void> {
  const list = r.metadata.finalizers ?? [];
  if (!list.includes(FINALIZER)) return;
  await kube.patchCustom(kind.plural, r.metadata.namespace, r.metadata.name, {
    metadata: {
      finalizers: list.filter((f) => f !== FINALIZER),
      resourceVersion: r.metadata.resourceVersion,
    },
  }, kind.api);
}

export async function writeStatus(
  kube: Kube,
  kind: KindPath,
  r: Resource,
  status: unknown,
): Promise<boolean> {
  if (sameJson(status, r.status)) return false;
  await kube.patchCustomStatus(
    kind.plural,
    r.metadata.namespace,
    r.metadata.name,
    status,
    kind.api,
  );
  return true;
}

/** What the monitor itself refuses to apply (an admin's choice, a record not the resource's). */
export class Refusal extends Error {
  constructor(readonly reason: string, message: string) {
    super(message);
  }
}

/** A refusal (the manager's or the monitor's) as a Problem; anything else is thrown on. */
export function problemOf(err: unknown): Problem {
  if (err instanceof ManagerError) return { reason: reasonOf(err.code), message: err.message };
  if (err instanceof Refusal) return { reason: err.reason, message: err.message };
  throw err;
}

/** "pool_exhausted" → "PoolExhausted", as condition reasons are written. */
export function reasonOf(code: string): string {
  return code.split("_").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");
}

export function isGone(err: unknown): boolean {
  return err instanceof ManagerError && err.status === 404;
}

export function keyOf(r: Resource): string {
  return `${r.metadata.namespace}/${r.metadata.name}`;
}

/** The manager's record at `path`, or undefined when there is none (404). */
export async function managerRecord<T>(
  manager: ManagerClient,
  path: string,
): Promise<T | undefined> {
  try {
    return await manager.request<T>("GET", path);
  } catch (err) {
    if (isGone(err)) return undefined;
    throw err;
  }
}

/** The manager's path of a tenant's `kind` (ipgroups, routers), or of one of them by name. */
export function tenantPath(kind: string, namespace: string, name?: string): string {
  const base = `/api/v1/tenants/${encodeURIComponent(namespace)}/${kind}`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}
