/**
 * Only the sequential ADD against the bare shell sequence, several rounds in the same run, and with
 * `--profile` where the agent's time goes (profile_bench.ts). For working on the sequential ADD on a
 * busy machine, where only ratios of the same run say anything; the figures that go into
 * docs/benchmarks.md come from `make bench-cni`.
 *
 *   deno task bench:sequential [--pods 10] [--rounds 5] [--profile]
 */
import { parseArgs } from "node:util";
import { Cleanup } from "../../devstack/cleanup.ts";
import { sequentialFigures } from "./cni_bench.ts";
import { addProfile } from "./profile_bench.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    pods: { type: "string", default: "10" },
    rounds: { type: "string", default: "5" },
    profile: { type: "boolean", default: false },
  },
});
if (Deno.uid() !== 0) {
  console.error("bench: needs root (network namespaces, Open vSwitch)");
  Deno.exit(1);
}
const ms = (x: number) => `${x.toFixed(1)} ms`;
{
  await using cleanup = new Cleanup();
  const { stack, rounds, all } = await sequentialFigures(cleanup, {
    per: Number(values.pods),
    rounds: Number(values.rounds),
  });
  console.log("| round | knitter ADD p50 | bare shell p50 | knitter / shell |\n|---|---|---|---|");
  rounds.forEach((r, i) =>
    console.log(
      `| ${i + 1} | ${ms(r.knitter.p50)} | ${ms(r.shell.p50)} | ${
        (r.knitter.p50 / r.shell.p50).toFixed(2)
      }× |`,
    )
  );
  const ratios = rounds.map((r) => r.knitter.p50 / r.shell.p50).sort((a, b) => a - b);
  console.log(`\nmedian ratio of the rounds: ${ratios[Math.floor(ratios.length / 2)].toFixed(2)}×`);
  console.log(
    `all rounds: knitter p50 ${ms(all.knitter.p50)}, bare shell p50 ${ms(all.shell.p50)}, ${
      (all.knitter.p50 / all.shell.p50).toFixed(2)
    }× (${all.knitter.n} ADDs each)`,
  );
  if (values.profile) {
    const p = await addProfile(cleanup, stack, 22, 10);
    console.log(`\nADD, mean per pod over ${p.pods} pods: ${ms(p.add.totalMs)}`);
    console.log("| phase | mean per pod | calls | from | to (ms after the exec started) |");
    for (const ph of [...p.add.phases].sort((a, b) => (a.from ?? 1e9) - (b.from ?? 1e9))) {
      const when = ph.from === undefined ? "| |" : `| ${ms(ph.from)} | ${ms(ph.to!)} |`;
      console.log(`| ${ph.phase} | ${ms(ph.ms)} | ${ph.calls} ${when}`);
    }
    console.log("\nmean per call, sequential ADDs:");
    for (const [phase, mean] of p.sequentialPerCall) console.log(`| ${phase} | ${ms(mean)} |`);
  }
}
