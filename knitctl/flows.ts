/**
 * flows collect: flow records from the agents, top talkers per network (flow_collect.ts).
 *
 * flows diff: the difference between the flows on a node's bridge and the ones its agent computes,
 * asked of the agent on its socket. `+ LINE` is computed but missing on the bridge, `- LINE` is on
 * the bridge but not computed (as diff(1) shows going from the bridge to the computed set). Exit 1
 * when they differ, as diff(1).
 */
import { requireFlagsOf, VERB_FLAGS } from "./args.ts";
import { flowDiff } from "./agent_client.ts";
import { agentSocket, type AttachContext } from "./attach.ts";
import { CommandFailed, UsageError } from "./errors.ts";
import { json } from "./output.ts";
import { collect } from "./flow_collect.ts";

const COLLECT_FLAGS = ["listen", "seconds"];
const DIFF_FLAGS = VERB_FLAGS.flows.filter((f) => !COLLECT_FLAGS.includes(f));

export async function flows(c: AttachContext): Promise<void> {
  requireFlagsOf(c.line, VERB_FLAGS.flows, "flows");
  const [what, ...rest] = c.line.args;
  if (!(what === "diff" || what === "collect") || rest.length > 0) {
    throw new UsageError(
      `flows takes one subcommand: "knitctl flows diff" or "knitctl flows collect" (got "${
        c.line.args.join(" ")
      }")`,
    );
  }
  if (what === "collect") {
    requireFlagsOf(c.line, COLLECT_FLAGS, "flows collect");
    return await collect(c);
  }
  requireFlagsOf(c.line, DIFF_FLAGS, "flows diff");
  const d = await flowDiff(agentSocket(c));
  const differs = d.missing.length + d.extra.length > 0;
  if (c.settings.output === "json") {
    c.io.out(json(d));
  } else {
    const lines = [
      ...d.missing.map((l) => `+ ${l}`),
      ...d.extra.map((l) => `- ${l}`),
      `${d.bridge}: ${d.installed} flows installed, ${d.computed} computed: ${
        differs ? `${d.missing.length} missing (+), ${d.extra.length} extra (-)` : "the same"
      }; self-healing so far: ${d.heals} heals, ${d.repairs} drift repairs in ${d.checks} checks`,
    ];
    c.io.out(lines.join("\n") + "\n");
  }
  if (differs) throw new Quiet();
}

/** Exit 1 without a message: the difference was the output. */
class Quiet extends CommandFailed {
  readonly quiet = true;
  constructor() {
    super("");
  }
}
