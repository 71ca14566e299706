/**
 * One tenant creates a /8 network with many large excludes (/9 down to /16) while another tenant
 * creates small networks: how long the big create takes, and how long the other tenant's creates
 * wait meanwhile.
 *
 *   deno run -A manager/bench/excludes_bench.ts [--excludes N]
 */
import { createContext } from "../server.ts";
import { openKvStore } from "../store/kv_store.ts";
import { createNetwork } from "../service/networks.ts";
import { createTenant } from "../service/tenants.ts";
import { percentile } from "./support.ts";

/**
 * `n` excludes inside 10.0.0.0/8, as a hostile tenant would send them: /9 down to /16, overlapping
 * (each starts at 10.0.0.0), so the upper half of the /8 stays usable.
 */
export function largeExcludes(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `10.0.0.0/${9 + (i % 8)}`);
}

export interface ExcludeFigures {
  excludes: number;
  /** The big create, from call to answer; or its refusal. */
  createMs: number;
  status: string;
  /** Another tenant's small creates issued while the big one ran. */
  otherCount: number;
  otherP50Ms: number;
  otherMaxMs: number;
}

export async function excludeFigures(n: number): Promise<ExcludeFigures> {
  const store = await openKvStore(":memory:");
  const ctx = createContext(store, { vniRanges: ["5000-16777215"], underlayMtu: 1500 });
  try {
    await createTenant(ctx, { name: "big" });
    await createTenant(ctx, { name: "other" });
    const excludes = largeExcludes(n);
    // Warm up (the WASM bitmap, the code paths) outside the figures.
    await createNetwork(ctx, {
      principal: { scope: "tenant", tenant: "other" },
      tenant: "other",
      body: {
        name: "warm",
        type: "vxlan",
        cidr: "172.31.0.0/24",
        public: false,
      },
    });
    let done = false;
    const start = performance.now();
    const big = createNetwork(ctx, {
      principal: { scope: "tenant", tenant: "big" },
      tenant: "big",
      body: {
        name: "wide",
        type: "vxlan",
        cidr: "10.0.0.0/8",
        public: false,
        excludes,
      },
    }).then(() => "created", (err) => `refused: ${(err as Error).message.slice(0, 80)}`)
      .finally(() => done = true);
    const waits: number[] = [];
    let i = 0;
    // The other tenant creates a network every 20 ms until the big create answers (at least one).
    do {
      const t0 = performance.now();
      await createNetwork(ctx, {
        principal: { scope: "tenant", tenant: "other" },
        tenant: "other",
        body: {
          name: `n${i}`,
          type: "vxlan",
          cidr: `172.${16 + (i >> 8)}.${i & 255}.0/24`,
          public: false,
        },
      });
      waits.push(performance.now() - t0);
      i++;
      if (!done) await new Promise((r) => setTimeout(r, 20));
    } while (!done && i < 4000);
    const status = await big;
    const createMs = performance.now() - start;
    waits.sort((a, b) => a - b);
    return {
      excludes: excludes.length,
      createMs,
      status,
      otherCount: waits.length,
      otherP50Ms: percentile(waits, 50),
      otherMaxMs: waits.at(-1)!,
    };
  } finally {
    ctx.feed.close();
    store.close();
  }
}

if (import.meta.main) {
  const at = Deno.args.indexOf("--excludes");
  const n = at >= 0 ? Number(Deno.args[at + 1]) : 64;
  const r = await excludeFigures(n);
  const f = (x: number) => x.toLocaleString("en-US", { maximumFractionDigits: 1 });
  console.log(
    `/8 network with ${r.excludes} excludes (/9../16): ${r.status} in ${f(r.createMs)} ms; ` +
      `another tenant's ${r.otherCount} creates meanwhile: p50 ${f(r.otherP50Ms)} ms, max ${
        f(r.otherMaxMs)
      } ms`,
  );
}
