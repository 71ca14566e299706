/**
 * The world of the routing tests, IPv4 (tests/e2e_routing_test.ts) and IPv6 (e2e_routing6_test.ts)
 * alike: tenants acme and globex, each with red, blue (VLAN on phys1) and, acme only, green; red
 * and blue joined by a router of each tenant (the same CIDRs in both); a pod per place. What the
 * two families differ in is the networks' bodies and which address of a pod is used.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { type Stack, waitFor } from "../../devstack/stack.ts";
import { addressesOf, ipNetnsName, knitterList, makePod, type Pod } from "./pods.ts";
import { api } from "./stack_api.ts";
import { tcpExchange, udpExchange } from "./traffic.ts";

export type Family = 4 | 6;

export interface Added {
  name: string;
  pod: Pod;
  ns: string;
  ip: string;
}

/** A pod on `networks` through the real plugin; `ip` is its eth0 address of `family`. */
export async function routedPod(
  node: Stack["nodes"][number],
  name: string,
  tenant: string,
  networks: string[],
  family: Family,
): Promise<Added> {
  const p = await makePod(node, name, tenant, knitterList(networks));
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const ip = addressesOf(r.out, "eth0").find((a) => a.address.includes(":") === (family === 6));
  assert.ok(ip, `an IPv${family} address on eth0: ${JSON.stringify(r.out)}`);
  return { name, pod: p, ns: ipNetnsName(p.netns), ip: ip.address.split("/")[0] };
}

/** Three pings of `family`: whether one came back, and the TTL (hop limit) the replies had. */
export async function ping(
  from: Added,
  ip: string,
  family: Family,
): Promise<{ ok: boolean; ttl?: number }> {
  const r = await run(
    ["ip", "netns", "exec", from.ns, "ping", `-${family}`, "-c", "3", "-i", "0.2", "-W", "1", ip],
    { check: false },
  );
  const ttl = /ttl=(\d+)/.exec(r.stdout)?.[1];
  return r.code === 0 && ttl ? { ok: true, ttl: Number(ttl) } : { ok: false };
}

/** The networks, routers and pods; `nets` gives a tenant's network bodies (red, blue, green). */
export async function routedWorld(
  stack: Stack,
  nets: (tenant: string) => Record<string, unknown>[],
  family: Family,
) {
  const [n1, n2] = stack.nodes;
  await api(stack, "POST", "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] });
  for (const name of ["acme", "globex"]) await api(stack, "POST", "tenants", { name });
  for (const tenant of ["acme", "globex"]) {
    for (const body of nets(tenant)) await api(stack, "POST", `tenants/${tenant}/networks`, body);
  }
  const planes = { name: "planes", networks: ["red", "blue"] };
  await api(stack, "POST", "tenants/acme/routers", planes);
  // globex routes its own red and blue, with the very same CIDRs.
  await api(stack, "POST", "tenants/globex/routers", planes);
  const pod = (node: typeof n1, name: string, tenant: string, networks: string[]) =>
    routedPod(node, name, tenant, networks, family);
  // red on n1 only: n2 gets red's flows for the routed traffic alone.
  return {
    n1,
    n2,
    red: await pod(n1, "red-1", "acme", ["red"]),
    blueFar: await pod(n2, "blue-2", "acme", ["blue"]),
    blueNear: await pod(n1, "blue-1", "acme", ["blue"]),
    green: await pod(n2, "green-2", "acme", ["green"]),
    globexRed: await pod(n1, "gred-1", "globex", ["red"]),
    globexBlue: await pod(n2, "gblue-2", "globex", ["blue"]),
  };
}

/**
 * `from` and `to` reach each other through the router: a ping each way one TTL less (64 from the
 * pod, less the route on the sending node), 256 KiB of TCP one way and UDP datagrams the other.
 */
export async function reachRouted(cleanup: Cleanup, from: Added, to: Added, family: Family) {
  await waitFor(
    `${from.name} -> ${to.name}`,
    async () => (await ping(from, to.ip, family)).ok,
    20_000,
  );
  assert.deepEqual(await ping(from, to.ip, family), { ok: true, ttl: 63 }, to.name);
  assert.deepEqual(await ping(to, from.ip, family), { ok: true, ttl: 63 }, `${to.name} back`);
  const tcp = await tcpExchange(cleanup, from.ns, to.ns, to.ip, 256 * 1024);
  assert.ok(tcp.ok, `TCP ${from.name} -> ${to.name}: ${JSON.stringify(tcp)}`);
  const udp = await udpExchange(cleanup, to.ns, from.ns, from.ip, [64, 1200, 1400]);
  assert.ok(udp.ok, `UDP ${to.name} -> ${from.name}: ${JSON.stringify(udp)}`);
}
