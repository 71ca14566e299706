/**
 * The pod networks of Kubernetes mode, for the attacher (attach.ts `podNetworks`): before an ADD
 * it reads the pod through the API (its annotations choose the networks, its UID and owner the
 * port IDs) and makes sure the namespace's tenant exists, so a new namespace's first pod never
 * waits for the monitor. A failed ADD is also told to the pod's owner as a Warning event.
 */
import type { Logger, ManagerClient } from "@knitter/common";
import type { PodNetworkSource } from "../cni/attach.ts";
import { CNI_CODE, CniError } from "@knitter/plugin/contract";
import { toCniError } from "../cni/cni_errors.ts";
import type { KubePods } from "./kube_pods.ts";
import type { AgentRequest, CniRequest, KubePod } from "../cni/pod_request.ts";

export const ATTACH_FAILED = "KnitterAttachFailed";

export class KubePodNetworks implements PodNetworkSource {
  private readonly tenants = new Set<string>();

  constructor(
    private readonly pods: Pick<KubePods, "get" | "warn">,
    private readonly manager: Pick<ManagerClient, "request">,
    private readonly nodeName: string,
    private readonly log: Logger,
  ) {}

  /** A request that names no pod (no K8S_POD_NAMESPACE, K8S_POD_NAME) is served as it is. */
  async resolve(req: CniRequest): Promise<AgentRequest> {
    const { namespace, name } = podOf(req);
    if (!namespace || !name) return req;
    const pod = await this.readPod(namespace, name, req.args?.K8S_POD_UID);
    await this.ensureTenant(namespace);
    return { ...req, kubePod: pod };
  }

  failed(req: CniRequest, err: unknown): unknown {
    const { namespace, name } = podOf(req);
    if (!namespace || !name) return err;
    const ref = { namespace, name, uid: req.args?.K8S_POD_UID };
    const e = toCniError(err, `Cannot attach pod ${namespace}/${name}`);
    this.pods.warn(ref, ATTACH_FAILED, e.message, this.nodeName).catch((why) =>
      this.log.warn("cannot record an event on the pod", {
        pod: `${namespace}/${name}`,
        error: String(why?.message ?? why),
      })
    );
    return e;
  }

  private async readPod(namespace: string, name: string, uid?: string): Promise<KubePod> {
    let pod: KubePod;
    try {
      pod = await this.pods.get(namespace, name);
    } catch (err) {
      throw new CniError(
        CNI_CODE.tryAgainLater,
        `Cannot read pod ${namespace}/${name} from the Kubernetes API: ${(err as Error).message}`,
      );
    }
    if (uid && pod.uid !== uid) {
      throw new CniError(
        CNI_CODE.tryAgainLater,
        `Pod ${namespace}/${name} in the API has UID ${pod.uid}, not ${uid}: it was replaced`,
      );
    }
    return pod;
  }

  private async ensureTenant(namespace: string): Promise<void> {
    if (this.tenants.has(namespace)) return;
    await this.manager.request("PUT", `/api/v1/tenants/${encodeURIComponent(namespace)}`);
    this.tenants.add(namespace);
  }
}

function podOf(req: CniRequest): { namespace?: string; name?: string } {
  return { namespace: req.args?.K8S_POD_NAMESPACE, name: req.args?.K8S_POD_NAME };
}
