/**
 * IPGroup resources into the manager's IP groups: created from the spec, grown or shrunk when its
 * addresses or size change (addresses in use stay), deleted with the resource once none is in use.
 * The status lists the group's addresses and the ports using them.
 */
import { type CrKind, tenantRecord } from "./cr_reconciler.ts";
import { type IpGroupResource, type IpGroupStatus, PLURAL } from "./crd_types.ts";
import { tenantPath } from "./resources.ts";

export interface ManagerIpGroup {
  name: string;
  tenant: string;
  network: string;
  networkTenant: string;
  size: number;
  used: number;
  addresses: { ip: string; port?: string }[];
}

/** The IPGroup kind (cr_reconciler.ts). */
export const ipGroupKind: CrKind<IpGroupResource, ManagerIpGroup> = {
  plural: PLURAL.ipGroup,
  what: "IP group",
  ...tenantRecord<IpGroupResource, ManagerIpGroup>("ipgroups"),
  async create(cr, { manager, log }) {
    const { namespace, name } = cr.metadata;
    const { spec } = cr;
    const group = await manager.request<ManagerIpGroup>("POST", base(namespace), {
      name,
      network: spec.network,
      ...(spec.addresses ? { addresses: spec.addresses } : {}),
      ...(spec.size !== undefined ? { size: spec.size } : {}),
    });
    log.info("IP group created", { group: `${namespace}/${name}`, size: group.size });
    return group;
  },
  async update(cr, group, { manager, log }) {
    const { namespace, name } = cr.metadata;
    if (cr.spec.network !== group.network) {
      return {
        record: group,
        problem: {
          reason: "ImmutableFieldChanged",
          message:
            `network (is "${group.network}", the spec asks "${cr.spec.network}") cannot change after creation; put it back, or create a new IPGroup`,
        },
      };
    }
    const change = resize(cr.spec, group);
    if (!change) return { record: group };
    group = await manager.request<ManagerIpGroup>("PUT", path(namespace, name), change);
    log.info("IP group resized", { group: `${namespace}/${name}`, size: group.size });
    return { record: group };
  },
  fields: (cr, group) => ({ ...fields(cr, group) }),
  ready,
};

/** The update the spec asks for, if any: a new address list, or a new size. */
function resize(
  spec: IpGroupResource["spec"],
  group: ManagerIpGroup,
): Record<string, unknown> | undefined {
  if (spec.addresses) {
    const have = group.addresses.map((a) => a.ip).sort();
    const want = [...spec.addresses].sort();
    return JSON.stringify(have) === JSON.stringify(want)
      ? undefined
      : { addresses: spec.addresses };
  }
  if (spec.size !== undefined && spec.size !== group.size) return { size: spec.size };
  return undefined;
}

const base = (namespace: string) => tenantPath("ipgroups", namespace);
const path = (namespace: string, name: string) => tenantPath("ipgroups", namespace, name);

/** The group's addresses and their ports; none now: the last status's. */
function fields(cr: IpGroupResource, group: ManagerIpGroup | undefined): IpGroupStatus {
  if (group) return { addresses: group.addresses, size: group.size, used: group.used };
  return {
    ...(cr.status?.addresses ? { addresses: cr.status.addresses } : {}),
    ...(cr.status?.size !== undefined ? { size: cr.status.size, used: cr.status.used } : {}),
  };
}

function ready(group: ManagerIpGroup): string {
  return `IP group ${group.tenant}/${group.name} holds ${group.size} address(es) of network ${group.networkTenant}/${group.network}, ${group.used} in use`;
}
