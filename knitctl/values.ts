/**
 * Flag values that are more than a string: ranges, routes, numbers, labels. Each parser names the
 * flag and shows a good value when the given one is wrong.
 */
import { UsageError } from "./errors.ts";

/** "10.1.0.10-10.1.0.200" → {start, end} (addresses are left to the manager to judge). */
export function addressRange(flag: string, text: string): { start: string; end: string } {
  const [start, end, extra] = text.split("-");
  if (!start || !end || extra !== undefined) {
    throw new UsageError(
      `--${flag} "${text}" is not a range: use START-END, e.g. 10.1.0.10-10.1.0.200`,
    );
  }
  return { start: start.trim(), end: end.trim() };
}

/** "100-199" or "100" → {start, end}. */
export function vlanRange(flag: string, text: string): { start: number; end: number } {
  const parts = text.split("-");
  const nums = parts.map((p) => Number(p.trim()));
  if (parts.length > 2 || nums.some((n) => !Number.isInteger(n) || n < 1 || n > 4094)) {
    throw new UsageError(
      `--${flag} "${text}" is not a VLAN range: use A-B with IDs 1-4094, e.g. 100-199`,
    );
  }
  return { start: nums[0], end: nums[nums.length - 1] };
}

/** "true" or "false" → the boolean. */
export function boolean(flag: string, text: string): boolean {
  if (text === "true" || text === "false") return text === "true";
  throw new UsageError(
    `--${flag} "${text}" is not true or false: use --${flag}=true or --${flag}=false`,
  );
}

/** "DST[,VIA]" → {dst, via?}. */
export function route(flag: string, text: string): { dst: string; via?: string } {
  const [dst, via, extra] = text.split(",").map((s) => s.trim());
  if (!dst || extra !== undefined || via === "") {
    throw new UsageError(
      `--${flag} "${text}" is not a route: use DST[,VIA], e.g. 10.9.0.0/16,10.1.0.254`,
    );
  }
  return via ? { dst, via } : { dst };
}

/** "CIDR,GW" → {dst, via}: a route through a gateway. */
export function gatewayRoute(flag: string, text: string): { dst: string; via: string } {
  const [dst, via, extra] = text.split(",").map((s) => s.trim());
  if (!dst || !via || extra !== undefined) {
    throw new UsageError(`--${flag} "${text}" needs CIDR,GW, e.g. 10.9.0.0/16,10.1.0.254`);
  }
  return { dst, via };
}

/**
 * "DIR:PROTO[:PORTS][:PEER]" → a security group rule: ingress:tcp:80:cidr=10.0.0.0/24,
 * egress:udp:53, ingress:icmp:group=web, egress:any::network=blue. The manager checks the values.
 */
export function securityRule(flag: string, text: string): Record<string, unknown> {
  const [direction, protocol, ...rest] = text.split(":");
  const peerText = rest.find((r) => r.includes("="));
  const ports = rest.find((r) => r !== "" && !r.includes("="));
  const usage = `--${flag} "${text}" is not a rule: use DIR:PROTO[:PORTS][:PEER], ` +
    "e.g. ingress:tcp:80:group=web or egress:udp:53:cidr=10.0.0.0/24";
  if (!direction || !protocol || rest.length > 2) throw new UsageError(usage);
  const rule: Record<string, unknown> = { direction, protocol };
  if (ports !== undefined) rule.ports = ports;
  if (peerText !== undefined) {
    const [kind, value] = peerText.split("=");
    if (!["cidr", "group", "network"].includes(kind) || !value) throw new UsageError(usage);
    rule.peer = { [kind]: value };
  }
  return rule;
}

/**
 * "PROTO[:PORTS][:CIDR]" → a rule of a mirror's filter: tcp:5001, udp:5000-5003:10.9.0.0/16,
 * icmp, any::10.0.0.0/8. The manager checks the values.
 */
