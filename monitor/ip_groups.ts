/**
 * IPGroup resources into the manager's IP groups: created from the spec, grown or shrunk when its
 * addresses or size change (addresses in use stay), deleted with the resource once none is in use.
 * The status lists the group's addresses and the ports using them.
 */
import type { Logger, ManagerClient } from "@knitter/common";
import { readyCondition } from "./conditions.ts";
import { type IpGroupResource, type IpGroupStatus, PLURAL } from "./crd_types.ts";
import type { Kube } from "./kube.ts";
import type { Tenants } from "./namespaces.ts";
import {
  ensureFinalizer,
  managerRecord,
  type Problem,
  problemOf,
  releaseAtManager,
  tenantPath,
  writeStatus,
} from "./resources.ts";
import { Requeue } from "./work_queue.ts";

export interface ManagerIpGroup {
  name: string;
  tenant: string;
  network: string;
  networkTenant: string;
  size: number;
  used: number;
  addresses: { ip: string; port?: string }[];
}

export class IpGroupReconciler {
  constructor(
    private readonly kube: Kube,
    private readonly manager: ManagerClient,
    private readonly tenants: Tenants,
    private readonly retryMs: number,
    private readonly log: Logger,
  ) {}

  async reconcile(cr: IpGroupResource | undefined): Promise<void> {
    if (!cr) return;
    if (cr.metadata.deletionTimestamp) return await this.finalize(cr);
    await ensureFinalizer(this.kube, PLURAL.ipGroup, cr);
    const { namespace, name } = cr.metadata;
    const spec = cr.spec;
    let group: ManagerIpGroup | undefined;
    let problem: Problem | undefined;
    try {
      await this.tenants.ensure(namespace);
      group = await managerRecord<ManagerIpGroup>(this.manager, path(namespace, name));
      if (!group) {
        group = await this.manager.request<ManagerIpGroup>("POST", base(namespace), {
          name,
          network: spec.network,
          ...(spec.addresses ? { addresses: spec.addresses } : {}),
          ...(spec.size !== undefined ? { size: spec.size } : {}),
        });
        this.log.info("IP group created", { group: `${namespace}/${name}`, size: group.size });
      } else if (spec.network !== group.network) {
        problem = {
          reason: "ImmutableFieldChanged",
          message:
            `network (is "${group.network}", the spec asks "${spec.network}") cannot change after creation; put it back, or create a new IPGroup`,
        };
      } else {
        const change = resize(spec, group);
        if (change) {
          group = await this.manager.request<ManagerIpGroup>("PUT", path(namespace, name), change);
          this.log.info("IP group resized", { group: `${namespace}/${name}`, size: group.size });
        }
      }
    } catch (err) {
      problem = problemOf(err);
    }
    await writeStatus(this.kube, PLURAL.ipGroup, cr, statusOf(cr, group, problem));
    if (problem) throw new Requeue(this.retryMs, problem.message);
  }

  private async finalize(cr: IpGroupResource): Promise<void> {
    const { namespace, name } = cr.metadata;
    await releaseAtManager({
      kube: this.kube,
      manager: this.manager,
      plural: PLURAL.ipGroup,
      path: path(namespace, name),
      refused: (problem) => statusOf(cr, undefined, problem),
      retryMs: this.retryMs,
      log: this.log,
      what: "IP group",
    }, cr);
  }
}

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

function statusOf(
  cr: IpGroupResource,
  group: ManagerIpGroup | undefined,
  problem: Problem | undefined,
): IpGroupStatus {
  const generation = cr.metadata.generation;
  const status: IpGroupStatus = group
    ? { addresses: group.addresses, size: group.size, used: group.used }
    : {
      ...(cr.status?.addresses ? { addresses: cr.status.addresses } : {}),
      ...(cr.status?.size !== undefined ? { size: cr.status.size, used: cr.status.used } : {}),
    };
  if (generation !== undefined) status.observedGeneration = generation;
  status.conditions = readyCondition(
    cr.status?.conditions,
    !problem,
    problem?.reason ?? "Reconciled",
    problem?.message ??
      `IP group ${group!.tenant}/${group!.name} holds ${group!.size} address(es) of network ${
        group!.networkTenant
      }/${group!.network}, ${group!.used} in use`,
    generation,
  );
  return status;
}
