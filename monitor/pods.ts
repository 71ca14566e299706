/**
 * Pods as the monitor sees them: a malformed network annotation becomes a Warning event on the pod
 * (the agent refuses such a pod, so nothing is allocated); a scheduled pod's ports become its
 * network-status annotation, which goes again when its ports all go (a failed ADD rolled back),
 * unless Multus wrote it (STATUS_WRITER); a deleted pod's ports are released, by UID, so that a
 * new pod of the same name is never touched, and never the ports of a stable StatefulSet pod
 * (those outlive it).
 */
import {
  AnnotationError,
  isStablePortId,
  type Logger,
  type ManagerClient,
  ManagerError,
  NETWORK_STATUS,
  networkStatus,
  parsePodAnnotations,
  type Port,
  resolveAnnotated,
  STATUS_WRITER,
  statusMark,
  wroteStatus,
} from "@knitter/common";
import { type Kube, KubeError, type PodLike } from "./kube.ts";
import type { PortIndex } from "./port_index.ts";
import { Requeue, type WorkQueue } from "./work_queue.ts";
import type { HotplugPending } from "./hotplug_pending.ts";

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

export const INVALID_ANNOTATION = "InvalidNetworkAnnotation";
export class PodTracker {
  /** UID → "namespace/name" of every pod that exists. */
  readonly live = new Map<string, string>();
  /** Deleted pods whose ports are still to release, by UID. */
  private readonly gone = new Map<string, PodRef>();
  /** The annotation text already reported as malformed, by pod UID (one event per mistake). */
  private readonly reported = new Map<string, string>();
  /** Ports released, since start. */
  released = 0;
  eventsRecorded = 0;

  constructor(
    private readonly kube: Kube,
    private readonly manager: ManagerClient,
    private readonly ports: PortIndex,
    private readonly log: Logger,
    /** Says when a running pod's annotation asks for interfaces its agent has not added. */
    private readonly hotplug?: HotplugPending,
  ) {}

  // ---- informer handlers

  seen(pod: PodLike, queue: WorkQueue): void {
    const ref = refOf(pod);
    if (!ref) return;
    this.live.set(ref.uid, `${ref.namespace}/${ref.name}`);
    queue.add(`${ref.namespace}/${ref.name}`);
  }

  deleted(pod: PodLike, releases: WorkQueue): void {
    const ref = refOf(pod);
    if (!ref) return;
    this.live.delete(ref.uid);
    this.reported.delete(ref.uid);
    this.hotplug?.forget(ref.uid);
    this.gone.set(ref.uid, ref);
    releases.add(ref.uid);
  }

  // ---- reconcilers

  /**
   * Reports a malformed annotation once, else writes the network-status when it changed, and
   * tells of hot-plugged interfaces that do not come (looked at again until they do).
   */
  async reconcile(pod: PodLike | undefined): Promise<void> {
    const ref = pod && refOf(pod);
    if (!ref) return;
    await this.retireEarlier(ref);
    const annotations = pod.metadata?.annotations ?? {};
    const problem = annotationProblem(annotations);
    if (problem) {
      const text = JSON.stringify(annotations);
      if (this.reported.get(ref.uid) === text) return;
      // A running pod (it has ports) keeps what it has: hot-plug waits for a correct annotation.
      const running = this.ports.forPod(ref.uid).length > 0;
      await this.kube.podEvent(
        ref,
        "Warning",
        INVALID_ANNOTATION,
        running
          ? `${problem}. Nothing was changed in the running pod: correct the annotation.`
          : `${problem}. No network was attached: correct the annotation and create the pod again.`,
      );
      this.reported.set(ref.uid, text);
      this.eventsRecorded++;
      return;
    }
    if (!pod.spec?.nodeName) return;
    const ports = this.ports.forPod(ref.uid);
    await this.writeNetworkStatus(ref, annotations, ports);
    // Under Multus (its status), Multus and its dynamic networks controller own the attachments.
    if (annotations[NETWORK_STATUS] !== undefined && !wroteStatus(annotations)) return;
    const later = await this.hotplug?.check(ref, pod.spec.nodeName, annotations, ports);
    if (later !== undefined) throw new Requeue(later, "hot-plug pending");
  }

  private async writeNetworkStatus(
    ref: PodRef,
    annotations: Record<string, string>,
    ports: Port[],
  ): Promise<void> {
    const status = annotations[NETWORK_STATUS];
    // Someone else's (Multus'): never overwritten, never removed (STATUS_WRITER).
    if (status !== undefined && !wroteStatus(annotations)) return;
    let patch: Record<string, string | null>;
    if (ports.length > 0) {
      const value = JSON.stringify(networkStatus(ports));
      if (status === value && annotations[STATUS_WRITER] === statusMark(value)) return;
      patch = { [NETWORK_STATUS]: value, [STATUS_WRITER]: statusMark(value) };
    } else if (status !== undefined) {
      // Every port went (a failed ADD rolled back, its ports released): the status we wrote names
      // interfaces the pod does not have. It goes; the next ADD's ports write it again.
      patch = { [NETWORK_STATUS]: null, [STATUS_WRITER]: null };
    } else return;
    try {
      await this.kube.patchPodAnnotations(ref.namespace, ref.name, patch);
    } catch (err) {
      // Deleted meanwhile: its watch event is on its way, and with it the release.
      if (!(err instanceof KubeError && err.code === 404)) throw err;
    }
  }

