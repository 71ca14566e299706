/**
 * The attacher in Kubernetes mode: before an ADD it reads the pod through the API (its annotations
 * choose the networks, its UID and owner the port IDs) and makes sure the namespace's tenant
 * exists, so a new namespace's first pod never waits for the monitor. A failed ADD is also told
 * to the pod's owner as a Warning event.
 */
import type { ManagerClient } from "@knitter/common";
import { Attacher, type AttacherDeps } from "./attach.ts";
import { CNI_CODE, CniError, type CniResult } from "@knitter/plugin/contract";
import { toCniError } from "./cni_errors.ts";
import type { KubePods } from "./kube_pods.ts";
import {
  type AgentRequest,
  checkAddRequest,
  type CniRequest,
  type KubePod,
} from "./pod_request.ts";

export const ATTACH_FAILED = "KnitterAttachFailed";

export class KubeAttacher extends Attacher {
  private readonly tenants = new Set<string>();

  constructor(
    deps: AttacherDeps,
    private readonly pods: KubePods,
    private readonly manager: ManagerClient,
  ) {
    super(deps);
    this.nodeName = deps.nodeName;
    this.log = deps.log;
  }

  private readonly nodeName: string;
  private readonly log: AttacherDeps["log"];

  override async add(req: CniRequest): Promise<CniResult> {
    // Malformed K8S_* arguments are refused before they name anything to the API.
    checkAddRequest(req);
    const namespace = req.args?.K8S_POD_NAMESPACE;
    const name = req.args?.K8S_POD_NAME;
    if (!namespace || !name) return await super.add(req);
    const ref = { namespace, name, uid: req.args?.K8S_POD_UID };
    try {
      const pod = await this.readPod(namespace, name, ref.uid);
      await this.ensureTenant(namespace);
      const enriched: AgentRequest = { ...req, kubePod: pod };
      return await super.add(enriched);
    } catch (err) {
      const e = toCniError(err, `Cannot attach pod ${namespace}/${name}`);
      this.pods.warn(ref, ATTACH_FAILED, e.message, this.nodeName).catch((why) =>
        this.log.warn("cannot record an event on the pod", {
          pod: `${namespace}/${name}`,
          error: String(why?.message ?? why),
        })
      );
      throw e;
    }
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
