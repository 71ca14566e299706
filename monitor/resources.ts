/**
 * What the Network and IPGroup reconcilers share: our finalizer on the resource while the manager
 * holds something for it, the status written only when it changes, manager refusals turned into a
 * Ready condition a user reads with `kubectl get` / `describe`.
 */
import { ManagerError } from "@knitter/common";
import { sameJson } from "./conditions.ts";
import { FINALIZER, type ObjectMeta } from "./crd_types.ts";
import type { Kube } from "./kube.ts";

export interface Resource {
  metadata: ObjectMeta;
  status?: unknown;
}

/** A refusal the user can act on: the condition's reason and message. */
export interface Problem {
  reason: string;
  message: string;
}

export async function ensureFinalizer(kube: Kube, plural: string, r: Resource): Promise<void> {
  const list = r.metadata.finalizers ?? [];
  if (list.includes(FINALIZER)) return;
  await kube.patchCustom(plural, r.metadata.namespace, r.metadata.name, {
    metadata: { finalizers: [...list, FINALIZER], resourceVersion: r.metadata.resourceVersion },
  });
}

export async function dropFinalizer(kube: Kube, plural: string, r: Resource): Promise<void> {
  const list = r.metadata.finalizers ?? [];
  if (!list.includes(FINALIZER)) return;
  await kube.patchCustom(plural, r.metadata.namespace, r.metadata.name, {
    metadata: {
      finalizers: list.filter((f) => f !== FINALIZER),
      resourceVersion: r.metadata.resourceVersion,
    },
  });
}

export async function writeStatus(
  kube: Kube,
  plural: string,
  r: Resource,
  status: unknown,
): Promise<boolean> {
  if (sameJson(status, r.status)) return false;
  await kube.patchCustomStatus(plural, r.metadata.namespace, r.metadata.name, status);
  return true;
}

/** A manager refusal as a Problem; anything else (the manager is down) is thrown on. */
export function problemOf(err: unknown): Problem {
  if (err instanceof ManagerError) return { reason: reasonOf(err.code), message: err.message };
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
