/**
 * Bandwidth limits of a pod interface, as the CNI `bandwidth` capability spells them
 * (`runtimeConfig.bandwidth`, read as the reference `bandwidth` plugin reads it): rates in bits per
 * second, bursts in bits. "Ingress" is traffic into the pod, "egress" traffic out of it. The same
 * shape is a network's default and a port's own limit at the manager; {@link effectiveBandwidth}
 * says which one holds, per direction.
 */

export interface Bandwidth {
  /** Traffic into the pod, bits per second. */
  ingressRate?: number;
  /** Bits that may go at once above the ingress rate; default {@link defaultBurst}. */
  ingressBurst?: number;
  /** Traffic out of the pod, bits per second. */
  egressRate?: number;
  egressBurst?: number;
}

/** The lowest rate accepted: 8 kbit/s. */
export const MIN_RATE = 8_000;
/** The highest rate accepted: 100 Gbit/s. */
export const MAX_RATE = 100_000_000_000;
/** The smallest burst: 2 KiB, above one full 1500-byte frame (a larger MTU needs more: the agent checks). */
export const MIN_BURST = 8 * 2048;
/** The largest burst: 512 MiB (tc takes it in bytes, a 32-bit number). */
export const MAX_BURST = 8 * 512 * 1024 * 1024;

const KEYS = ["ingressRate", "ingressBurst", "egressRate", "egressBurst"] as const;

/**
 * The burst a rate gets when none is given: 100 ms of traffic at the rate, at least 64 KiB (what
 * TCP needs to reach the rate with a token bucket; measured, agent/README.md).
 */
export function defaultBurst(rate: number): number {
  return Math.min(MAX_BURST, Math.max(8 * 64 * 1024, Math.ceil(rate / 10)));
}

/**
 * Checks limits given as JSON; returns them without zero or absent fields (the reference plugin
 * reads a zero rate as "no limit"), or throws a message naming `from` and the field. A burst needs
 * its rate. Undefined or null is no limit.
 */
export function parseBandwidth(v: unknown, from: string): Bandwidth | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) {
    throw new Error(
      `${from} must be an object with ingressRate, ingressBurst, egressRate, egressBurst`,
    );
  }
  const raw = v as Record<string, unknown>;
  const unknown = Object.keys(raw).filter((k) => !(KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) {
    throw new Error(
      `${from} has ${
        unknown.join(", ")
      }: the limits are ingressRate, egressRate (bits per second) and ingressBurst, egressBurst (bits)`,
    );
  }
  const out: Bandwidth = {};
  for (const k of KEYS) {
    const x = raw[k];
    if (x === undefined || x === null || x === 0) continue;
    const rate = k.endsWith("Rate");
    const [min, max] = rate ? [MIN_RATE, MAX_RATE] : [MIN_BURST, MAX_BURST];
    if (typeof x !== "number" || !Number.isSafeInteger(x) || x < min || x > max) {
      throw new Error(
        `${from}.${k} is ${JSON.stringify(x)}: it must be a whole number of ${
          rate ? "bits per second" : "bits"
        } from ${min} to ${max}${rate ? "" : ", or absent for the default (100 ms at the rate)"}`,
      );
    }
    out[k] = x;
  }
  for (const dir of ["ingress", "egress"] as const) {
    if (out[`${dir}Burst`] !== undefined && out[`${dir}Rate`] === undefined) {
      throw new Error(`${from}.${dir}Burst is given without ${dir}Rate: a burst needs a rate`);
    }
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** One direction's limit, its burst filled in, and where it came from. */
export interface RateLimit {
  rate: number;
  burst: number;
  from: string;
}

/** The limits that hold, per direction, with where each came from. */
export interface EffectiveBandwidth {
  ingress?: RateLimit;
  egress?: RateLimit;
}

/**
 * The limit of each direction from the first source, in the order given, that sets that
 * direction's rate (its burst comes with it): callers pass the port's own limit, then
 * runtimeConfig's, then the network's default.
 */
export function effectiveBandwidth(
  sources: { from: string; bandwidth?: Bandwidth }[],
): EffectiveBandwidth {
  const out: EffectiveBandwidth = {};
  for (const dir of ["ingress", "egress"] as const) {
    const s = sources.find((s) => s.bandwidth?.[`${dir}Rate`] !== undefined);
    if (!s) continue;
    const rate = s.bandwidth![`${dir}Rate`]!;
    out[dir] = { rate, burst: s.bandwidth![`${dir}Burst`] ?? defaultBurst(rate), from: s.from };
  }
  return out;
}

/** Whether any direction is limited. */
export function isLimited(b: EffectiveBandwidth | undefined): b is EffectiveBandwidth {
  return b?.ingress !== undefined || b?.egress !== undefined;
}
