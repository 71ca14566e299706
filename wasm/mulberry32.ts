/**
 * Tiny seeded PRNG (mulberry32) for the property tests and benchmarks: the same seed gives the
 * same sequence, so a failure reproduces from its printed seed.
 *
 * @module
 */

/** Returns a generator of floats in [0, 1) seeded by the 32 bits of `seed`. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
