/**
 * Node-local state in Deno KV: what each attachment made (so DEL can undo it after a restart), and
 * the node-local numbers of networks and ports used in flows.
 */
import type { Bandwidth, EffectiveBandwidth, NetworkDelegate, PodRef, Port } from "@knitter/common";
import type { CniResult } from "@knitter/plugin/contract";
import { Mutex } from "@knitter/common";
import { dirname } from "node:path";
import { serialize } from "node:v8";

/**
 * A manager port as an interface names it: the path's tenant and network, and its ID. Port IDs are
 * per tenant (on a public network two tenants may each have one of the same ID): the ID alone is
 * not a port.
 */
export type PortPath = Pick<AttachedInterface, "tenant" | "network" | "portId">;

export function samePort(a: PortPath, b: PortPath): boolean {
  return a.tenant === b.tenant && a.network === b.network && a.portId === b.portId;
}

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
  /** Bandwidth limits the runtime asked for (runtimeConfig.bandwidth), before the manager's. */
  bandwidth?: Bandwidth;
  /** The limits applied to the veth (port > runtimeConfig > network default); absent: none. */
  limits?: EffectiveBandwidth;
}

/**
 * Container IDs of the attachments of knitctl's extra interfaces (extra_interface.ts): never a
 * runtime's (those are hex or UUIDs), so CNI GC and the reaper leave them alone.
 */
export const EXTRA_CONTAINER_PREFIX = "knitctl-";

/** Whether a container ID is one of knitctl's extra interfaces. */
export function isExtraContainer(containerId: string): boolean {
  return containerId.startsWith(EXTRA_CONTAINER_PREFIX);
}

/**
 * One interface a delegate plugin makes (cni/delegates.ts), as the pod's attachment records it for
 * DEL and CHECK.
 */
export interface DelegatedInterface {
  ifName: string;
  network: string;
  tenant: string;
  delegate: NetworkDelegate;
  /** A fixed address or IP group for it, passed to the knitter IPAM. */
  ip?: string;
  ipGroup?: string;
  /** A claim whose address it gets, passed to the knitter IPAM (an IPAMClaim of the pod's). */
  claim?: string;
  /** The runtime's CNI_PATH at ADD: where the plugin and the knitter IPAM were found. */
  path: string;
  /** The plugin's ADD result, once made. */
  result?: CniResult;
}

export interface Attachment {
  containerId: string;
  /** CNI_IFNAME: the runtime names the attachment by (container, ifname). */
  ifName: string;
  netns: string;
  /** The netns's identity ("dev:inode") at ADD: a new sandbox at the same path is another netns. */
  netnsId?: string;
  tenant: string;
  pod?: PodRef;
  /**
   * "adding" until the manager's ports and the ofports are decided: a crash leaves a record DEL
   * can undo from. "building" once they and the result are (the write that runs alongside the
   * interfaces, switch ports and flows); the ADD is answered when that work is done, and the
   * record becomes "ready" after the answer. A crash in between leaves "building" for a pod its
   * runtime believes is up: at the agent's start one that has everything it names is completed as
   * ready (cni/settle.ts), any other stays for the runtime's DEL.
   */
  status: "adding" | "building" | "ready";
  interfaces: AttachedInterface[];
  /** The CNI result answered to ADD (1.1.0 form). */
  result?: unknown;
  createdAt: string;
  /**
   * Set when knitter was the IPAM of another plugin (ipam_call.ts): the record names the manager's
   * port only (no veth, no switch port, no flows; its hostIfName is ""), and `cniNetwork` is the
   * CNI network (the config's name) whose GC may collect it.
   */
  ipam?: { cniNetwork: string };
  /**
   * The interfaces of the pod's external networks that their delegate plugins make (macvlan on a
   * master...; cni/delegates.ts): DEL and CHECK run those plugins again.
   */
  delegates?: DelegatedInterface[];
}

/**
 * One process owns the file, so the attachments and the port counter live in memory too: reads cost
 * nothing, and every change is written through before the call resolves. A change is visible in
 * memory as soon as the call is made (a flow sync started meanwhile sees it). Changes made while a
 * commit is in flight go together into the next one, each record as it is then: a burst of ADDs
 * costs a few commits instead of three each.
 */
