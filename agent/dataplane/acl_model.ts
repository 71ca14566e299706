/**
 * The security group section of the flow compiler's input (wasm/acl_input.ts), from what the agent
 * knows: its ports' groups (as the manager's feed last said them, so that a change made through the
 * API reaches a running pod), the groups' rules, and every port's groups and address for the peers
 * that name a group. A port that names no group, and whose network names none, gets no entry: its
 * flows stay those of a node without security groups. A group the agent does not know (yet) allows
 * nothing: a port never gets more than its groups say.
 */
import { type Port, portRange, type SecurityGroup, type SecurityRule } from "@knitter/common";
import type { FlowAcl, FlowAclRule } from "@knitter/wasm";
import { portKey, type PortRef } from "./port_key.ts";

/** What the agent's view of the cluster answers (remote.ts). */
export interface GroupSource {
  securityGroup(tenant: string, name: string): SecurityGroup | undefined;
  /** Every port the manager listed, this node's own included. */
  ports(): Iterable<Port>;
  port(ref: PortRef): Port | undefined;
}

/**
 * The groups a port is in: its own, else its network's defaults when the network is its tenant's
 * (a public network's defaults are its owner's groups, not another tenant's).
 */
export function effectiveGroups(p: Port): string[] {
  if (p.securityGroups?.length) return p.securityGroups;
  if (p.tenant === p.networkTenant && p.networkSecurityGroups?.length) {
    return p.networkSecurityGroups;
  }
  return [];
}

/** "tenant/group" → the addresses of the ports in that group. */
function members(ports: Iterable<Port>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const p of ports) {
    for (const g of effectiveGroups(p)) {
      const k = `${p.tenant}/${g}`;
      const list = out.get(k);
      if (list) list.push(p.ip);
      else out.set(k, [p.ip]);
    }
  }
  return out;
}

function flowRule(
  tenant: string,
  r: SecurityRule,
  groupMembers: Map<string, string[]>,
): FlowAclRule {
  const out: FlowAclRule = { direction: r.direction, protocol: r.protocol };
  if (r.ports !== undefined) [out.portMin, out.portMax] = portRange(r.ports);
  const peer = r.peer;
  if (peer === undefined) return out;
  if ("group" in peer) out.remote = [...groupMembers.get(`${tenant}/${peer.group}`) ?? []];
  else out.remote = peer.cidr === undefined ? [] : [peer.cidr];
  return out;
}

/** The ACLs of the local ports (with their cookies) that are in a group. */
export function aclsOf(locals: { port: Port; cookie: number }[], view: GroupSource): FlowAcl[] {
  const current = locals.map(({ port, cookie }) => ({
    port: view.port(port) ?? port,
    cookie,
  }));
  const guarded = current.filter(({ port }) => effectiveGroups(port).length > 0);
  if (guarded.length === 0) return [];
  const all = new Map<string, Port>();
  for (const p of view.ports()) all.set(portKey(p), p);
  for (const { port } of current) all.set(portKey(port), port);
  const groupMembers = members(all.values());
  return guarded.map(({ port, cookie }) => {
    const rules = new Map<string, FlowAclRule>();
    for (const name of effectiveGroups(port)) {
      for (const r of view.securityGroup(port.tenant, name)?.rules ?? []) {
        const rule = flowRule(port.tenant, r, groupMembers);
        rules.set(JSON.stringify(rule), rule);
      }
    }
    return { cookie, rules: [...rules.values()] };
  });
}
