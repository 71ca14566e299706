/**
 * verify node NAME: is the node's dataplane what it should be? Three comparisons, each printed as
 * its differences: the flows on the bridge against the set the agent computes, the ports on the
 * bridge against the agent's state, and the agent's state against the ports the manager has bound
 * to the node. Exit 1 when anything differs (the differences are the output), 0 on a clean node.
 */
import type { Port } from "@knitter/common";
import { requireFlagsOf, str, VERB_FLAGS } from "./args.ts";
import { type AgentVerifyView, DEFAULT_AGENT_SOCKET, verifyOnAgent } from "./agent_client.ts";
import type { AttachContext } from "./attach.ts";
import { CommandFailed, UsageError } from "./errors.ts";
import { explainManagerError } from "./failures.ts";
import { json } from "./output.ts";
import { managerClient } from "./verbs.ts";

export interface VerifyReport {
  node: string;
  bridge: string;
  flows: { computed: number; installed: number; missing: string[]; extra: string[] };
  ports: {
    /** In the agent's state, not on the bridge (or at another ofport). */
    missing: AgentVerifyView["missingPorts"];
    /** On the bridge, neither the agent's own nor in its state. */
    extra: AgentVerifyView["extraPorts"];
  };
  manager: {
    /** Agent state entries with no port of the manager bound to this node. */
    stateOnly: { portId: string; tenant: string; network: string; hostIfName: string }[];
    /** Ports the manager has bound to this node that the agent has no state of. */
    managerOnly: { id: string; tenant: string; network: string; ip: string }[];
  };
  differences: number;
}

export async function verify(c: AttachContext): Promise<void> {
  requireFlagsOf(c.line, VERB_FLAGS.verify, "verify");
  const [what, node, ...rest] = c.line.args;
  if (what !== "node" || !node || rest.length > 0) {
    throw new UsageError(`verify takes "node NAME": knitctl verify node n1`);
  }
  const socket = socketOf(c, node);
  const client = await managerClient(c.settings);
  let ports: Port[];
  try {
    ports = await client.listPorts({ node });
  } catch (err) {
    throw explainManagerError(err);
  } finally {
    client.close();
  }
  const agent = await verifyOnAgent(socket);
  if (agent.node !== node) {
    throw new UsageError(`The agent at ${socket} is node ${agent.node}'s, not ${node}'s`);
  }
  const report = compare(agent, ports);
  c.io.out(c.settings.output === "json" ? json(report) : render(report));
  if (report.differences > 0) throw new Quiet();
}

/** The agent's view against the manager's ports bound to the node. */
export function compare(agent: AgentVerifyView, ports: Port[]): VerifyReport {
  const key = (network: string, id: string) => `${network}/${id}`;
  const held = new Set(ports.map((p) => key(p.network, p.id)));
  const stated = new Set(agent.state.map((s) => key(s.network, s.portId)));
  const stateOnly = agent.state
    .filter((s) => !held.has(key(s.network, s.portId)))
    .map(({ portId, tenant, network, hostIfName }) => ({ portId, tenant, network, hostIfName }));
  const managerOnly = ports
    .filter((p) => !stated.has(key(p.network, p.id)))
    .map(({ id, tenant, network, ip }) => ({ id, tenant, network, ip }));
  const { computed, installed, missing, extra } = agent.flows;
  const differences = missing.length + extra.length + agent.missingPorts.length +
    agent.extraPorts.length + stateOnly.length + managerOnly.length;
  return {
    node: agent.node,
    bridge: agent.bridge,
    flows: { computed, installed, missing, extra },
    ports: { missing: agent.missingPorts, extra: agent.extraPorts },
    manager: { stateOnly, managerOnly },
    differences,
  };
}

function render(r: VerifyReport): string {
  const out: string[] = [];
  const section = (title: string, lines: string[]) => {
    out.push(`${title}: ${lines.length ? `${lines.length} differ` : "the same"}`);
    out.push(...lines.map((l) => `  ${l}`));
  };
  section(
    `flows on ${r.bridge} (${r.flows.installed} installed) against the computed set (${r.flows.computed})`,
    [
      ...r.flows.missing.map((l) => `+ ${l}   (computed, not on the bridge)`),
      ...r.flows.extra.map((l) => `- ${l}   (on the bridge, not computed)`),
    ],
  );
  section(`ports on ${r.bridge} against the agent's state`, [
    ...r.ports.missing.map((p) =>
      p.found === undefined
        ? `${p.hostIfName} (port ${p.portId}, ofport ${p.ofport}) is in the agent's state but not on ${r.bridge}`
        : `${p.hostIfName} (port ${p.portId}) is at ofport ${p.found}, the agent's state says ${p.ofport}`
    ),
    ...r.ports.extra.map((p) =>
      `${p.name} (ofport ${p.ofport}) is on ${r.bridge} but not in the agent's state`
    ),
  ]);
  section(`the agent's state against the manager's ports bound to ${r.node}`, [
    ...r.manager.stateOnly.map((s) =>
      `${s.tenant}/${s.network}/${s.portId} (${s.hostIfName}) is in the agent's state, but the manager has no such port bound to ${r.node}`
    ),
    ...r.manager.managerOnly.map((p) =>
      `${p.tenant}/${p.network}/${p.id} (${p.ip}) is bound to ${r.node} at the manager, but the agent has no state of it`
    ),
  ]);
  out.push(
    r.differences
      ? `node ${r.node}: ${r.differences} difference${r.differences === 1 ? "" : "s"}`
      : `node ${r.node}: no differences`,
  );
  return out.join("\n") + "\n";
}

/** NAME's agent: the stack's node, else --agent-socket (or the default) on that node. */
function socketOf(c: AttachContext, node: string): string {
  const explicit = str(c.line.flags, "agent-socket") ?? c.env("KNITCTL_AGENT_SOCKET");
  if (explicit) return explicit;
  const stack = c.settings.stack;
  if (stack) {
    const found = stack.nodes.find((n) => n.name === node);
    if (!found) {
      throw new UsageError(
        `The stack in ${stack.dir} has no node "${node}" (it has ${
          stack.nodes.map((n) => n.name).join(", ")
        })`,
      );
    }
    return found.agentSocket;
  }
  return DEFAULT_AGENT_SOCKET;
}

/** Exit 1 without a message: the differences were the output. */
class Quiet extends CommandFailed {
  readonly quiet = true;
  constructor() {
    super("");
  }
}
