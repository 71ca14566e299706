/**
 * KubeVirt's live migrations (`VirtualMachineInstanceMigration`, kubevirt.io/v1) into the manager's
 * activation of the target's ports (issue 26; ../docs/concepts.md, "A live migration, step by
 * step"). The agent on the target's node activates a port as soon as the guest sends from it; the
 * monitor is the second way, for a guest that stays silent: once the migration's state says the
 * target runs the VM (`status.migrationState.targetNodeDomainDetected` or `completed`, and not
 * `failed`; or `status.phase` Succeeded), every port of the target pod (`migrationState.targetPod`)
 * that is bound to a claim and not active is activated. Activation is idempotent at the manager, so
 * the agent's and the monitor's may cross. A failed or unfinished migration activates nothing: the
 * source keeps the traffic.
 */
import type { Logger, ManagerClient, Port } from "@knitter/common";

/** The API of the kind (KubeVirt's; the monitor installs no CRD for it). */
export const KUBEVIRT_MIGRATION = {
  group: "kubevirt.io",
  version: "v1",
  plural: "virtualmachineinstancemigrations",
} as const;

/** The fields of a VirtualMachineInstanceMigration the monitor reads (KubeVirt's published API). */
export interface VmiMigration {
  metadata: { name: string; namespace: string };
  spec?: { vmiName?: string };
  status?: {
    phase?: string;
    migrationState?: {
      targetPod?: string;
      targetNode?: string;
      targetNodeDomainDetected?: boolean;
      completed?: boolean;
      failed?: boolean;
    };
  };
}

/** The pod that runs the VM now, when the migration says the target does; else undefined. */
export function runningTarget(m: VmiMigration): string | undefined {
  const state = m.status?.migrationState;
  if (!state?.targetPod || state.failed === true || m.status?.phase === "Failed") return undefined;
  const runs = state.targetNodeDomainDetected === true || state.completed === true ||
    m.status?.phase === "Succeeded";
  return runs ? state.targetPod : undefined;
}

/** Activates the inactive claim ports of a migration's target pod once it runs the VM. */
export class MigrationActivator {
  constructor(private readonly manager: ManagerClient, private readonly log: Logger) {}

  async reconcile(m: VmiMigration | undefined): Promise<void> {
    if (!m) return;
    const pod = runningTarget(m);
    if (!pod) return;
    const { namespace, name } = m.metadata;
    const ports = await this.manager.listPorts({ pod: `${namespace}/${pod}` });
    for (const p of ports.filter(waiting)) {
      await this.manager.activatePort(p.tenant, p.network, p.id);
      this.log.info("migration target's port activated", {
        migration: `${namespace}/${name}`,
        pod: `${namespace}/${pod}`,
        port: p.id,
        claim: p.claim,
      });
    }
  }
}

/** A claim's port that does not have the claim's traffic yet. */
function waiting(p: Port): boolean {
  return p.claim !== undefined && p.active === false;
}