  /**
   * Releases the ports of a deleted pod: those still bound to its UID. A stable port is unbound
   * instead: same address, no pod, no node, ready for the pod's next incarnation on any node.
   */
  async release(uid: string): Promise<void> {
    const ref = this.gone.get(uid);
    if (!ref) return;
    const listed = await this.manager.request<{ items: Port[] }>(
      "GET",
      `/api/v1/ports?pod=${encodeURIComponent(`${ref.namespace}/${ref.name}`)}`,
    );
    for (const p of listed.items) {
      if (p.pod?.uid !== uid) continue;
      if (isStablePortId(p.id)) await this.unbind(p);
      else await this.releasePort(p, "its pod was deleted");
    }
    this.gone.delete(uid);
  }

  /**
   * Ports still bound to an earlier pod of this name (another UID), as after a deletion the
   * monitor did not see: that pod is gone once a fresh read agrees (the memory's pod may itself
   * be the old one). Its ports are released, stable ones unbound for this pod to take.
   */
  private async retireEarlier(ref: PodRef): Promise<void> {
    const earlier = this.ports.forPodName(ref.namespace, ref.name).filter((p) =>
      p.pod?.uid !== undefined && p.pod.uid !== ref.uid
    );
    for (const uid of new Set(earlier.map((p) => p.pod!.uid!))) {
      if (await readVerdict(this.kube, ref, uid, this.log) !== "gone") continue;
      for (const p of earlier.filter((p) => p.pod!.uid === uid)) {
        if (isStablePortId(p.id)) await this.unbind(p);
        else await this.releasePort(p, `pod ${ref.namespace}/${ref.name} was replaced`);
      }
    }
  }

  /** Takes a stable port off its gone pod, keeping the address for the pod's next incarnation. */
  async unbind(p: Port): Promise<void> {
    try {
      await this.manager.unbindPort(p.tenant, p.network, p.id);
    } catch (err) {
      if (err instanceof ManagerError && err.status === 404) return;
      throw err;
    }
    this.log.info("stable port kept for the pod's next incarnation", { port: p.id, ip: p.ip });
  }

  async releasePort(p: Port, why: string): Promise<void> {
    if (await this.manager.deletePort(p.tenant, p.network, p.id)) {
      this.released++;
      this.log.info("released", { port: p.id, network: `${p.networkTenant}/${p.network}`, why });
    }
  }
}

/** What a fresh read from the API server says of a pod: gone, alive, or unknown (it failed). */
export type Verdict = "gone" | "alive" | "unknown";

/**
 * Reads the pod `namespace/name` from the API server: gone when it does not exist or (with `uid`)
 * another pod now has the name; unknown when the read fails, so that nothing is done on doubt.
 * With it, the pod read (when alive).
 */
export async function readPod(
  kube: Kube,
  ref: { namespace: string; name: string },
  uid: string | undefined,
  log: Logger,
): Promise<{ verdict: Verdict; pod?: PodLike }> {
  let pod: PodLike | undefined;
  try {
    pod = await kube.getPod(ref.namespace, ref.name);
  } catch (err) {
    log.warn("cannot read a pod to confirm it is gone; its ports are kept for now", {
      pod: `${ref.namespace}/${ref.name}`,
      error: String((err as Error)?.message ?? err),
    });
    return { verdict: "unknown" };
  }
  if (!pod) return { verdict: "gone" };
  if (uid !== undefined && pod.metadata?.uid !== uid) return { verdict: "gone" };
  return { verdict: "alive", pod };
}

export async function readVerdict(
  kube: Kube,
  ref: { namespace: string; name: string },
  uid: string | undefined,
  log: Logger,
): Promise<Verdict> {
  return (await readPod(kube, ref, uid, log)).verdict;
}

/** What is wrong with a pod's network annotations, or null. */
export function annotationProblem(annotations: Record<string, string>): string | null {
  try {
    const asked = parsePodAnnotations(annotations);
    // The agent's default network is not known here; any name checks the rest.
    if (asked) resolveAnnotated(asked, { primaryIfName: "eth0", defaultNetwork: "default" });
    return null;
  } catch (err) {
    if (err instanceof AnnotationError) return err.message;
    throw err;
  }
}

export function refOf(pod: PodLike): PodRef | undefined {
  const m = pod.metadata;
  if (!m?.name || !m.namespace || !m.uid) return undefined;
  return { namespace: m.namespace, name: m.name, uid: m.uid };
}
