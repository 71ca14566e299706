/**
 * What `limits.feedSockets` costs the API (issue 32): HTTP allocations (http_bench.ts, 16 clients,
 * history on) through the connection guard on Deno's newer per-connection server (the default),
 * on its older one (`Deno.serveHttp`, which the feed's WebSockets outlive), and straight on
 * `Deno.serve` (the yardstick), rotating the order each round; medians.
 *
 *   deno run -A manager/bench/feed_sockets_guard_bench.ts [--rounds 3] [--requests 6000]
 */
import { parseArgs } from "node:util";
import { httpAllocations, type HttpFigures } from "./http_bench.ts";
import { median } from "./ipam_bench.ts";

const HISTORY_ON = { historyRetentionDays: 30 };

const SERVERS = [
  { name: "guard on Deno's per-connection server (default)", limits: {} },
  { name: "guard on Deno.serveHttp (limits.feedSockets)", limits: { feedSockets: true } },
  { name: "Deno.serve as it is (yardstick)", limits: { headerTimeoutMs: 0 } },
];

async function figures(rounds: number, requests: number): Promise<HttpFigures[][]> {
  const runs: HttpFigures[][] = SERVERS.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < SERVERS.length; k++) {
      const i = (k + round) % SERVERS.length;
      runs[i].push(
        await httpAllocations(16, requests, { ...HISTORY_ON, limits: SERVERS[i].limits }),
      );
    }
  }
  return runs;
}

function table(runs: HttpFigures[][], requests: number): string {
  const f = (x: number, digits = 0) => x.toLocaleString("en-US", { maximumFractionDigits: digits });
  const yardstick = median(runs[2].map((x) => x.perSecond));
  const rows = runs.map((xs, i) => {
    const per = median(xs.map((x) => x.perSecond));
    const each = xs.map((x) => f(x.perSecond)).join(", ");
    const errors = xs.reduce((n, x) => n + x.errors, 0);
    return `| ${SERVERS[i].name} | ${f(per)}/s (${each}) | ${
      f(median(xs.map((x) => x.p99Ms)), 2)
    } ms | ${f((per / yardstick) * 100)} % | ${errors} |`;
  });
  return `| server (16 clients, ${
    f(requests)
  } allocations a round, history on) | median (each round) | p99 (median) | of the yardstick | errors |
|---|---|---|---|---|
${rows.join("\n")}`;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      rounds: { type: "string", default: "3" },
      requests: { type: "string", default: "6000" },
    },
  });
  const [rounds, requests] = [Number(values.rounds), Number(values.requests)];
  console.error(`bench: ${SERVERS.length} servers, ${rounds} rounds of ${requests} allocations`);
  console.log(table(await figures(rounds, requests), requests));
}
