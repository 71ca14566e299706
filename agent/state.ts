/**
 * Node-local state in Deno KV: what each attachment made (so DEL can undo it after a restart), and
 * the node-local numbers of networks and ports used in flows.
 */
import type { PodRef, Port } from "@knitter/common";
import { Mutex } from "@knitter/common";
import { dirname } from "node:path";

export interface AttachedInterface {
  /** Name inside the pod. */
  ifName: string;
  /** The veth end on the node, plugged into the bridge. */
  hostIfName: string;
  /** Port ID at the manager, and the path tenant it was asked under. */
  portId: string;
  tenant: string;
  network: string;
  /** The manager's answer; absent until the port is allocated. */
  port?: Port;
  /** OpenFlow port number on the bridge; absent until plugged. */
  ofport?: number;
  /** Node-local number of the port, in its flows' cookies. */
  cookie: number;
  defaultRoute: boolean;
}

export interface Attachment {
  containerId: string;
  /** CNI_IFNAME: the runtime names the attachment by (container, ifname). */
  ifName: string;
  netns: string;
  tenant: string;
  pod?: PodRef;
  /** "adding" until every step of ADD is done: a crash leaves a record DEL can undo from. */
  status: "adding" | "ready";
  interfaces: AttachedInterface[];
  /** The CNI result answered to ADD (1.1.0 form). */
  result?: unknown;
  createdAt: string;
}

export class AgentState {
  /** One process owns the file: numbering runs one at a time instead of racing on a counter. */
  private readonly numbering = new Mutex();
  private readonly networkNumbers = new Map<string, number>();

  private constructor(private readonly kv: Deno.Kv) {}

  static async open(dir: string): Promise<AgentState> {
    const path = dir === ":memory:" ? dir : `${dir}/agent.kv`;
    if (path !== ":memory:") await Deno.mkdir(dirname(path), { recursive: true });
    return new AgentState(await Deno.openKv(path));
  }

  async getAttachment(containerId: string, ifName: string): Promise<Attachment | null> {
    return (await this.kv.get<Attachment>(["attachment", containerId, ifName])).value;
  }

  async putAttachment(a: Attachment): Promise<void> {
    await this.kv.set(["attachment", a.containerId, a.ifName], a);
  }

  async deleteAttachment(containerId: string, ifName: string): Promise<void> {
    await this.kv.delete(["attachment", containerId, ifName]);
  }

  async listAttachments(): Promise<Attachment[]> {
    const out: Attachment[] = [];
    for await (const e of this.kv.list<Attachment>({ prefix: ["attachment"] })) out.push(e.value);
    return out;
  }

  /** The node-local number of a network (by its manager ID), allocated once and kept. */
  async networkNumber(networkId: string): Promise<number> {
    const known = this.networkNumbers.get(networkId);
    if (known !== undefined) return known;
    const n = await this.number(["network_number", networkId], "network");
    this.networkNumbers.set(networkId, n);
    return n;
  }

  /** `count` fresh node-local port numbers, in one commit. */
  async portNumbers(count: number): Promise<number[]> {
    const last = await this.number(null, "port", count);
    return Array.from({ length: count }, (_, i) => last - count + 1 + i);
  }

  /** Advances a counter by `step` (storing the result under `key` too) and returns it. */
  private number(key: Deno.KvKey | null, counter: string, step = 1): Promise<number> {
    return this.numbering.run(async () => {
      if (key) {
        const have = await this.kv.get<number>(key);
        if (have.value !== null) return have.value;
      }
      const next = ((await this.kv.get<number>(["counter", counter])).value ?? 0) + step;
      const op = this.kv.atomic().set(["counter", counter], next);
      if (key) op.set(key, next);
      await op.commit();
      return next;
    });
  }

  close(): void {
    this.kv.close();
  }
}
