/** Pods for end-to-end tests: a netns on a node, attached through the CNI runtime, and pinged. */
import { run } from "@knitter/common";
import { addPodNetns } from "../../devstack/sim_node.ts";
import type { Stack, StackNode } from "../../devstack/stack.ts";
import { type Attachment, type CniCall, CniRuntime, type ConfList } from "./cni_runtime.ts";

export interface Pod {
  name: string;
  node: StackNode;
  netns: string;
  containerId: string;
  list: ConfList;
  runtime: CniRuntime;
  args: Record<string, string>;
  /** What the runtime passes for this pod (a fresh copy each time). */
  attachment(): Attachment;
  add(): Promise<CniCall>;
  del(): Promise<CniCall>;
  check(): Promise<CniCall>;
}

/** A knitter conflist asking for `networks` (names or detailed requests), plus chained plugins. */
export function knitterList(
  networks: (string | Record<string, unknown>)[],
  chained: Record<string, unknown>[] = [],
  cniVersion = "1.1.0",
): ConfList {
  return { cniVersion, name: "knitter", plugins: [{ type: "knitter", networks }, ...chained] };
}

export async function makePod(
  node: StackNode,
  name: string,
  namespace: string,
  list: ConfList,
  /** containerId and podUid: random when absent; together they make the pod's port IDs. */
  opts: { runtimeConfig?: Record<string, unknown>; containerId?: string; podUid?: string } = {},
): Promise<Pod> {
  const netns = await addPodNetns(node.sim, name);
  const runtime = new CniRuntime(node.sim.netns, node.agentSocket);
  const containerId = opts.containerId ?? crypto.randomUUID().replaceAll("-", "");
  // As kubelet passes them; IgnoreUnknown lets the reference plugins accept the K8S_* keys.
  const args = {
    IgnoreUnknown: "1",
    K8S_POD_NAMESPACE: namespace,
    K8S_POD_NAME: name,
    K8S_POD_UID: opts.podUid ?? crypto.randomUUID(),
  };
  const att = (): Attachment => ({
    containerId,
    netns,
    ifName: "eth0",
    args,
    ...(opts.runtimeConfig ? { runtimeConfig: opts.runtimeConfig } : {}),
  });
  return {
    name,
    node,
    netns,
    containerId,
    list,
    runtime,
    args,
    attachment: att,
    add: () => runtime.add(list, att()),
    del: () => runtime.del(list, att()),
    check: () => runtime.check(list, att()),
  };
}

/** Whether `from` gets an echo reply from `ip` (a few tries, bounded by time). */
export async function pings(from: Pod, ip: string): Promise<boolean> {
  const r = await run([
    "ip",
    "netns",
    "exec",
    ipNetnsName(from.netns),
    "ping",
    "-c",
    "3",
    "-i",
    "0.2",
    "-W",
    "1",
    "-q",
    ip,
  ], {
    check: false,
  });
  return r.code === 0;
}

/**
 * One bounded ping from a netns (`extra`: e.g. `-I ADDRESS`): whether it was answered. Tests that
 * judge drops look at what arrives, not at this.
 */
export async function pingFrom(netns: string, ip: string, extra: string[] = []): Promise<boolean> {
  const r = await run(
    ["ip", "netns", "exec", netns, "ping", "-c", "2", "-i", "0.2", "-W", "1", ...extra, ip],
    { check: false },
  );
  return r.code === 0;
}

/** The address (no prefix) of the pod's interface `ifName` in a CNI result. */
// deno-lint-ignore no-explicit-any
export function addressOf(result: any, ifName = "eth0"): string {
  return addressesOf(result, ifName)[0].address.split("/")[0];
}

/** Every address (with prefix and gateway) of the pod's interface `ifName` in a CNI result. */
export function addressesOf(
  // deno-lint-ignore no-explicit-any
  result: any,
  ifName = "eth0",
): { address: string; gateway?: string }[] {
  const index = result.interfaces.findIndex((i: { name: string; sandbox?: string }) =>
    i.name === ifName && i.sandbox
  );
  const ips = result.ips.filter((i: { interface: number }) => i.interface === index);
  if (ips.length === 0) throw new Error(`no address for ${ifName} in ${JSON.stringify(result)}`);
  return ips.map(({ address, gateway }: { address: string; gateway?: string }) =>
    gateway === undefined ? { address } : { address, gateway }
  );
}

/**
 * Pods added by a test, with what later steps ask of them: each pod's eth0 address and the host
 * end of its veth, by pod name. `add` fails the test when the ADD does.
 */
export function podBook() {
  const ips: Record<string, string> = {};
  const hostEnds: Record<string, string> = {};
  const add = async (pod: Pod) => {
    const r = await pod.add();
    if (r.code !== 0) {
      throw new Error(`ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    }
    ips[pod.name] = addressOf(r.out);
    hostEnds[pod.name] = r.out.interfaces.find((i: { sandbox?: string }) => !i.sandbox).name;
  };
  return { ips, hostEnds, add };
}

export function ipNetnsName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/** Creates a tenant through the manager's API; the test fails if it cannot. */
export async function createTenant(stack: Stack, name: string): Promise<void> {
  const r = await stack.api("POST", "tenants", { name });
  if (r.status !== 201) throw new Error(`tenant ${name}: ${r.status} ${JSON.stringify(r.body)}`);
}

/** Creates a network (gateway: the CIDR's first address); answers the manager's record. */
export async function createNetwork(
  stack: Stack,
  tenant: string,
  name: string,
  cidr: string,
): Promise<{ id: string; mtu: number; segmentId?: number }> {
  const gateway = cidr.replace(/0\/\d+$/, "1");
  const r = await stack.api("POST", `tenants/${tenant}/networks`, { name, cidr, gateway });
  if (r.status !== 201) {
    throw new Error(`network ${tenant}/${name}: ${r.status} ${JSON.stringify(r.body)}`);
  }
  return r.body;
}
