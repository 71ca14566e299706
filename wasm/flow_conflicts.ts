/**
 * Isolation of the remote entries that must not poison a node's flows. The compilers reject a
 * model with two claimants of one MAC or address in a network; what the agent receives about other
 * nodes may have them anyway (a lost DEL and a reused address, or a hostile tenant). Before either
 * engine runs, `isolateConflicts` takes out every remote port that is malformed or collides, and
 * returns the rest with the list of what it took out. Both engines then compile the same model, so
 * their output stays byte-identical. The rule (agent/PIPELINE.md, "Conflicting entries"):
 *
 * - a remote port with a malformed MAC, address or tunnel endpoint, of a network the node does
 *   not have, or with its network's gateway address or gateway MAC, is quarantined (`invalid`);
 * - a local port always wins: a remote port that claims the MAC or an address of a local port of
 *   the same network is quarantined (`local`);
 * - between remote ports, every claimant of a MAC or address that another remote port of the same
 *   network also claims is quarantined (`remote`): the compiler cannot tell which one is stale, and
 *   neither the first nor the last to arrive may take over an address that way.
 *
 * Local ports are this node's own state; a collision among them still makes the compile throw.
 *
 * @module
 */

import type { FlowInput } from "./flow_input.ts";
import { keyLookup } from "./flow_keys.ts";

/** Why a remote port is left out of the flows: malformed, or colliding with a local or remote one. */
export const CONFLICT_REASONS = ["invalid", "local", "remote"] as const;
export type ConflictReason = typeof CONFLICT_REASONS[number];

/** A remote port left out of the flows. */
export interface FlowConflict {
  /** Index in the input's `remotePorts`. */
  remote: number;
  network: number;
  mac: string;
  ips: string[];
  nodeIp: string;
  reason: ConflictReason;
  /** What it collides with or what is wrong: `localPorts[2] (mac 02:…)`, `remotePorts[5] (ip …)`. */
  detail: string;
  /**
   * Every claim it collides on (reasons `local` and `remote`; empty for `invalid`): the field, its
   * value in canonical form, and the other claimant's index in `localPorts` (`local`) or
   * `remotePorts` (`remote`). `detail` names the first.
   */
  collisions: Collision[];
}

/** What two claimants of one network share. */
export interface Collision {
  field: "mac" | "ip";
  value: string;
  index: number;
}

/** The model without the quarantined remote ports, and what was taken out (ascending `remote`). */
export interface IsolatedInput {
  input: FlowInput;
  conflicts: FlowConflict[];
}

/**
 * Takes the malformed and colliding remote ports out of the model (the rule is in the module
 * documentation). Returns the input itself when nothing is taken out. Never throws for remote
 * ports; shapes are checked later by the compiler.
 */
export function isolateConflicts(input: FlowInput): IsolatedInput {
  const remotes = Array.isArray(input?.remotePorts) ? input.remotePorts : [];
  if (remotes.length === 0) return { input, conflicts: [] };
  const networkList = Array.isArray(input.networks) ? input.networks : [];
  const networks = new Set<unknown>(networkList.map((n) => n?.id));
  const localPorts = Array.isArray(input.localPorts) ? input.localPorts : [];
  const book = compilerKeys(networkList, localPorts, remotes);
  const { macKey, addressKey } = book;
  // Keys of local claims: `<network> m<mac>` and `<network> a<address>`.
  const locals = new Map<string, number>();
  for (let i = 0; i < localPorts.length; i++) {
    const p = localPorts[i];
    if (typeof p?.mac === "string") {
      const m = macKey(p.mac);
      if (m !== null) locals.set(`${p.network} m${m}`, i);
    }
    if (Array.isArray(p?.ips)) {
      for (const ip of p.ips) {
        const a = typeof ip === "string" ? addressKey(ip) : null;
        if (a !== null) locals.set(`${p.network} a${a}`, i);
      }
    }
  }
  // The gateways' claims, `<network> m<mac>` and `<network> a<address>`: the network's own.
  const gateways = new Set<string>();
  for (const n of networkList) {
    if (typeof n?.gateway !== "string" || typeof n.gatewayMac !== "string") continue;
    const a = addressKey(n.gateway);
    if (a !== null) gateways.add(`${n.id} a${a}`);
    const m = macKey(n.gatewayMac);
    if (m !== null) gateways.add(`${n.id} m${m}`);
  }
  const reasons = new Map<number, [ConflictReason, string, Collision[]]>();
  const keysOf: string[][] = [];
  const claims = new Map<string, number[]>();
  for (let j = 0; j < remotes.length; j++) {
    const p = remotes[j];
    keysOf.push([]);
    const bad = invalid(p, networks, book);
    if (bad) {
      reasons.set(j, ["invalid", bad, []]);
      continue;
    }
    const keys = new Set<string>([`${p.network} m${macKey(p.mac)}`]);
    for (const ip of p.ips) keys.add(`${p.network} a${addressKey(ip)}`);
    const gateway = [...keys].find((key) => gateways.has(key));
    if (gateway) {
      const c = collision(gateway, 0);
      reasons.set(j, [
        "invalid",
        `the gateway of network ${p.network} (${c.field} ${c.value})`,
        [],
      ]);
      continue;
    }
    const withLocal: Collision[] = [];
    for (const key of keys) {
      const local = locals.get(key);
      if (local !== undefined) withLocal.push(collision(key, local));
    }
    if (withLocal.length > 0) {
      const first = withLocal[0];
      const what = `${first.field} ${first.value}`;
      reasons.set(j, ["local", `localPorts[${first.index}] (${what})`, withLocal]);
      continue;
    }
    keysOf[j] = [...keys];
    for (const key of keys) {
      const list = claims.get(key);
      if (list) list.push(j);
      else claims.set(key, [j]);
    }
  }
  for (let j = 0; j < remotes.length; j++) {
    if (reasons.has(j)) continue;
    const withRemote: Collision[] = [];
    for (const key of keysOf[j]) {
      const other = claims.get(key)!.find((k) => k !== j);
      if (other !== undefined) withRemote.push(collision(key, other));
    }
    if (withRemote.length > 0) {
      const first = withRemote[0];
      const what = `${first.field} ${first.value}`;
      reasons.set(j, ["remote", `remotePorts[${first.index}] (${what})`, withRemote]);
    }
  }
  if (reasons.size === 0) return { input, conflicts: [] };
  const conflicts: FlowConflict[] = [];
  const kept: FlowInput["remotePorts"] = [];
  for (let j = 0; j < remotes.length; j++) {
    const r = reasons.get(j);
    const p = remotes[j];
    if (!r) {
      kept.push(p);
      continue;
    }
    const c: FlowConflict = {
      remote: j,
      network: p?.network,
      mac: p?.mac,
      ips: Array.isArray(p?.ips) ? [...p.ips] : [],
      nodeIp: p?.nodeIp,
      reason: r[0],
      detail: r[1],
      collisions: r[2],
    };
    conflicts.push(c);
  }
  return { input: { ...input, remotePorts: kept }, conflicts };
}