export function mirrorMatch(flag: string, text: string): Record<string, unknown> {
  const [protocol, ports, remote, ...more] = text.split(":");
  if (!protocol || more.length > 0 || (ports ?? "").includes("/")) {
    throw new UsageError(
      `--${flag} "${text}" is not a match: use PROTO[:PORTS][:CIDR], e.g. tcp:5001 or udp:5000-5003:10.9.0.0/16`,
    );
  }
  return {
    protocol,
    ...(ports ? { ports } : {}),
    ...(remote ? { remote } : {}),
  };
}

/** A rule as knitctl's --rule writes it. */
export function formatRule(r: {
  direction: string;
  protocol: string;
  ports?: string;
  peer?: Record<string, string>;
}): string {
  const peer = r.peer ? Object.entries(r.peer)[0].join("=") : undefined;
  return [r.direction, r.protocol, r.ports ?? (peer ? "" : undefined), peer]
    .filter((x) => x !== undefined).join(":");
}

export function integer(flag: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < min || n > max) {
    throw new UsageError(`--${flag} "${text}" is not a whole number from ${min} to ${max}`);
  }
  return n;
}

/** "key=value" pairs → a record. */
export function labels(flag: string, texts: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const text of texts) {
    const at = text.indexOf("=");
    if (at <= 0) throw new UsageError(`--${flag} "${text}" is not KEY=VALUE, e.g. zone=a`);
    out[text.slice(0, at)] = text.slice(at + 1);
  }
  return out;
}

/** "NETWORK/PORT" → {network, port}: a port by its network and ID (a mirror's source, collector). */
export function portRef(flag: string, text: string): { network: string; port: string } {
  const [network, port, extra] = text.split("/").map((s) => s.trim());
  if (!network || !port || extra !== undefined) {
    throw new UsageError(
      `--${flag} "${text}" is not a port: use NETWORK/PORT-ID, e.g. blue/acme-web-0-eth1`,
    );
  }
  return { network, port };
}

/**
 * "NETWORK/PORT" → a collector port; "gre:IP", "erspan:IP[:SESSION]", "vxlan:IP:VNI" → a remote
 * collector (admin). The manager checks the address and which key each protocol takes.
 */
export function collector(
  flag: string,
  text: string,
): { network: string; port: string } | { remote: Record<string, string | number> } {
  const remote = /^(gre|erspan|vxlan):([^:]+)(?::(.*))?$/.exec(text.trim());
  if (!remote) return portRef(flag, text);
  const [, protocol, ip, key] = remote;
  if (key === undefined) return { remote: { ip, protocol } };
  const name = TUNNEL_KEY[protocol];
  if (!name) {
    throw new UsageError(`--${flag} "${text}": gre takes no key; use gre:IP, e.g. gre:192.0.2.250`);
  }
  return { remote: { ip, protocol, [name]: integer(flag, key, 0, 16_777_215) } };
}

/** The key after a remote collector's address, by protocol. */
const TUNNEL_KEY: Record<string, string> = { erspan: "session", vxlan: "vni" };
/** "[TCP|UDP:]PORT[:TARGET]" → a service port, e.g. "80", "tcp:80:8080", "udp:53". */
export function servicePort(
  flag: string,
  text: string,
): { protocol: string; port: number; targetPort?: number } {
  const m = /^(?:(tcp|udp):)?(\d{1,5})(?::(\d{1,5}))?$/i.exec(text.trim());
  if (!m) {
    throw new UsageError(
      `--${flag} "${text}" is not a service port: use [tcp|udp:]PORT[:TARGET-PORT], e.g. tcp:80:8080`,
    );
  }
  const out: { protocol: string; port: number; targetPort?: number } = {
    protocol: (m[1] ?? "tcp").toUpperCase(),
    port: Number(m[2]),
  };
  if (m[3] !== undefined) out.targetPort = Number(m[3]);
  return out;
}

/** Repeated flags, each maybe a comma-separated list, as one list. */
export function list(texts: string[] | undefined): string[] {
  return (texts ?? []).flatMap((t) => t.split(",")).map((s) => s.trim()).filter(Boolean);
}
