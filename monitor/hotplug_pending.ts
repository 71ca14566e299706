/**
 * Hot-plug as the monitor sees it. The pod's node agent adds and removes a running pod's
 * interfaces when its `k8s.v1.cni.cncf.io/networks` changes (../agent/kubernetes/hotplug.ts); the
 * monitor cannot reach that agent, but it sees the result: the pod's ports at the manager. An
 * element of the annotation that has no port of the pod for `pendingMs` (the agent is down, cannot
 * read the API, or keeps failing) becomes one Warning event `KnitterHotplugPending` on the pod,
 * naming the interfaces, the node and what to do; the agent does it once it can, and the event is
 * said again only when what is missing changes. A pod with no port yet (its ADD is under way or
 * failed: the agent's own event says so) is left alone.
 */
import {
  AnnotationError,
  type Clock,
  type Logger,
  parsePodAnnotations,
  type Port,
  systemClock,
} from "@knitter/common";
import type { Kube } from "./kube.ts";

export const HOTPLUG_PENDING = "KnitterHotplugPending";

type PodRef = { namespace: string; name: string; uid: string };

/** The pod's primary interface, which its ADD makes and hot-plug never touches. */
const PRIMARY_IFNAME = "eth0";

export class HotplugPending {
  /** By pod UID: what is missing and since when. */
  private readonly since = new Map<string, { missing: string; at: number }>();
  /** By pod UID: what was told. */
  private readonly told = new Map<string, string>();

  constructor(
    private readonly kube: Pick<Kube, "podEvent">,
    private readonly pendingMs: number,
    private readonly log: Logger,
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Tells what the pod still misses once it has waited `pendingMs`; answers in how many ms to look
   * again (undefined: nothing is missing, or it was told).
   */
  async check(
    ref: PodRef,
    node: string,
    annotations: Record<string, string>,
    ports: Port[],
  ): Promise<number | undefined> {
    const missing = ports.length > 0 ? missingOf(annotations, ports) : "";
    if (missing === "") return void this.forget(ref.uid);
    const was = this.since.get(ref.uid);
    if (was?.missing !== missing) this.since.set(ref.uid, { missing, at: this.clock.now() });
    const waited = this.clock.now() - this.since.get(ref.uid)!.at;
    if (waited < this.pendingMs) return this.pendingMs - waited;
    if (this.told.get(ref.uid) === missing) return undefined;
    const seconds = Math.round(waited / 1000);
    await this.kube.podEvent(
      ref,
      "Warning",
      HOTPLUG_PENDING,
      `The pod's network annotation asks for ${missing}, not attached after ${seconds} s: the Knitter agent on node ${node} adds them to the running pod and has not (it is down, cannot read the Kubernetes API, or keeps failing: see its events on this pod and its log). It is done once the agent can.`,
    );
    this.told.set(ref.uid, missing);
    this.log.warn("hot-plug pending", { pod: `${ref.namespace}/${ref.name}`, node, missing });
    return undefined;
  }

  forget(uid: string): void {
    this.since.delete(uid);
    this.told.delete(uid);
  }
}

/**
 * The annotation's elements no port of the pod stands for, as "net5 (network data), network
 * media" ("" for none). A named element wants a port of that interface on its network; an
 * unnamed one any other port of its network. An element the agent refuses in a running pod (an
 * IP group, the primary interface) is the agent's to say, not missing here.
 */
function missingOf(annotations: Record<string, string>, ports: Port[]): string {
  let asked;
  try {
    asked = parsePodAnnotations(annotations);
  } catch (err) {
    if (err instanceof AnnotationError) return "";
    throw err;
  }
  if (asked?.format !== "multus") return "";
  const free = ports.filter((p) => p.interface !== PRIMARY_IFNAME);
  const take = (match: (p: Port) => boolean) => {
    const i = free.findIndex(match);
    if (i >= 0) free.splice(i, 1);
    return i >= 0;
  };
  const wanted = asked.networks.filter((w) =>
    w.ipGroup === undefined && w.ifName !== PRIMARY_IFNAME
  );
  const named = wanted.filter((w) => w.ifName !== undefined)
    .filter((w) => !take((p) => p.interface === w.ifName && p.network === w.network))
    .map((w) => `${w.ifName} (network ${w.network})`);
  const unnamed = wanted.filter((w) => w.ifName === undefined)
    .filter((w) => !take((p) => p.network === w.network))
    .map((w) => `an interface on network ${w.network}`);
  return [...named, ...unnamed].join(", ");
}
