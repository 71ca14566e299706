/**
 * Hot-plug: a change of a running pod's `k8s.v1.cni.cncf.io/networks` adds or removes interfaces
 * in the pod, on the pod's own node, by the same attach path as `knitctl attach`
 * (../extra/extra_interface.ts: journalled, rolled back on failure, the port released on removal).
 *
 * The agent follows its node's pods (node_pod_watch.ts) and reconciles one pod at a time through
 * a keyed queue: edits made while a pod waits coalesce into one run, which reads the latest
 * annotation; a failed run is retried with backoff. The tenant is the pod's namespace and a
 * network name is looked up in it, then among the public networks, as for the pod's CNI ADD, so
 * an annotation never reaches another tenant's private network. Each interface added or removed is
 * a Normal event on the pod; a failure (the manager, the network) a Warning event
 * `KnitterHotplugFailed`, and what a running pod cannot get `KnitterHotplugRefused`, each said
 * once per change of its text. The ports show in the pod's network-status, which the monitor
 * rewrites from the manager's ports.
 */
import {
  type AnnotatedNetwork,
  AnnotationError,
  type Logger,
  NETWORK_STATUS,
  parsePodAnnotations,
  Requeue,
  resolveAnnotated,
  WorkQueue,
  wroteStatus,
} from "@knitter/common";
import type { ExtraInterfaces } from "../extra/extra_interface.ts";
import type { ExtraInterface } from "../extra/extra_interface_store.ts";
import { PRIMARY_IFNAME } from "../cni/pod_request.ts";
import { type Attachment, isExtraContainer } from "../state.ts";
import type { KubePods, NodePod } from "./kube_pods.ts";
import type { NodePodHandler } from "./node_pod_watch.ts";
import { type HotplugPlan, planHotplug, type PodInterface } from "./hotplug_plan.ts";

export const HOTPLUG_ATTACHED = "KnitterHotplugAttached";
export const HOTPLUG_DETACHED = "KnitterHotplugDetached";
export const HOTPLUG_FAILED = "KnitterHotplugFailed";
export const HOTPLUG_REFUSED = "KnitterHotplugRefused";

/** A pod whose CNI ADD has not finished yet is looked at again after this. */
const ADD_PENDING_MS = 2000;

export interface HotplugDeps {
  nodeName: string;
  defaultNetwork?: string;
  extra: Pick<ExtraInterfaces, "attach" | "detachRecord" | "records">;
  attachments: () => Iterable<Readonly<Attachment>>;
  pods: Pick<KubePods, "event">;
  log: Logger;
}

export class Hotplug implements NodePodHandler {
  /** The node's pods as the watch last said, by "namespace/name". */
  private readonly pods = new Map<string, NodePod>();
  /** The last Warning text told per pod and reason (one event per change of it). */
  private readonly told = new Map<string, string>();
  readonly queue: WorkQueue;

  constructor(private readonly d: HotplugDeps) {
    this.queue = new WorkQueue("hotplug", (key) => this.reconcile(key), 2, d.log);
  }

  listed(pods: NodePod[]): void {
    const gone = new Set(this.pods.keys());
    this.pods.clear();
    for (const p of pods) {
      const key = keyOf(p);
      this.pods.set(key, p);
      gone.delete(key);
      this.queue.add(key);
    }
    for (const key of gone) this.queue.add(key);
    // A pod deleted while nobody watched leaves hot-plugged interfaces named after it.
    void this.d.extra.records().then((all) => {
      for (const x of all) if (x.hotplug && x.pod && !this.pods.has(x.pod)) this.queue.add(x.pod);
    }).catch(() => {/* the next list looks again */});
  }

  changed(pod: NodePod, type: "ADDED" | "MODIFIED" | "DELETED"): void {
    const key = keyOf(pod);
    if (type === "DELETED") this.pods.delete(key);
    else this.pods.set(key, pod);
    this.queue.add(key);
  }

  /** Stops taking pods, and waits for a reconcile under way. */
  async stop(): Promise<void> {
    this.queue.stop();
    await this.queue.idle();
  }

  /** Makes the pod's hot-plugged interfaces what its annotation asks, as far as it can. */
  private async reconcile(key: string): Promise<void> {
    const pod = this.pods.get(key);
    const sandbox = pod && !pod.deleting ? this.sandboxOf(pod) : undefined;
    const plugged = (await this.d.extra.records()).filter((x) => x.hotplug && x.pod === key);
    // A pod gone, being deleted, replaced (another UID), without a sandbox here (its DEL ran: a
    // pod that completed) or in a new one (another netns: its ADD made what the annotation asks)
    // keeps no hot-plugged interface of before; an attach that was interrupted (the agent
    // stopped) is undone, and made again if still asked.
    const stale = (x: ExtraInterface) =>
      !sandbox || x.hotplug!.uid !== pod!.uid || x.status !== "ready" ||
      (sandbox.ready && !inNetns(x, sandbox.attachments[0]));
    for (const x of plugged.filter(stale)) {
      await this.d.extra.detachRecord(x.id, "its pod or sandbox is gone");
    }
    if (!pod || pod.deleting) {
      for (const k of [...this.told.keys()]) if (k.startsWith(`${key} `)) this.told.delete(k);
      return;
    }
    if (!sandbox?.ready) {
      // Not attached here (yet): its ADD reads the annotation itself; one that is under way may
      // have read an older one, so look again once it is done.
      if (sandbox) throw new Requeue(ADD_PENDING_MS);
      return;
    }
    const wanted = this.wanted(pod);
    if (wanted === undefined) return;
    const have = interfacesOf(sandbox.attachments, plugged.filter((x) => !stale(x)));
    const plan = planHotplug(wanted, have, PRIMARY_IFNAME);
    await this.tell(pod, HOTPLUG_REFUSED, plan.refused.join("; "));
    await this.carryOut(pod, plan);
  }

