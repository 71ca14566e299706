/** A node's br-int flows, as tests wait for the agent to compile what the manager says. */
import { Ovs } from "../../agent/dataplane/ovs.ts";
import { type StackNode, waitFor } from "../../devstack/stack.ts";

/** The node's br-int flows (canonical, sorted), those of `match` only when given. */
export function nodeFlows(node: StackNode, match?: string): Promise<string[]> {
  return new Ovs(node.sim.ovs).dumpFlows("br-int", match);
}

/** Waits until some flow of `match` holds every one of `texts` (with present false: none does). */
export async function waitForFlow(
  node: StackNode,
  match: string,
  texts: string[],
  present = true,
): Promise<void> {
  const what = `${node.name}: a flow ${match} with ${texts.join(" and ")}${present ? "" : " gone"}`;
  await waitFor(what, async () => {
    const lines = await nodeFlows(node, match);
    return lines.some((l) => texts.every((t) => l.includes(t))) === present;
  }, 20_000);
}
