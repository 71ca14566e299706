/**
 * Networks whose addresses would overlap: a tenant's networks must not overlap each other or the
 * public networks its pods may also attach to; a public network must not overlap any network.
 */
import { invalid } from "../errors.ts";
import { keys, type NetworkRecord } from "../model.ts";
import { type Ctx, listValues } from "./context.ts";
import { overlappingSubnets } from "./dual_stack.ts";
import { publicNetworks } from "./network_lookup.ts";

/** 400 naming the field and the network overlapped. Callers hold networkChecks (node_reach.ts). */
export async function checkOverlap(
  ctx: Ctx,
  net: { tenant: string; public: boolean; subnets: Pick<NetworkRecord, "cidr" | "cidr6"> },
): Promise<void> {
  const { tenant, subnets } = net;
  const candidates = net.public ? await listValues<NetworkRecord>(ctx.store, keys.networks()) : [
    ...await listValues<NetworkRecord>(ctx.store, keys.networks(tenant)),
    ...(await publicNetworks(ctx)).filter((n) => n.tenant !== tenant),
  ];
  for (const n of candidates) {
    const hit = overlappingSubnets(subnets, n);
    if (hit) {
      throw invalid(
        hit.mine === subnets.cidr ? "cidr" : "cidr6",
        `${hit.mine} overlaps network "${n.name}" (${hit.theirs}) of tenant "${n.tenant}"${
          n.public ? ", a public network" : ""
        }`,
      );
    }
  }
}
