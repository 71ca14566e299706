/**
 * attach / detach: an extra interface in a pod or netns on this node, made by the node's agent.
 * The command line is checked here (one target, one kind), the agent checks the rest.
 */
import { type CommandLine, requireFlagsOf, str, strs, VERB_FLAGS } from "./args.ts";
import {
  attachInterface,
  type AttachRequest,
  DEFAULT_AGENT_SOCKET,
  detachInterface,
  type ExtraInterfaceView,
  type NetnsTarget,
} from "./agent_client.ts";
import type { Env, Settings } from "./config.ts";
import { UsageError } from "./errors.ts";
import { json, table } from "./output.ts";
import * as V from "./values.ts";
import type { Io } from "./verbs.ts";

export interface AttachContext {
  line: CommandLine;
  settings: Settings;
  io: Io;
  env: Env;
}

export async function attach(c: AttachContext): Promise<void> {
  requireNoArgs(c, "attach");
  requireFlagsOf(c.line, VERB_FLAGS.attach, "attach");
  const req = attachRequest(c.line, c.settings.tenant);
  const made = await attachInterface(agentSocket(c), req);
  if (c.settings.output === "json") return c.io.out(json(made));
  const on = made.kind === "network"
    ? `${made.bridge} (network ${made.tenant}/${made.network})`
    : `${made.bridge}${made.vlan !== undefined ? ` vlan ${made.vlan}` : ""}`;
  c.io.out(table(
    ["INTERFACE", "NETNS", "ADDRESS", "MAC", "MTU", "ON"],
    [[made.ifName, made.netns, addresses(made), made.mac, String(made.mtu), on]],
  ));
}

export async function detach(c: AttachContext): Promise<void> {
  requireNoArgs(c, "detach");
  requireFlagsOf(c.line, VERB_FLAGS.detach, "detach");
  const target = netnsTarget(c.line);
  const ifName = ifNameOf(c.line);
  const r = await detachInterface(agentSocket(c), { ...target, ifName });
  if (c.settings.output === "json") return c.io.out(json(r));
  c.io.out(
    r.removed
      ? `${ifName} in ${r.netns} detached\n`
      : `${ifName} in ${r.netns} was not attached: nothing to do\n`,
  );
}

/** The agent's request from the command line; usage errors for what cannot go together. */
export function attachRequest(line: CommandLine, tenant: string): AttachRequest {
  const f = line.flags;
  const network = str(f, "network");
  const bridge = str(f, "bridge");
  if (!network === !bridge) {
    throw new UsageError(
      "attach needs exactly one of --network NAME (a Knitter network) or --bridge BR (a plain OVS bridge)",
    );
  }
  const vlan = str(f, "vlan");
  if (vlan !== undefined && !bridge) {
    throw new UsageError("--vlan goes with --bridge; a --network's segment comes from the network");
  }
  const ip = str(f, "ip");
  if (bridge && ip !== undefined && !ip.includes("/")) {
    throw new UsageError(`--ip "${ip}" with --bridge needs a prefix length, e.g. ${ip}/24`);
  }
  const mtu = str(f, "mtu");
  const routes = [
    ...(strs(f, "route-gw") ?? []).map((r) => V.gatewayRoute("route-gw", r)),
    ...(strs(f, "route-intf") ?? []).map((dst) => ({ dst: dst.trim() })),
  ];
  return {
    ...netnsTarget(line),
    ifName: ifNameOf(line),
    ...(network ? { network, tenant } : { bridge }),
    ...(vlan !== undefined ? { vlan: V.integer("vlan", vlan, 1, 4094) } : {}),
    ...(ip !== undefined ? { ip } : {}),
    ...(str(f, "mac") ? { mac: str(f, "mac")!.toLowerCase() } : {}),
    ...(mtu !== undefined ? { mtu: V.integer("mtu", mtu, 68, 65535) } : {}),
    ...(routes.length ? { routes } : {}),
  };
}

export function netnsTarget(line: CommandLine): NetnsTarget {
  const netns = str(line.flags, "netns");
  const pid = str(line.flags, "pid");
  const pod = str(line.flags, "pod");
  const given = [netns, pid, pod].filter((v) => v !== undefined).length;
  if (given !== 1) {
    throw new UsageError(
      "Name the network namespace with exactly one of --netns NAME|PATH, --pid PID or --pod NAMESPACE/NAME",
    );
  }
  if (pod !== undefined && !/^[^/]+\/[^/]+$/.test(pod)) {
    throw new UsageError(`--pod "${pod}" must be NAMESPACE/NAME`);
  }
  if (netns !== undefined) return { netns };
  if (pid !== undefined) return { pid: V.integer("pid", pid, 1, 4194304) };
  return { pod };
}

function ifNameOf(line: CommandLine): string {
  const ifName = str(line.flags, "ifname");
  if (!ifName) throw new UsageError("Name the interface with --ifname, e.g. --ifname eth1");
  return ifName;
}

function requireNoArgs(c: AttachContext, verb: string): void {
  if (c.line.args.length) {
    throw new UsageError(
      `${verb} takes flags only, not "${c.line.args.join(" ")}": see "knitctl ${verb} --help"`,
    );
  }
}

/** --agent-socket, KNITCTL_AGENT_SOCKET, the stack's node (--node), or the agent's default. */
export function agentSocket(c: AttachContext): string {
  const node = str(c.line.flags, "node");
  const explicit = str(c.line.flags, "agent-socket") ?? c.env("KNITCTL_AGENT_SOCKET");
  if (explicit) {
    if (node) throw new UsageError("--node picks a stack's agent: give it or --agent-socket");
    return explicit;
  }
  const stack = c.settings.stack;
  if (!stack) {
    if (node) throw new UsageError("--node needs --stack DIR (or KNITCTL_STACK) to find its agent");
    return DEFAULT_AGENT_SOCKET;
  }
  const names = stack.nodes.map((n) => n.name).join(", ");
  if (!node && stack.nodes.length !== 1) {
    throw new UsageError(`The stack in ${stack.dir} has nodes ${names}: pick one with --node`);
  }
  const found = node ? stack.nodes.find((n) => n.name === node) : stack.nodes[0];
  if (!found) {
    throw new UsageError(`The stack in ${stack.dir} has no node "${node}" (it has ${names})`);
  }
  return found.agentSocket;
}

/** Its addresses for the table: none, one, or a dual-stack network's two, comma-separated. */
function addresses(made: ExtraInterfaceView): string {
  return [made.address, made.address6].filter((a) => a !== undefined).join(",");
}