export class AgentState {
  /** Numbering runs one at a time instead of racing on a counter. */
  private readonly numbering = new Mutex();
  /** Node-local numbers of networks and services, by "kind/id" (number). */
  private readonly numbers = new Map<string, number>();
  /** Records changed in memory and not yet in a commit that has started. */
  private readonly dirty = new Map<string, [containerId: string, ifName: string]>();
  /** The next commit, not started yet: it takes every record dirty when it starts. */
  private nextWrite: Promise<void> | null = null;
  private lastWrite: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly kv: Deno.Kv,
    private readonly attachments: Map<string, Attachment>,
    /** The last port number handed out; stored with the next attachment write. */
    private portCounter: number,
  ) {}

  static async open(dir: string): Promise<AgentState> {
    const path = dir === ":memory:" ? dir : `${dir}/agent.kv`;
    if (path !== ":memory:") await Deno.mkdir(dirname(path), { recursive: true });
    const kv = await Deno.openKv(path);
    const attachments = new Map<string, Attachment>();
    for await (const e of kv.list<Attachment>({ prefix: ["attachment"] })) {
      attachments.set(keyOf(e.value.containerId, e.value.ifName), e.value);
    }
    // A number is stored with the first record that uses it, but two writes may land out of
    // order: the cookies in use bound the counter from below.
    let counter = (await kv.get<number>(PORT_COUNTER)).value ?? 0;
    for (const a of attachments.values()) {
      for (const i of a.interfaces) counter = Math.max(counter, i.cookie);
    }
    return new AgentState(kv, attachments, counter);
  }

  /** A copy: callers change it and write it back with putAttachment. */
  getAttachment(containerId: string, ifName: string): Promise<Attachment | null> {
    const a = this.attachments.get(keyOf(containerId, ifName));
    return Promise.resolve(a ? structuredClone(a) : null);
  }

  /**
   * Stores the record, in memory at once. One too large for the store is refused before anything
   * changes (RecordTooLargeError).
   */
  putAttachment(a: Attachment): Promise<void> {
    const copy = structuredClone(a);
    try {
      checkFits(copy);
    } catch (err) {
      return Promise.reject(err);
    }
    const key = keyOf(a.containerId, a.ifName);
    this.attachments.set(key, copy);
    return this.written(key, a.containerId, a.ifName);
  }

  deleteAttachment(containerId: string, ifName: string): Promise<void> {
    const key = keyOf(containerId, ifName);
    this.attachments.delete(key);
    return this.written(key, containerId, ifName);
  }

  /** Copies of every attachment. */
  listAttachments(): Promise<Attachment[]> {
    return Promise.resolve([...this.attachments.values()].map((a) => structuredClone(a)));
  }

  /** The attachments (other than `except`'s) with an interface on the manager's port `port`. */
  holdersOf(port: PortPath, except?: Attachment): Attachment[] {
    const skip = except ? keyOf(except.containerId, except.ifName) : undefined;
    return [...this.attachments.entries()]
      .filter(([k, a]) => k !== skip && a.interfaces.some((i) => samePort(i, port)))
      .map(([, a]) => a);
  }

  /** Every attachment as stored, for readers that change nothing (the flow model). */
  attachmentsView(): Iterable<Readonly<Attachment>> {
    return this.attachments.values();
  }

  /** The node-local number of a network (by its manager ID), allocated once and kept. */
  networkNumber(networkId: string): Promise<number> {
    return this.number("network", networkId);
  }

  /**
   * The node-local number of a service ("tenant/name"), stable across restarts: its select groups'
   * ids derive from it (agent/PIPELINE.md, "Services"). Counted apart from the networks' numbers.
   */
  serviceNumber(service: string): Promise<number> {
    return this.number("service", service);
  }

  /** The stored number of `id` among the things of `kind`, the next one on first use. */
  private number(kind: "network" | "service", id: string): Promise<number> {
    const mapKey = `${kind}/${id}`;
    const known = this.numbers.get(mapKey);
    if (known !== undefined) return Promise.resolve(known);
    return this.numbering.run(async () => {
      const key = [`${kind}_number`, id];
      const counter = ["counter", kind];
      let n = (await this.kv.get<number>(key)).value;
      if (n === null) {
        n = ((await this.kv.get<number>(counter)).value ?? 0) + 1;
        await this.kv.atomic().set(counter, n).set(key, n).commit();
      }
      this.numbers.set(mapKey, n);
      return n;
    });
  }

  /**
   * `count` fresh node-local port numbers. Nothing is written: the numbers name flows only once an
   * attachment that holds them is stored, and that write stores the counter too.
   */
  portNumbers(count: number): Promise<number[]> {
    const first = this.portCounter + 1;
    this.portCounter += count;
    return Promise.resolve(Array.from({ length: count }, (_, i) => first + i));
  }

  /** Resolves once every write started so far has landed (or failed): before close(). */
  async flushed(): Promise<void> {
    await this.lastWrite;
  }

  close(): void {
    this.kv.close();
  }

  /** Resolves once a commit that holds the record as it is now has landed. */
  private written(key: string, containerId: string, ifName: string): Promise<void> {
    this.dirty.set(key, [containerId, ifName]);
    if (!this.nextWrite) {
      const next = this.lastWrite.then(() => {
        this.nextWrite = null;
        return this.commitDirty();
      });
      this.nextWrite = next;
      this.lastWrite = next.catch(() => {});
    }
    return this.nextWrite;
  }

  /** Every dirty record, as memory has it now, in commits of at most WRITE_BATCH records. */
  private async commitDirty(): Promise<void> {
    const records = [...this.dirty];
    this.dirty.clear();
    for (let at = 0; at < records.length; at += WRITE_BATCH) {
      const op = this.kv.atomic().set(PORT_COUNTER, this.portCounter);
      for (const [key, [containerId, ifName]] of records.slice(at, at + WRITE_BATCH)) {
        const a = this.attachments.get(key);
        if (a) op.set(["attachment", containerId, ifName], a);
        else op.delete(["attachment", containerId, ifName]);
      }
      const r = await op.commit();
      if (!r.ok) throw new Error("agent state: a write to Deno KV was not committed");
    }
  }
}

