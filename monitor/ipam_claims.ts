/**
 * IPAMClaim resources (k8s.cni.cncf.io/v1alpha1, the Network Plumbing Working Group's API, as
 * KubeVirt makes them for a VM's interfaces) into the manager's claims: the claim is made when the
 * resource appears, on its `spec.network` in its namespace's tenant, with the resource's name; a
 * pod whose network selection element names it (`ipam-claim-reference`) gets its address and MAC
 * on any node (the agent passes the name with the port). The status shows `ips` (with their
 * prefix) and `ownerPod` (the pod of the claim's active port). When the resource goes (its VM's
 * garbage collection), the claim is deleted once no pod has it, and its address waits out the
 * manager's quarantine; meanwhile the refusal is the Ready condition and it is tried again.
 */
import type { Claim } from "@knitter/common";
import type { CrKind } from "./cr_reconciler.ts";
import { IPAM_CLAIM, type IpamClaimResource, type IpamClaimStatus } from "./crd_types.ts";
import { managerRecord, type Problem, Refusal, tenantPath } from "./resources.ts";

/** A claim as the manager answers it (manager/schemas.ts Claim). */
type ManagerClaim = Claim;

/** The IPAMClaim kind (cr_reconciler.ts). */
export const ipamClaimKind: CrKind<IpamClaimResource, ManagerClaim> = {
  plural: IPAM_CLAIM.plural,
  api: { group: IPAM_CLAIM.group, version: IPAM_CLAIM.version },
  // The community's status has no observedGeneration: a server with its CRD would prune it.
  observedGeneration: false,
  what: "IPAM claim",
  refuse(cr) {
    if (!cr.spec.ipRequests?.length) return;
    throw new Refusal(
      "IPRequestsNotSupported",
      `spec.ipRequests (${
        cr.spec.ipRequests.join(", ")
      }) is not supported: Knitter gives a claim the next free address of its network; leave ipRequests out, or give pods fixed addresses another way (ips in the network selection, an IPGroup)`,
    );
  },
  find: (cr, { manager }) => managerRecord<ManagerClaim>(manager, path(cr)),
  async create(cr, { manager, log }) {
    const { namespace, name } = cr.metadata;
    const collection = tenantPath(
      `networks/${encodeURIComponent(cr.spec.network)}/claims`,
      namespace,
    );
    const claim = await manager.request<ManagerClaim>("POST", collection, { name });
    log.info("IPAM claim made", { claim: `${namespace}/${name}`, address: claim.address });
    return claim;
  },
  // spec.network cannot change (the CRD says so): what is there is all there is.
  update: (_cr, claim) => Promise.resolve({ record: claim }),
  async release(cr, { manager }) {
    await manager.request("DELETE", path(cr));
    return true;
  },
  fields: (cr, claim) => ({ ...fields(cr, claim) }),
  ready: (c) =>
    `Claim holds ${
      [c.address, c.address6].filter(Boolean).join(" and ")
    } and MAC ${c.mac} of network ${c.networkTenant}/${c.network}; ${
      c.ports.length === 0 ? "no pod has it" : `${c.ports.length} pod(s) have it`
    }`,
  refusedRelease: (p: Problem) => ({
    reason: p.reason,
    message: `${p.message}; the claim keeps its address until then`,
  }),
};

/** The manager's path of the resource's claim. */
function path(cr: IpamClaimResource): string {
  const { namespace, name } = cr.metadata;
  return tenantPath(
    `networks/${encodeURIComponent(cr.spec.network)}/claims`,
    namespace,
    name,
  );
}

/**
 * `ips` and `ownerPod` as the claim has them (the status requires both: "" for no pod); no claim
 * now: the last status's.
 */
function fields(cr: IpamClaimResource, c: ManagerClaim | undefined): IpamClaimStatus {
  if (!c) return { ips: cr.status?.ips ?? [], ownerPod: cr.status?.ownerPod ?? "" };
  return {
    ips: [c.address, ...(c.address6 ? [c.address6] : [])],
    ownerPod: c.ports.find((p) => p.active)?.pod?.name ?? "",
  };
}
