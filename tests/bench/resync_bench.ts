/**
 * The full resync figures alone (flows_figures.ts), as JSON: what `deno task bench:cni` measures
 * for issue 13's goal, without the CNI runs before it. Needs root and Open vSwitch.
 *
 *   deno task bench:resync [ports]
 */
import { Cleanup } from "../../devstack/cleanup.ts";
import { resyncFigures } from "./flows_figures.ts";

{
  await using cleanup = new Cleanup();
  const figures = await resyncFigures(cleanup, Number(Deno.args[0] ?? 10000));
  console.log(JSON.stringify(figures, null, 1));
}
