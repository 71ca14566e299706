/**
 * Security groups as the manager answers them and the agent reads them: a tenant's named set of
 * stateful rules that ports (or their network, by default) name. See docs/concepts.md.
 */

export type SecurityDirection = "ingress" | "egress";
export type SecurityProtocol = "tcp" | "udp" | "icmp" | "icmpv6" | "any";

/** Who is on the other end of a rule; absent: anyone. */
export type SecurityPeer =
  | { cidr: string }
  | { group: string }
  /** A network of the same tenant; `cidr` is filled in by the manager (networks keep theirs). */
  | { network: string; cidr?: string };

export interface SecurityRule {
  direction: SecurityDirection;
  protocol: SecurityProtocol;
  /** "80" or "8000-8100", TCP and UDP only; absent: every port. */
  ports?: string;
  peer?: SecurityPeer;
}

export interface SecurityGroup {
  name: string;
  tenant: string;
  description?: string;
  rules: SecurityRule[];
  createdAt: string;
  updatedAt: string;
}

/** A rule's port range as numbers; every port when it names none. */
export function portRange(ports: string | undefined): [number, number] {
  if (ports === undefined) return [0, 65535];
  const [a, b = a] = ports.split("-");
  return [Number(a), Number(b)];
}
