/**
 * The node's record of extra interfaces (knitctl attach): what was made, so that detach can undo
 * it after an agent restart. A Deno KV file of its own next to the agent's state: the CNI journal
 * stays the attacher's alone.
 */
import type { Route } from "@knitter/common";
import { dirname } from "node:path";

export interface ExtraInterface {
  /** Random, stable: names the host end, and (network kind) the attachment and the port. */
  id: string;
  /** The netns as attach resolved it (a path), and its identity (device:inode) while it lives. */
  netns: string;
  netnsId: string;
  ifName: string;
  /** "namespace/name" when attached by pod: detach by pod still finds it once the pod is gone. */
  pod?: string;
  /**
   * Made by hot-plug (the pod's network annotation, ../kubernetes/hotplug.ts) for the pod of this
   * UID, not by an operator: hot-plug removes only these, and those of a pod that is gone.
   */
  hotplug?: { uid: string };
  kind: "network" | "bridge";
  /** "adding" until every step is done: a crash leaves something detach (or a retry) can undo. */
  status: "adding" | "ready";
  hostIfName: string;
  bridge: string;
  vlan?: number;
  /** network kind: the CNI-style attachment in the agent's state that carries the flows. */
  containerId?: string;
  tenant?: string;
  network?: string;
  portId?: string;
  /** With prefix, e.g. "10.1.0.5/24"; absent for a bridge interface without an address. */
  address?: string;
  /** A dual-stack network's IPv6 address, with prefix. */
  address6?: string;
  mac: string;
  mtu: number;
  routes: Route[];
  /** What was asked, to tell a repeated attach (same answer) from a conflicting one. */
  request: Record<string, unknown>;
  createdAt: string;
}

export class ExtraInterfaceStore {
  private constructor(private readonly kv: Deno.Kv) {}

  static async open(stateDir: string): Promise<ExtraInterfaceStore> {
    const path = stateDir === ":memory:" ? stateDir : `${stateDir}/extra_interfaces.kv`;
    if (path !== ":memory:") await Deno.mkdir(dirname(path), { recursive: true });
    return new ExtraInterfaceStore(await Deno.openKv(path));
  }

  async list(): Promise<ExtraInterface[]> {
    const out: ExtraInterface[] = [];
    for await (const e of this.kv.list<ExtraInterface>({ prefix: ["extra"] })) out.push(e.value);
    return out;
  }

  async put(x: ExtraInterface): Promise<void> {
    await this.kv.set(["extra", x.id], x);
  }

  async delete(id: string): Promise<void> {
    await this.kv.delete(["extra", id]);
  }

  close(): void {
    this.kv.close();
  }
}
