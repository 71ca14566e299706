/** The Ready condition of our resources: its transition time moves only when its status does. */
import type { Condition } from "./crd_types.ts";

export function readyCondition(
  previous: Condition[] | undefined,
  ok: boolean,
  reason: string,
  message: string,
  generation: number | undefined,
): Condition[] {
  const status = ok ? "True" : "False";
  const before = previous?.find((c) => c.type === "Ready");
  const lastTransitionTime = before?.status === status
    ? before.lastTransitionTime
    : new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const ready: Condition = { type: "Ready", status, reason, message, lastTransitionTime };
  if (generation !== undefined) ready.observedGeneration = generation;
  return [ready, ...(previous ?? []).filter((c) => c.type !== "Ready")];
}

/** Whether two statuses say the same thing (so that nothing is written for nothing). */
export function sameJson(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

/** JSON with keys sorted: the API server need not keep the order we wrote. */
function canonical(v: unknown): string {
  return JSON.stringify(
    v,
    (_k, x) =>
      x && typeof x === "object" && !Array.isArray(x)
        ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0))
        : x,
  );
}
