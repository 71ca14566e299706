/**
 * Converts the agent's ADD result (always 1.1.0 form) to the version the runtime asked for.
 * Older versions get the 1.1-only fields dropped; 0.4.0 also needs `version` on each IP.
 */
import type { CniVersion } from "./protocol.ts";

const INTERFACE_1_1_ONLY = ["mtu", "socketPath", "pciID"];
const ROUTE_1_1_ONLY = ["mtu", "advmss", "priority", "table", "scope"];

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function without(o: unknown, keys: string[]): unknown {
  if (!isObj(o)) return o;
  const copy = { ...o };
  for (const k of keys) delete copy[k];
  return copy;
}

/** 0.4.0 labels each IP; an address with ":" is IPv6 (that includes IPv4-mapped ones). */
function withIpVersion(ip: unknown): unknown {
  if (!isObj(ip) || typeof ip.address !== "string") return ip;
  return { ...ip, version: ip.address.includes(":") ? "6" : "4" };
}

function mapList(v: unknown, f: (item: unknown) => unknown): unknown {
  return Array.isArray(v) ? v.map(f) : v;
}

/** Returns a new object; the printed cniVersion is always the config's. */
export function convertResult(result: Obj, to: CniVersion): Obj {
  const { cniVersion: _from, ...rest } = result;
  const out: Obj = { cniVersion: to, ...rest };
  if (to === "1.1.0") return out;
  if ("interfaces" in out) {
    out.interfaces = mapList(out.interfaces, (i) => without(i, INTERFACE_1_1_ONLY));
  }
  if ("routes" in out) out.routes = mapList(out.routes, (r) => without(r, ROUTE_1_1_ONLY));
  if (to === "0.4.0" && "ips" in out) out.ips = mapList(out.ips, withIpVersion);
  return out;
}
