/**
 * Only the CNI bursts, several rounds: N concurrent ADDs then N concurrent DELs for knitter, the
 * bare shell sequence and the reference plugins, in the same run. For working on burst speed; the
 * figures that go into docs/benchmarks.md come from `make bench-cni`.
 *
 *   deno task bench:burst [--pods 50] [--rounds 3]
 */
import { parseArgs } from "node:util";
import { Cleanup } from "../../devstack/cleanup.ts";
import { burstFigures } from "./cni_bench.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { pods: { type: "string", default: "50" }, rounds: { type: "string", default: "3" } },
});
if (Deno.uid() !== 0) {
  console.error("bench: needs root (network namespaces, Open vSwitch)");
  Deno.exit(1);
}
{
  await using cleanup = new Cleanup();
  const figures = await burstFigures(cleanup, {
    burst: Number(values.pods),
    rounds: Number(values.rounds),
  });
  console.log("| subject | round | ADD pods/s | DEL pods/s |\n|---|---|---|---|");
  const { floor, ...subjects } = figures;
  floor.forEach((f, i) =>
    console.log(
      `| plugin VERSION only (its own floor) | ${i + 1} | ${f.podsPerSecond.toFixed(0)} | |`,
    )
  );
  for (const [name, rounds] of Object.entries(subjects)) {
    rounds.forEach((r, i) =>
      console.log(
        `| ${name} | ${i + 1} | ${r.add.podsPerSecond.toFixed(0)} | ${
          r.del.podsPerSecond.toFixed(0)
        } |`,
      )
    );
  }
}