/** A claim key (`<network> m<mac>` or `<network> a<address>`) as field and canonical value. */
function collision(key: string, index: number): Collision {
  const at = key.indexOf(" ");
  const value = key.slice(at + 2);
  return { field: key[at + 1] === "a" ? "ip" : "mac", value, index };
}

/** The compiler's keys of the model's MACs, addresses and tunnel endpoints (flow_keys.ts). */
interface Keys {
  macKey(text: unknown): string | null;
  addressKey(text: unknown): string | null;
  nodeIpValid(text: unknown): boolean;
}

/** Every MAC, address and tunnel endpoint of the model, keyed in three calls into the compiler. */
function compilerKeys(
  networks: FlowInput["networks"],
  locals: FlowInput["localPorts"],
  remotes: FlowInput["remotePorts"],
): Keys {
  const ips = (p: { ips?: unknown } | undefined) => Array.isArray(p?.ips) ? p.ips : [];
  const mac = keyLookup("mac", [
    ...locals.map((p) => p?.mac),
    ...networks.map((n) => n?.gatewayMac),
    ...remotes.map((p) => p?.mac),
  ]);
  const address = keyLookup("address", [
    ...locals.flatMap(ips),
    ...networks.map((n) => n?.gateway),
    ...remotes.flatMap(ips),
  ]);
  const nodeIp = keyLookup("nodeIp", remotes.map((p) => p?.nodeIp));
  return { macKey: mac, addressKey: address, nodeIpValid: (t) => nodeIp(t) !== null };
}

/** What is wrong with a remote port, or "" when the compilers would accept it. */
function invalid(
  p: FlowInput["remotePorts"][number],
  networks: Set<unknown>,
  { macKey, addressKey, nodeIpValid }: Keys,
): string {
  if (typeof p !== "object" || p === null) return "not an object";
  if (!networks.has(p.network)) return `unknown network ${p.network}`;
  if (typeof p.mac !== "string" || macKey(p.mac) === null) {
    return `bad mac ${JSON.stringify(p.mac)}`;
  }
  if (!Array.isArray(p.ips)) return "ips is not an array";
  for (const ip of p.ips) {
    if (typeof ip !== "string" || addressKey(ip) === null) return `bad ip ${JSON.stringify(ip)}`;
  }
  if (typeof p.nodeIp !== "string" || !nodeIpValid(p.nodeIp)) {
    return `bad nodeIp ${JSON.stringify(p.nodeIp)}`;
  }
  return "";
}

/**
 * `isolateConflicts`, then `compile` (`compileFlows` or `compileFlowsTs`) on what is left: the
 * flows of the node and the remote ports they leave out.
 */
export function compileIsolated(
  input: FlowInput,
  compile: (input: FlowInput) => string[],
): { lines: string[]; conflicts: FlowConflict[] } {
  const isolated = isolateConflicts(input);
  return { lines: compile(isolated.input), conflicts: isolated.conflicts };
}
