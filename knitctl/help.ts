/** Usage texts: the whole command, and each verb. */
import { GLOBAL_FLAGS, VERB_FLAGS, VERB_FLAGS_SPEC } from "./args.ts";
import { RESOURCES } from "./resources.ts";

export const VERSION = "0.1.0";

const SUMMARY: Record<string, [string, string]> = {
  get: ["get <resource> [name] [flags]", "list resources as a table, or show one"],
  create: ["create <resource> <name> [flags]", "create a resource"],
  update: [
    "update network|router <name> --advertise=true|false",
    "change a resource: whether it is advertised to the fabric by BGP (admin turns it on)",
  ],
  delete: ["delete <resource> <name> [flags]", "delete a resource"],
  usage: [
    "usage networks|physnets [name] | quota",
    "addresses or VLAN IDs: total, used, free; the tenant's quota: used, limit, left",
  ],
  attach: ["attach [flags]", "add an extra interface to a pod or netns, through its node's agent"],
  detach: ["detach [flags]", "remove an interface attach made (succeeds when already gone)"],
  flows: [
    "flows diff|collect [flags]",
    "a node's installed flows against those its agent computes (exit 1: they differ); collect: " +
    "the agents' flow records, top talkers per network",
  ],
  trace: [
    "trace --src PORT|IP --dst IP [flags]",
    "what each node's pipeline does with a packet: flows matched, where it goes, why dropped",
  ],
  capture: [
    "capture --network NET --port ID | --mirror NAME -w FILE [flags]",
    "a pcap of one port's traffic (N packets or S seconds, a BPF filter), through its node's agent",
  ],
  verify: [
    "verify node NAME",
    "a node's flows, OVS ports, agent state and manager ports against each other (exit 1: differ)",
  ],
  history: [
    "history ADDRESS|MAC [--at TIME]",
    "who held an address or MAC when (port, pod, node, from, to), from the manager's history",
  ],
  activate: [
    "activate port ID --network NET",
    "a claim's port takes the claim's traffic, its other port none (a live migration's target)",
  ],
  bind: [
    "bind floatingip ADDRESS --network NET --port ID|--claim NAME",
    "1:1 NAT of a floating address to one of the tenant's ports (it follows the port ID)",
  ],
  unbind: [
    "unbind floatingip ADDRESS",
    "take a floating address off its port (still the tenant's)",
  ],
  version: ["version", "print knitctl's version"],
  help: ["help [verb]", "this help, or a verb's"],
};

export function mainHelp(): string {
  const verbs = Object.entries(SUMMARY).map(([, [use, what]]) => `  ${use.padEnd(36)} ${what}`);
  const resources = RESOURCES.map((r) => `  ${r.names.join(", ")}`);
  return [
    "knitctl: the command-line client of Knitter (the manager's API and the node agents)",
    "",
    "Usage: knitctl [global flags] <verb> <resource> [name] [flags]",
    "",
    "Verbs:",
    ...verbs,
    "",
    "Resources:",
    ...resources,
    "",
    "Global flags:",
    ...flagLines(GLOBAL_FLAGS, Object.keys(GLOBAL_FLAGS)),
    "",
    "Precedence: flags, environment, --stack, config file (~/.config/knitter/knitctl.json).",
    'Exit codes: 0 done, 1 the manager or agent failed, 2 usage error. "knitctl help VERB" for more.',
  ].join("\n") + "\n";
}

export function verbHelp(verb: string): string {
  const [use, what] = SUMMARY[verb];
  const out = [`knitctl ${use}: ${what}`, ""];
  if (verb === "create") {
    out.push("Flags by resource:");
    for (const r of RESOURCES) {
      const req = Object.keys(r.create.required);
      out.push(`  ${r.kind}:${r.create.flags.length ? "" : " none"}`);
      out.push(...flagLines(VERB_FLAGS_SPEC, r.create.flags, req).map((l) => `  ${l}`));
    }
  } else if (verb === "update") {
    out.push("Flags by resource:");
    for (const r of RESOURCES.filter((r) => r.update)) {
      out.push(`  ${r.kind}:`, ...flagLines(VERB_FLAGS_SPEC, r.update!.flags).map((l) => `  ${l}`));
    }
  } else if (VERB_FLAGS[verb].length) {
    out.push("Flags:", ...flagLines(VERB_FLAGS_SPEC, VERB_FLAGS[verb]));
  }
  out.push(...(EXTRA[verb] ?? []));
  out.push("", "Global flags (--server, --token, -t, -o, --config, --stack) apply too.");
  return out.join("\n") + "\n";
}

