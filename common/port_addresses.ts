/**
 * A port's addresses, for those that configure, announce or vet them: its one address, and on a
 * dual-stack network its IPv6 address too (manager/service/dual_stack.ts).
 */
import type { Port } from "./api_types.ts";

/** The port's addresses without prefix, IPv4 first. */
export function portIps(port: Pick<Port, "ip" | "ip6">): string[] {
  return port.ip6 === undefined ? [port.ip] : [port.ip, port.ip6];
}

/** The port's addresses with their prefix length ("10.1.0.5/24", "fd00:1::5/64"), IPv4 first. */
export function portAddresses(port: Pick<Port, "address" | "address6">): string[] {
  return port.address6 === undefined ? [port.address] : [port.address, port.address6];
}
