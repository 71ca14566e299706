/**
 * What a change of a running pod's `k8s.v1.cni.cncf.io/networks` asks of its node: the interfaces
 * to add and to remove, and what cannot be done in a running pod (said in an event). Pure: the
 * pod's annotation elements against the interfaces it has.
 *
 * An element that names its interface (`data@net3`) is that interface. One that does not is any
 * interface of its network the pod has, preferably the `netN` its position gives (as at the pod's
 * start); a new one takes the next free `netN`, so that adding or removing an element never
 * renames the pod's other interfaces.
 */
import type { AnnotatedNetwork } from "@knitter/common";

/** An interface the pod has: made by its CNI ADD, or hot-plugged (then what was asked of it). */
export interface PodInterface {
  ifName: string;
  network: string;
  /** Hot-plugged: its record's ID, and the fixed address and MAC it was asked with. */
  hotplug?: { id: string; ip?: string; mac?: string };
}

/** One interface to add: the element's network, address and MAC, on `ifName`. */
export interface PlannedAttach {
  ifName: string;
  network: string;
  ip?: string;
  mac?: string;
}

export interface HotplugPlan {
  /** Hot-plugged interfaces to remove (first: an interface name may be reused by an add). */
  detach: { ifName: string; id: string }[];
  attach: PlannedAttach[];
  /** What the annotation asks that a running pod cannot get, each a sentence. */
  refused: string[];
}

export function planHotplug(
  wanted: AnnotatedNetwork[],
  have: PodInterface[],
  primaryIfName: string,
): HotplugPlan {
  const plan: HotplugPlan = { detach: [], attach: [], refused: [] };
  const current = have.filter((i) => i.ifName !== primaryIfName);
  const kept = new Set<string>();
  const used = new Set([primaryIfName, ...have.map((i) => i.ifName)]);
  for (const w of wanted) if (w.ifName) used.add(w.ifName);
  const unnamed: { w: AnnotatedNetwork; position: string }[] = [];
  wanted.forEach((w, i) => {
    if (refuse(w, plan, primaryIfName)) return;
    if (!w.ifName) return unnamed.push({ w, position: `net${i + 1}` });
    const c = current.find((c) => c.ifName === w.ifName);
    if (c && fits(c, w)) return kept.add(c.ifName);
    if (c && !c.hotplug) {
      kept.add(c.ifName);
      plan.refused.push(
        `${c.ifName} is on network ${c.network} since the pod started; a running pod's own interfaces cannot change: name another interface for ${w.network}, or recreate the pod`,
      );
      return;
    }
    add(plan, w, w.ifName);
  });
  for (const { w, position } of unnamed) {
    const free = (c: PodInterface) => !kept.has(c.ifName) && fits(c, w);
    const c = current.find((c) => free(c) && c.ifName === position) ?? current.find(free);
    if (c) {
      kept.add(c.ifName);
      continue;
    }
    const ifName = nextFree(used);
    used.add(ifName);
    add(plan, w, ifName);
  }
  for (const c of current) {
    if (kept.has(c.ifName)) continue;
    if (c.hotplug) plan.detach.push({ ifName: c.ifName, id: c.hotplug.id });
    else {
      plan.refused.push(
        `${c.ifName} (network ${c.network}) was made when the pod started and stays until the pod is recreated: only hot-plugged interfaces can be removed`,
      );
    }
  }
  return plan;
}

/** Whether an element asks what a running pod cannot get; if so, says why in the plan. */
function refuse(w: AnnotatedNetwork, plan: HotplugPlan, primaryIfName: string): boolean {
  const what = `${w.network}${w.ifName ? `@${w.ifName}` : ""}`;
  if (w.ifName === primaryIfName) {
    plan.refused.push(`${what}: ${primaryIfName} is the pod's primary interface: name another`);
    return true;
  }
  if (w.ipGroup !== undefined) {
    plan.refused.push(
      `${what}: an address from IP group ${w.ipGroup} is taken only when the pod starts: recreate the pod, or ask for an address ("ips")`,
    );
    return true;
  }
  return false;
}

function fits(c: PodInterface, w: AnnotatedNetwork): boolean {
  if (c.network !== w.network) return false;
  // A hot-plugged interface asked with another address or MAC is made again.
  return !c.hotplug || (c.hotplug.ip === w.ip && c.hotplug.mac === w.mac);
}

function add(plan: HotplugPlan, w: AnnotatedNetwork, ifName: string): void {
  plan.attach.push({
    ifName,
    network: w.network,
    ...(w.ip !== undefined ? { ip: w.ip } : {}),
    ...(w.mac !== undefined ? { mac: w.mac } : {}),
  });
  if (w.defaultRoute) {
    plan.refused.push(
      `${ifName} (network ${w.network}) is added without the default route: a running pod keeps the one it started with`,
    );
  }
}

function nextFree(used: Set<string>): string {
  for (let n = 1;; n++) if (!used.has(`net${n}`)) return `net${n}`;
}
