/**
 * The manager's client as the agent uses it in Kubernetes mode. Ports of stable StatefulSet pods
 * (IDs from the pod's name, see pod_request.ts) outlive the pod: DEL leaves them, and the monitor
 * unbinds them when it sees the pod deleted and releases them when no pod of that name has come
 * back for a while. When the pod comes back its port binds to it, with the same address.
 */
import { isStablePortId, ManagerClient, ManagerError, type Port } from "@knitter/common";
import type { PortRequest } from "@knitter/common";
import { CNI_CODE, CniError } from "@knitter/plugin/contract";

const REBINDABLE = new Set(["pod", "node", "interface"]);

export class StablePortsClient extends ManagerClient {
  override async deletePort(tenant: string, network: string, id: string): Promise<boolean> {
    if (isStablePortId(id)) return false;
    return await super.deletePort(tenant, network, id);
  }

  override async putPort(
    tenant: string,
    network: string,
    id: string,
    body: PortRequest,
  ): Promise<Port> {
    try {
      return await super.putPort(tenant, network, id, body);
    } catch (err) {
      const held = err instanceof ManagerError && err.status === 409 &&
        REBINDABLE.has(err.field ?? "");
      if (!isStablePortId(id) || !held) throw err;
      // Held by the pod's previous incarnation. On this node, release it and take the same
      // address again; on another, the monitor unbinds it when it sees that pod deleted.
      const path = `/api/v1/tenants/${enc(tenant)}/networks/${enc(network)}/ports/${enc(id)}`;
      const old = await this.request<Port>("GET", path);
      if (old.node !== undefined && old.node !== body.node) {
        throw new CniError(
          CNI_CODE.tryAgainLater,
          `The stable address ${old.ip} of pod ${old.pod?.namespace}/${old.pod?.name} is still bound to its previous pod on node "${old.node}"; the monitor frees it once that pod is deleted, and a retry gets it`,
        );
      }
      await super.deletePort(tenant, network, id);
      // A claim's port gets the claim's address again by naming the claim alone.
      if (old.claim !== undefined) return await super.putPort(tenant, network, id, body);
      return await super.putPort(tenant, network, id, {
        ...body,
        ip: old.ip,
        ...(old.ipGroup ? { ipGroup: old.ipGroup } : {}),
      });
    }
  }
}

const enc = encodeURIComponent;
