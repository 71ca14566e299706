/**
 * What an attachment leaves on a node, looked up where it lives: OVS ports and flows, veths in the
 * node's netns, and the agent's journal (its Deno KV, read beside the running agent).
 */
import { run } from "@knitter/common";
import { Ovs } from "../../agent/dataplane/ovs.ts";
import type { Attachment } from "../../agent/state.ts";
import type { Stack, StackNode } from "../../devstack/stack.ts";

export interface NodeLeftovers {
  /** br-int ports carrying knitter external IDs. */
  ovsPorts: string[];
  /** Pod veth host ends (kn...) in the node's netns. */
  veths: string[];
  /** Attachment records in the agent's journal, as "container/ifname". */
  journal: string[];
}

/** Each list sorted, so that two snapshots compare equal. */
export async function leftovers(node: StackNode): Promise<NodeLeftovers> {
  const ports = await new Ovs(node.sim.ovs).listPorts("br-int");
  const links = await run(["ip", "-n", node.sim.netns, "-o", "link", "show", "type", "veth"]);
  return {
    ovsPorts: ports.filter((p) => Object.keys(p.externalIds).some((k) => k.startsWith("knitter-")))
      .map((p) => p.name).sort(),
    veths: links.stdout.split("\n").map((l) => /^\d+: (kn[0-9a-f]+)@/.exec(l)?.[1])
      .filter((n): n is string => n !== undefined).sort(),
    journal: (await journal(node)).map((a) => `${a.containerId}/${a.ifName}`).sort(),
  };
}

/** The agent's attachment records. */
export async function journal(node: StackNode): Promise<Attachment[]> {
  const kv = await Deno.openKv(`${node.agentStateDir}/agent.kv`);
  try {
    const out: Attachment[] = [];
    for await (const e of kv.list<Attachment>({ prefix: ["attachment"] })) out.push(e.value);
    return out;
  } finally {
    kv.close();
  }
}

/** br-int flows (canonical lines, no statistics); `match` narrows, e.g. "cookie=0x.../-1". */
export function flows(node: StackNode, match?: string): Promise<string[]> {
  return new Ovs(node.sim.ovs).dumpFlows("br-int", match);
}

/** The cookie of a pod interface's flows: the one on its classification flow in table 0. */
export async function portCookie(node: StackNode, hostIfName: string): Promise<string> {
  const port = (await new Ovs(node.sim.ovs).listPorts("br-int")).find((p) => p.name === hostIfName);
  if (!port) throw new Error(`${hostIfName} is not on br-int of ${node.name}`);
  const lines = await flows(node, `table=0,in_port=${port.ofport}`);
  const cookie = lines.map((l) => /cookie=(0x[0-9a-f]+)/.exec(l)?.[1]).find(Boolean);
  if (!cookie) throw new Error(`no flow classifies ofport ${port.ofport}: ${lines.join("\n")}`);
  return cookie;
}

/** Addresses in use in a network, as the manager counts them. */
export async function usage(stack: Stack, tenant: string, network: string): Promise<number> {
  const r = await stack.api("GET", `tenants/${tenant}/networks/${network}`);
  if (r.status !== 200) throw new Error(`GET ${tenant}/${network}: ${JSON.stringify(r.body)}`);
  return r.body.usage.used;
}