  /**
   * The pod's CNI attachments on this node of its newest sandbox (a sandbox made anew has another
   * container ID; the old one's records stay until its DEL or the reaper), and whether it is ready.
   */
  private sandboxOf(
    pod: NodePod,
  ): { attachments: Readonly<Attachment>[]; ready: boolean } | undefined {
    const all = [...this.d.attachments()].filter((a) =>
      a.pod?.uid === pod.uid && !isExtraContainer(a.containerId)
    );
    const newest = all.sort((a, b) => b.createdAt.localeCompare(a.createdAt))[0];
    if (!newest) return undefined;
    const attachments = all.filter((a) => a.containerId === newest.containerId);
    return { attachments, ready: attachments.every((a) => a.status === "ready") };
  }

  /**
   * The annotation's elements; undefined when hot-plug has nothing to say: a malformed
   * annotation (the monitor reports it), Knitter's own `networks` format (it names every
   * interface of the pod's start), a status Multus writes (Multus, and its dynamic networks
   * controller, own the pod's attachments).
   */
  private wanted(pod: NodePod): AnnotatedNetwork[] | undefined {
    const a = pod.annotations;
    if (a[NETWORK_STATUS] !== undefined && !wroteStatus(a)) return undefined;
    try {
      const asked = parsePodAnnotations(a);
      if (asked === undefined) return [];
      if (asked.format !== "multus") return undefined;
      // Checks names, duplicates and the default route as the pod's ADD does.
      resolveAnnotated(asked, {
        primaryIfName: PRIMARY_IFNAME,
        defaultNetwork: this.d.defaultNetwork ?? "default",
      });
      return asked.networks;
    } catch (err) {
      if (err instanceof AnnotationError) return undefined;
      throw err;
    }
  }

  /** Removals first (a name may be reused), then additions; a failure is told and retried. */
  private async carryOut(pod: NodePod, plan: HotplugPlan): Promise<void> {
    const key = keyOf(pod);
    const failures: string[] = [];
    for (const d of plan.detach) {
      try {
        await this.d.extra.detachRecord(d.id, "no longer in the pod's network annotation");
        await this.note(pod, HOTPLUG_DETACHED, `${d.ifName} removed, its port released`);
      } catch (err) {
        failures.push(`cannot remove ${d.ifName}: ${messageOf(err)}`);
      }
    }
    for (const a of plan.attach) {
      try {
        const { view } = await this.d.extra.attach({
          pod: key,
          ifName: a.ifName,
          network: a.network,
          tenant: pod.namespace,
          ...(a.ip !== undefined ? { ip: a.ip } : {}),
          ...(a.mac !== undefined ? { mac: a.mac } : {}),
          routes: [],
        }, { uid: pod.uid });
        await this.note(
          pod,
          HOTPLUG_ATTACHED,
          `${a.ifName} added on network ${a.network}: ${view.address ?? ""} ${view.mac}`,
        );
      } catch (err) {
        failures.push(`cannot add ${a.ifName} on network ${a.network}: ${messageOf(err)}`);
      }
    }
    const failed = failures.join("; ");
    await this.tell(pod, HOTPLUG_FAILED, failed && `${failed} (retried)`);
    if (failed) throw new Error(`hot-plug of pod ${key}: ${failed}`);
  }

  /** A Warning event, once per change of its text; an empty text forgets the last one. */
  private async tell(pod: NodePod, reason: string, text: string): Promise<void> {
    const at = `${keyOf(pod)} ${reason}`;
    if (!text) return void this.told.delete(at);
    if (this.told.get(at) === text) return;
    await this.event(pod, "Warning", reason, text);
    this.told.set(at, text);
  }

  private note(pod: NodePod, reason: string, text: string): Promise<void> {
    return this.event(pod, "Normal", reason, text);
  }

  private async event(pod: NodePod, type: "Normal" | "Warning", reason: string, text: string) {
    try {
      await this.d.pods.event(pod, type, reason, text, this.d.nodeName);
    } catch (err) {
      this.d.log.warn("cannot record an event on the pod", {
        pod: keyOf(pod),
        reason,
        error: messageOf(err),
      });
    }
  }
}

/** What the pod has: its CNI ADDs' interfaces (delegated ones too), then the hot-plugged ones. */
function interfacesOf(
  attachments: Readonly<Attachment>[],
  plugged: ExtraInterface[],
): PodInterface[] {
  const own = attachments.flatMap((a) => [
    ...a.interfaces.map((i) => ({ ifName: i.ifName, network: i.network })),
    ...(a.delegates ?? []).map((i) => ({ ifName: i.ifName, network: i.network })),
  ]);
  const hot = plugged.map((x): PodInterface => ({
    ifName: x.ifName,
    network: x.network ?? "",
    hotplug: {
      id: x.id,
      ...(typeof x.request.ip === "string" ? { ip: x.request.ip } : {}),
      ...(typeof x.request.mac === "string" ? { mac: x.request.mac } : {}),
    },
  }));
  return [...own, ...hot];
}

/** Whether a hot-plugged interface is in the attachment's netns (by identity when both know it). */
function inNetns(x: ExtraInterface, a: Readonly<Attachment>): boolean {
  if (x.netnsId && a.netnsId) return x.netnsId === a.netnsId;
  return x.netns === a.netns;
}

function keyOf(pod: { namespace: string; name: string }): string {
  return `${pod.namespace}/${pod.name}`;
}

function messageOf(err: unknown): string {
  return String((err as Error)?.message ?? err);
}
