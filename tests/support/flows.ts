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

/**
 * Whether a table's flows let `peer` (`nw_src=…`, `ipv6_src=…`) reach `port`: one flow of both,
 * or (a rule with several peers or ports, wasm/assembly/acl.ts) a conjunction with a flow of each.
 */
export function allowsPeer(dumped: string[], peer: string, port: number): boolean {
  // Dumped lines end their match with " actions=".
  const lines = dumped.map((l) => l.replace(/\s+actions=/, ",actions="));
  if (lines.some((l) => l.includes(`${peer},tp_dst=${port},`))) return true;
  const ids = (l: string) => [...l.matchAll(/conjunction\((\d+),/g)].map((m) => m[1]);
  const peers = new Set(lines.filter((l) => l.includes(`${peer},actions=`)).flatMap(ids));
  return lines.some((l) =>
    l.includes(`tp_dst=${port},actions=`) && ids(l).some((id) => peers.has(id))
  );
}

/** Waits until the flows of `match` let `peer` reach `port` (allowsPeer). */
export async function waitForPeer(
  node: StackNode,
  match: string,
  peer: string,
  port: number,
): Promise<void> {
  await waitFor(`${node.name}: ${peer} allowed to port ${port}`, async () => {
    return allowsPeer(await nodeFlows(node, match), peer, port);
  }, 20_000);
}