const EXTRA: Record<string, string[]> = {
  get: [
    "",
    "--network, --node and --pod narrow a list of ports; get port ID needs --network.",
    "--network narrows a list of claims; get claim NAME needs --network.",
  ],
  update: [
    "",
    "A network's advertise is PATCHed. A router is replaced whole by the API: knitctl reads it and",
    "sends it back with the change (a change someone makes between the two is overwritten).",
    "Only an admin turns advertise on; a tenant may turn it off.",
    "",
    "Example: knitctl -t acme update router edge --advertise=true",
  ],
  delete: [
    "",
    "delete port ID and delete claim NAME need --network.",
    "delete floatingip ADDRESS releases it: in quarantine, then free for any tenant.",
  ],
  activate: [
    "",
    "For a port bound to a claim (create port ID --claim NAME): in one step it becomes the claim's",
    "active port and the claim's other port (the migration's source) inactive. Again: no change.",
  ],
  attach: [
    "",
    "Target: --netns, --pid or --pod; and --ifname. Kind: --network (a Knitter network, address",
    "from the manager, flows on br-int) or --bridge (a plain veth on that OVS bridge, optional",
    "--vlan tag, --ip with prefix). --agent-socket defaults to /run/knitter/agent.sock; with",
    "--stack DIR, --node NAME picks that node's agent.",
    "",
    "Example: knitctl attach --netns lab1 --ifname eth1 --network blue --route-gw 10.9.0.0/16,10.1.0.254",
  ],
  detach: ["", "Example: knitctl detach --netns lab1 --ifname eth1"],
  trace: [
    "",
    "Live, each node's agent runs the packet through its switch (ofproto/trace) and the trace",
    "follows it through the tunnel or the physnet to the next node (their agents: --stack).",
    "--offline computes the flows from the manager's model instead; with --node, --network and",
    "--ip (and -t) it traces from a pod that does not exist yet. --src-ip / --src-mac: what if",
    "the pod sent from another address. An address nobody has: its ARP request is traced.",
    "",
    "Example: knitctl trace --src acme/blue/web-1 --dst 10.1.0.7 --proto tcp --dport 443",
  ],
  capture: [
    "",
    "The port's node's agent runs tcpdump on the port's veth until -c N packets (default 100, at",
    "most 10000) or --seconds S (default 10, at most 300), whichever comes first, and knitctl",
    "writes the pcap file (tcpdump -r, Wireshark). The agent asks the manager with your token:",
    "only your tenant's ports (any with an admin token). --pod NS/NAME (--ifname IF) finds the",
    "port; --direction in|out|both is the pod's view. Run it on the port's node, or --stack/--node.",
    "--mirror NAME captures a mirror's copies where a node sends them: to a collector port (on its",
    "node), or to a remote collector (on a source's node: the tunnel packets, which the filter sees",
    "from their outer headers). The same rule: only your tenant's mirrors.",
    "",
    "Example: knitctl capture --network blue --port web-1 -c 50 --filter 'tcp port 80' -w web.pcap",
  ],
  verify: [
    "",
    "Flows on the bridge against the computed set, bridge ports against the agent's state, the",
    "state against the ports the manager binds to the node. Asks the node's agent (--stack, or",
    "--agent-socket on that node) and the manager. Exit 1 when anything differs.",
    "",
    "Example: knitctl verify node n1",
  ],
  history: [
    "",
    "The tenant's own holders (-t); every tenant's with --all-tenants (an admin token). --at",
    "TIME: who held it then; --from / --to: who held it at any time between; neither: all the",
    "manager keeps (historyRetentionDays after a holding ends). TO is now while it holds it.",
    "",
    "Example: knitctl -t acme history 10.10.0.5 --at 2026-11-25T03:00:00Z",
  ],
  flows: [
    "",
    "+ LINE: computed but not on the bridge; - LINE: on the bridge but not computed. The agent",
    "repairs such drift by itself (its flowCheck interval); this shows it now. --agent-socket",
    "defaults to /run/knitter/agent.sock; with --stack DIR, --node NAME picks that node's agent.",
    "",
    "Example: knitctl flows diff --agent-socket /run/knitter/agent.sock",
    "",
    "flows collect receives the IPFIX flow records agents send (their flowRecords.collectors) on",
    "--listen (default 127.0.0.1:4739) for --seconds (default 10), then prints per network the",
    "pairs that sent the most bytes (pod names where the agent knew them), with the security",
    "group decision; -o json: every record too.",
    "",
    "Example: knitctl flows collect --listen 0.0.0.0:4739 --seconds 30",
  ],
};

function flagLines(
  specs: Record<string, { short?: string; value?: string; help: string }>,
  names: string[],
  required: string[] = [],
): string[] {
  return names.map((name) => {
    const s = specs[name];
    const flag = `${s.short ? `-${s.short}, ` : "    "}--${name}${s.value ? ` ${s.value}` : ""}`;
    return `  ${flag.padEnd(30)} ${s.help}${required.includes(name) ? " (required)" : ""}`;
  });
}