/** Records per commit: a record is a few kB, well under Deno KV's limits of a transaction. */
const WRITE_BATCH = 64;

const PORT_COUNTER = ["counter", "port"];

/** Deno KV's limits: a value's serialized size, a key's encoded size. */
export const MAX_VALUE_BYTES = 65536;
const MAX_KEY_BYTES = 2048;

/** A record the store cannot take; nothing was changed. */
export class RecordTooLargeError extends Error {
  constructor(readonly bytes: number, readonly limit: number, what: string, hint?: string) {
    super(
      `${what} would be ${kib(bytes)} KiB, too large for the agent's store, which takes at most ${
        kib(limit)
      } KiB a record${hint ? `: ${hint}` : ""}`,
    );
    this.name = "RecordTooLargeError";
  }
}

/**
 * The size of a value as Deno KV would store the agent's copy of it: V8's serialization of a
 * structured clone (whose arrays V8 writes as sparse, a few bytes more an element than those of
 * parsed JSON).
 */
export function storedBytes(value: unknown): number {
  return serializedBytes(structuredClone(value));
}

function serializedBytes(value: unknown): number {
  return serialize(value).length;
}

function checkFits(a: Attachment): void {
  const key = ["attachment", a.containerId, a.ifName];
  const keyBytes = key.reduce((n, part) => n + new TextEncoder().encode(part).length + 2, 1);
  if (keyBytes > MAX_KEY_BYTES) {
    throw new RecordTooLargeError(
      keyBytes,
      MAX_KEY_BYTES,
      `The key of ${a.containerId.slice(0, 64)}'s record`,
    );
  }
  const bytes = serializedBytes(a);
  if (bytes > MAX_VALUE_BYTES) {
    throw new RecordTooLargeError(
      bytes,
      MAX_VALUE_BYTES,
      `The record of ${a.containerId}/${a.ifName}`,
    );
  }
}

function kib(bytes: number): string {
  return (bytes / 1024).toFixed(bytes < 10240 ? 1 : 0);
}

function keyOf(containerId: string, ifName: string): string {
  return `${containerId}\0${ifName}`;
}
