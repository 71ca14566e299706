/**
 * Who holds a taken address, for the error that refuses it. Only refusals ask, so this reads rather
 * than keeping an address index that every allocation would have to write. A holder of another
 * tenant than the asking one (on a public network) is not named.
 */
import {
  type ClaimRecord,
  keys,
  type NetworkRecord,
  type PortRecord,
  type ServiceRecord,
} from "../model.ts";
import type { Ctx } from "./context.ts";
import { readGroup } from "./ip_group_members.ts";

export async function holderOf(
  ctx: Ctx,
  held: { net: NetworkRecord; ip: string; asker: string },
): Promise<string> {
  const { net, ip, asker } = held;
  if (ip === net.gateway) return "the gateway";
  for await (const e of ctx.store.list(keys.ipGroupsOfNetwork(net.id))) {
    const [tenant, name] = e.key.slice(-2) as [string, string];
    const g = (await readGroup(ctx.store, tenant, name)).value;
    const a = g?.addresses.find((a) => a.ip === ip);
    if (!a) continue;
    if (tenant !== asker) return "held by another tenant";
    return a.port
      ? `used by port "${a.port}" (from IP group "${name}")`
      : `held by IP group "${name}" (request it with ipGroup)`;
  }
  for await (const e of ctx.store.list(keys.claimsOfNetwork(net.id))) {
    const [tenant, name] = e.key.slice(-2) as [string, string];
    const c = (await ctx.store.get<ClaimRecord>(keys.claim(tenant, net.id, name))).value;
    if (c?.ip !== ip) continue;
    return tenant === asker
      ? `held by claim "${name}" (bind a port to it with claim)`
      : "held by another tenant";
  }
  for await (const e of ctx.store.list(keys.servicesOfNetwork(net.id))) {
    const [tenant, name] = e.key.slice(-2) as [string, string];
    const s = (await ctx.store.get<ServiceRecord>(keys.service(tenant, name))).value;
    // `ip` is the pool's address: a dual-stack service's IPv4 VIP, whichever family is first.
    if (!s || !(s.vips ?? [s.vip]).includes(ip)) continue;
    return tenant === asker ? `the VIP of service "${name}"` : "held by another tenant";
  }
  for await (const e of ctx.store.list<PortRecord>(keys.ports(net.id))) {
    if (e.value?.ip !== ip) continue;
    return e.value.tenant === asker ? `used by port "${e.value.id}"` : "used by another tenant";
  }
  return "reserved (excluded from allocation)";
}
