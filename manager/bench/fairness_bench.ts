/**
 * Fairness between tenants (issue 33): another tenant's latency, idle and under each single
 * tenant's attack (fairness_attack.ts), all against one manager in its own process, in one run.
 * Goal: under any one attack, the other tenant's p99 stays within 3× its idle p99.
 *
 *   deno run --allow-all manager/bench/fairness_bench.ts [--quick] [--attack KIND]...
 */
import { ADMIN_TOKEN, percentile, spawnManager, waitReady, withTempDir } from "./support.ts";
import { type Attack, type AttackKind, ATTACKS } from "./fairness_attack.ts";

const ATTACKER_TOKEN = "bench-attacker-token-0123456789";
const VICTIM_TOKEN = "bench-victim-token-0123456789ab";
const LIST_PORTS = 1000;
/**
 * The victim's pace: a tenant going about its business, well within its own budget (a client
 * back to back would meet its own rate limit, 100 a second, and measure that instead).
 */
export const VICTIM_INTERVAL_MS = 20;

export interface Phase {
  attack: AttackKind | "idle";
  what: string;
  p50Ms: number;
  /** Steadier than the p99 on a shared machine, where a neighbour's burst lands on a few requests. */
  p90Ms: number;
  p99Ms: number;
  /** The victim's requests that did not succeed. */
  errors: number;
  /** The attacker's answers by status (or error name). */
  attacker: Record<string, number>;
}

export interface FairnessFigures {
  requests: number;
  phases: Phase[];
}

async function api(url: string, method: string, path: string, body?: unknown): Promise<number> {
  const r = await fetch(`${url}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  await r.body?.cancel();
  return r.status;
}

/** Two tenants with a network each; the attacker's holds the ports its lists read. */
export async function setUp(url: string): Promise<void> {
  for (const [tenant, cidr] of [["acme", "10.1.0.0/16"], ["globex", "10.2.0.0/16"]]) {
    await api(url, "POST", "tenants", { name: tenant });
    await api(url, "POST", `tenants/${tenant}/networks`, { name: "blue", cidr });
  }
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < LIST_PORTS) {
      const status = await api(url, "PUT", `tenants/acme/networks/blue/ports/p${next++}`, {});
      if (status !== 201) throw new Error(`setting up the bench: a port answered ${status}`);
    }
  }));
}

/**
 * The victim: one client, a read and an allocation in turn, one every VICTIM_INTERVAL_MS (or as
 * soon as the one before is answered); each request's milliseconds.
 */
async function victim(url: string, requests: number, phase: string) {
  const headers = { authorization: `Bearer ${VICTIM_TOKEN}`, "content-type": "application/json" };
  const latencies: number[] = [];
  let errors = 0;
  for (let i = 0; i < requests; i++) {
    const t = performance.now();
    const next = t + VICTIM_INTERVAL_MS;
    const r = i % 2
      ? await fetch(`${url}/api/v1/tenants/globex/networks/blue`, { headers })
      : await fetch(`${url}/api/v1/tenants/globex/networks/blue/ports/${phase}-${i}`, {
        method: "PUT",
        headers,
        body: "{}",
      });
    await r.arrayBuffer();
    latencies.push(performance.now() - t);
    if (!r.ok) errors++;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  return { latencies: latencies.sort((a, b) => a - b), errors };
}

/** Runs `attack` in a worker while the victim measures; the attacker's statuses. */
async function underAttack(
  url: string,
  attack: AttackKind,
  measure: () => Promise<void>,
): Promise<Record<string, number>> {
  const worker = new Worker(new URL("./fairness_attack.ts", import.meta.url), { type: "module" });
  const message: Attack = {
    kind: attack,
    url,
    token: ATTACKER_TOKEN,
    tenant: "acme",
    network: "blue",
  };
  worker.postMessage(message);
  // Let the attack reach its stride before the clock starts.
  await new Promise((r) => setTimeout(r, attack === "connections" ? 3000 : 1000));
  try {
    await measure();
  } finally {
    worker.postMessage("stop");
  }
  const statuses = await new Promise<Record<string, number>>((r) => {
    worker.onmessage = (e) => r(e.data);
  });
  worker.terminate();
  return statuses;
}

export async function fairnessFigures(
  requests: number,
  attacks = Object.keys(ATTACKS) as AttackKind[],
): Promise<FairnessFigures> {
  return await withTempDir(async (dir) => {
    const m = await spawnManager(dir, `${dir}/fairness.kv`, {
      tokens: [
        { token: ADMIN_TOKEN, scope: "admin" },
        { token: ATTACKER_TOKEN, scope: "tenant", tenant: "acme" },
        { token: VICTIM_TOKEN, scope: "tenant", tenant: "globex" },
      ],
    });
    try {
      await waitReady(m.url, performance.now());
      await setUp(m.url);
      const phases: Phase[] = [];
      const record = async (attack: Phase["attack"]) => {
        let run = { latencies: [] as number[], errors: 0 };
        const measure = async () => void (run = await victim(m.url, requests, attack));
        const attacker = attack === "idle" ? {} : await underAttack(m.url, attack, measure);
        if (attack === "idle") await measure();
        phases.push({
          attack,
          what: attack === "idle" ? "no other load" : ATTACKS[attack].what,
          p50Ms: percentile(run.latencies, 50),
          p90Ms: percentile(run.latencies, 90),
          p99Ms: percentile(run.latencies, 99),
          errors: run.errors,
          attacker,
        });
      };
      await record("idle");
      for (const attack of attacks) await record(attack);
      return { requests, phases };
    } finally {
      await m.stop();
    }
  });
}

/** `--attack KIND` (again for more): only those attacks, after the idle phase; all by default. */
function chosenAttacks(args: string[]): AttackKind[] {
  const chosen = args.flatMap((a, i) => a === "--attack" ? [args[i + 1]] : []);
  for (const kind of chosen) {
    if (!(kind in ATTACKS)) {
      throw new Error(
        `--attack ${kind}: not an attack of this bench (${Object.keys(ATTACKS).join(", ")})`,
      );
    }
  }
  return chosen.length > 0 ? chosen as AttackKind[] : Object.keys(ATTACKS) as AttackKind[];
}

const f = (x: number) => x.toLocaleString("en-US", { maximumFractionDigits: 1 });

export function fairnessTable(figures: FairnessFigures): string {
  const idle = figures.phases[0].p99Ms;
  const rows = figures.phases.map((p) => {
    const attacker = Object.entries(p.attacker).map(([s, n]) => `${s}: ${n}`).join(", ") || "—";
    return `| ${p.what} | ${f(p.p50Ms)} ms | ${f(p.p90Ms)} ms | **${f(p.p99Ms)} ms** | ${
      f(p.p99Ms / idle)
    }× | ${p.errors} | ${attacker} |`;
  });
  return [
    `| attack by tenant acme | globex p50 | globex p90 | globex p99 | p99 / idle p99 (goal ≤ 3×) | globex errors | acme's answers |`,
    `|---|---|---|---|---|---|---|`,
    ...rows,
  ].join("\n");
}

if (import.meta.main) {
  const requests = Deno.args.includes("--quick") ? 200 : 1000;
  const figures = await fairnessFigures(requests, chosenAttacks(Deno.args));
  console.log(
    `#### Fairness between tenants (${
      new Date().toISOString().slice(0, 10)
    }; ${requests} requests of the victim per phase, one every ${VICTIM_INTERVAL_MS} ms)\n\n${
      fairnessTable(figures)
    }`,
  );
}
