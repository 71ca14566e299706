/**
 * In-process allocation rate against the raw Deno KV commit rate on the same kind of file, in the
 * same run: the yardstick is `atomic().check().set().commit()` of one small value. The machine is
 * shared and noisy, so the two alternate over several rounds and the medians are compared.
 */
import { putPort } from "../service/ports/mod.ts";
import { benchContext, withTempDir } from "./support.ts";

export interface IpamFigures {
  rawSequential: number;
  allocSequential: number;
  rawConcurrent: number;
  allocConcurrent: number;
  rounds: number;
}

/** Runs `n` operations from `callers` concurrent loops; returns operations per second. */
export async function rate(
  n: number,
  callers: number,
  op: (i: number) => Promise<void>,
): Promise<number> {
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: callers }, async () => {
    while (next < n) await op(next++);
  }));
  return n / ((performance.now() - start) / 1000);
}

export async function rawRound(
  dir: string,
  round: number,
  n: number,
  callers: number,
): Promise<number> {
  const kv = await Deno.openKv(`${dir}/raw-${round}-${callers}.kv`);
  try {
    return await rate(n, callers, async (i) => {
      const r = await kv.atomic().check({ key: ["k", i], versionstamp: null }).set(["k", i], { i })
        .commit();
      if (!r.ok) throw new Error("raw commit failed");
    });
  } finally {
    kv.close();
  }
}

async function allocRound(dir: string, round: number, n: number, callers: number): Promise<number> {
  const ctx = await benchContext(`${dir}/alloc-${round}-${callers}.kv`);
  try {
    return await rate(n, callers, async (i) => {
      await putPort(ctx, {
        principal: { scope: "admin" },
        tenant: "bench",
        network: "big",
        id: `port-${i}`,
        body: { node: "n1" },
      });
    });
  } finally {
    ctx.store.close();
  }
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function ipamFigures(
  n: number,
  rounds: number,
  callers: number,
): Promise<IpamFigures> {
  return await withTempDir(async (dir) => {
    const rs: number[] = [], as: number[] = [], rc: number[] = [], ac: number[] = [];
    for (let round = 0; round < rounds; round++) {
      rs.push(await rawRound(dir, round, n, 1));
      as.push(await allocRound(dir, round, n, 1));
      rc.push(await rawRound(dir, round, n, callers));
      ac.push(await allocRound(dir, round, n, callers));
    }
    return {
      rawSequential: median(rs),
      allocSequential: median(as),
      rawConcurrent: median(rc),
      allocConcurrent: median(ac),
      rounds,
    };
  });
}
