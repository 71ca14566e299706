/**
 * The services section of the flow compiler's input: per service on a network of this node, its
 * VIP, the MAC that answers ARP for it, its ports and the addresses of its ready backends (the
 * agent resolves them: ports bound to a node). See ../agent/PIPELINE.md, "Services".
 *
 * @module
 */

export interface FlowServicePort {
  protocol: "tcp" | "udp";
  port: number;
  targetPort: number;
}

export interface FlowService {
  /** Node-local number 1..2^27 - 1: its groups are id × 16 + the port's index. */
  id: number;
  /** Network id (of `networks[]`). */
  network: number;
  /** IPv4 or IPv6: the service's flows match that family. */
  vip: string;
  /** The MAC ARP requests for the VIP are answered with. */
  mac: string;
  ports: FlowServicePort[];
  /**
   * Addresses of the backends, of the VIP's family (an IPv6 VIP: IPv6 backends); one that no port
   * of the network has in the model (left out as a conflict, not known yet) gets no bucket.
   */
  backends: string[];
  /** Every connection of one client address to the same backend. */
  affinity?: boolean;
}

/** Protocol codes, in the encoding the WASM engine reads (assembly/service.ts). */
export const SERVICE_PROTOCOLS = ["tcp", "udp"] as const;

/** Most ports of a service (its groups' ids) and most backends (buckets). */
export const MAX_FLOW_SERVICE_PORTS = 16;
export const MAX_FLOW_SERVICE_ID = 2 ** 27 - 1;

/**
 * Error codes of the checks that need the model; both engines report them with the same arguments
 * (service, item), so both throw the same text (serviceError). Above ACL_ERR's codes.
 */
export const SERVICE_ERR = {
  UNKNOWN_NETWORK: 201,
  BAD_VIP: 202,
  VIP_TAKEN: 203,
  BAD_MAC: 204,
  BAD_BACKEND: 205,
  DUP_ID: 206,
};

/** The Error of a failed services check: `code` from SERVICE_ERR, the service and item at fault. */
export function serviceError(services: FlowService[], code: number, i: number, k = 0): Error {
  const s = services[i];
  const at = `services[${i}]`;
  switch (code) {
    case SERVICE_ERR.UNKNOWN_NETWORK:
      return new Error(`${at}.network: ${s?.network} is no network of the model`);
    case SERVICE_ERR.BAD_VIP:
      return new Error(
        `${at}.vip: ${JSON.stringify(s?.vip)} is not a unicast IPv4 or IPv6 address`,
      );
    case SERVICE_ERR.VIP_TAKEN:
      return new Error(
        `${at}.vip: ${s?.vip} is already an address of network ${s?.network} (a port, the gateway or another service)`,
      );
    case SERVICE_ERR.BAD_MAC:
      return new Error(`${at}.mac: ${JSON.stringify(s?.mac)} is not a unicast MAC address`);
    case SERVICE_ERR.BAD_BACKEND:
      return new Error(
        `${at}.backends[${k}]: ${
          JSON.stringify(s?.backends[k])
        } is not a unicast address of the VIP's family`,
      );
    case SERVICE_ERR.DUP_ID:
      return new Error(`${at}.id: ${s?.id} is listed twice`);
  }
  return new Error(`flow compiler: unknown services error ${code} at ${at}`);
}

function fail(path: string, expected: string, value: unknown): never {
  throw new Error(`${path}: expected ${expected}, got ${JSON.stringify(value) ?? String(value)}`);
}

const isPort = (v: unknown) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;

function checkPort(p: FlowServicePort, path: string): void {
  if (typeof p !== "object" || p === null) fail(path, "an object", p);
  if (!SERVICE_PROTOCOLS.includes(p.protocol)) {
    fail(`${path}.protocol`, SERVICE_PROTOCOLS.join(" or "), p.protocol);
  }
  if (!isPort(p.port)) fail(`${path}.port`, "an integer in 1..65535", p.port);
  if (!isPort(p.targetPort)) fail(`${path}.targetPort`, "an integer in 1..65535", p.targetPort);
}

/** Throws an Error naming the first field of the wrong type or out of range. */
export function checkServiceShape(services: FlowService[] | undefined): void {
  if (services === undefined) return;
  if (!Array.isArray(services)) fail("services", "an array", services);
  for (const [i, s] of services.entries()) {
    const at = `services[${i}]`;
    if (typeof s !== "object" || s === null) fail(at, "an object", s);
    if (!Number.isInteger(s.id) || s.id < 1 || s.id > MAX_FLOW_SERVICE_ID) {
      fail(`${at}.id`, `an integer in 1..${MAX_FLOW_SERVICE_ID}`, s.id);
    }
    if (!Number.isInteger(s.network) || s.network < 1) {
      fail(`${at}.network`, "a network id", s.network);
    }
    if (typeof s.vip !== "string") fail(`${at}.vip`, "a string", s.vip);
    if (typeof s.mac !== "string") fail(`${at}.mac`, "a string", s.mac);
    if (s.affinity !== undefined && typeof s.affinity !== "boolean") {
      fail(`${at}.affinity`, "a boolean", s.affinity);
    }
    if (!Array.isArray(s.ports) || s.ports.length < 1 || s.ports.length > MAX_FLOW_SERVICE_PORTS) {
      fail(`${at}.ports`, `an array of 1..${MAX_FLOW_SERVICE_PORTS} ports`, s.ports);
    }
    s.ports.forEach((p, k) => checkPort(p, `${at}.ports[${k}]`));
    if (!Array.isArray(s.backends)) fail(`${at}.backends`, "an array of strings", s.backends);
    s.backends.forEach((b, k) =>
      typeof b !== "string" && fail(`${at}.backends[${k}]`, "a string", b)
    );
  }
}
