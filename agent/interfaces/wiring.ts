/**
 * Wiring an interface into this node and unwiring it: the one path of a CNI ADD (attach.ts) and of
 * `knitctl attach` (extra_interface.ts). Wiring asks the manager for each interface's port, makes
 * the veth in the netns (MAC, MTU, addresses, routes, checksums), plugs its host end into the
 * switch and syncs the flows, recording it in the agent's state before anything is made. Each step
 * is noted in an {@link UndoJournal} once it may have made something, so a failure undoes exactly
 * that: nothing made is left, nothing not made is touched. Unwiring (DEL, GC, a lost DEL, detach)
 * undoes what the record names, the same way; every step tolerates what is already gone. A record
 * of knitter as another plugin's IPAM (Attachment.ipam) has its ports only: nothing else is made
 * or undone for it.
 */
import type { Logger, Port, PortRequest, Route, StartedCommand } from "@knitter/common";
import { portAddresses } from "@knitter/common";
import {
  effectiveBandwidth,
  isLimited,
  isStablePortId,
  ManagerError,
  ManagerUnavailableError,
} from "@knitter/common";
import type { PodInterfaceSpec } from "./ip_links.ts";
import type { OvsPortSpec } from "../dataplane/ovs.ts";
import {
  type AttachmentStore,
  type Bridges,
  type Flows,
  type Links,
  type PortManager,
  type Shaper,
  type SwitchPorts,
  tcShaper,
} from "./seams.ts";
import type { AttachedInterface, Attachment } from "../state.ts";
import { EarlyPlug } from "./early_plug.ts";

export interface WiringDeps {
  nodeName: string;
  links: Links;
  /** The integration bridge's ports; the agent picks their ofports. */
  ports: SwitchPorts;
  /** Other bridges, for plain veths (knitctl attach --bridge). */
  bridges: Bridges;
  flows: Flows;
  /** Bandwidth limits on the veths; default: tc (shaper.ts). */
  shaper?: Shaper;
  manager: PortManager;
  state: AttachmentStore;
  log: Logger;
}

/** An interface with its port from the manager. */
export type PortedInterface = AttachedInterface & { port: Port };

/** How the interfaces of one attachment are asked for and shaped: what differs between callers. */
export interface WireRequest {
  /** What is being done, for the log: "ADD", "attach". */
  what: string;
  /** What the manager is asked for the interface's port. */
  portRequest(i: AttachedInterface, k: number): PortRequest;
  /** The error to answer when the manager refused the port (e.g. saying where a value came from). */
  refused?(err: unknown, k: number): unknown;
  /** Refuses (throws) a port this request cannot use; the port is released again. */
  accept?(i: PortedInterface, k: number): void;
  /** The pod end's MTU and routes. */
  shape(i: PortedInterface): { mtu: number; routes: Route[] };
  /**
   * Whose the port on the switch is. Asked before the manager's answer too (`i.port` unset: the
   * early switch port, early_plug.ts) and again after it; what changed is written then.
   */
  externalIds(a: Attachment, i: AttachedInterface): Record<string, string>;
  /** Last changes to the record before it is stored as ready (the CNI result). */
  complete?(a: Attachment): void;
}

/** A plain veth on a bridge other than the integration bridge: no manager, no flows, no record. */
export type PlainInterface = Omit<PodInterfaceSpec, "hostNetns" | "softwareChecksums"> & {
  bridge: string;
  /** VLAN access tag. */
  vlan?: number;
  externalIds: Record<string, string>;
};

/** The network of a port rides on a physnet this node does not map to a bridge. */
export class PhysnetNotMappedError extends Error {
  constructor(readonly port: Port, nodeName: string) {
    super(
      `Network "${port.network}" rides on physnet "${port.physnet}", which node "${nodeName}" does not map to a bridge (agent bridgeMappings)`,
    );
    this.name = "PhysnetNotMappedError";
  }
}

/**
 * What a wiring made, step by step, and so what undoing it touches. A live wiring notes each step
 * as it starts it (a step that fails may have made part of its work: a switch port added with an
 * error stays in the database); undoing a record (DEL) takes everything it names.
 */
export class UndoJournal {
  /** The attachment record was written. */
  record = false;
  /** Interfaces [0, asked) had their port asked for at the manager. */
  asked = 0;
  /** Ofports taken for the interfaces. */
  readonly ofports: number[] = [];
  /** Host ends of the veths made. */
  readonly links = new Set<string>();
  /** Host ends plugged into a bridge (or tried), by bridge. */
  readonly plugged = new Map<string, Set<string>>();
  /** Host ends of the veths whose ends were limited (or tried). */
  readonly shaped = new Set<string>();

  /** Everything a stored record names, as DEL undoes it. */
  static of(a: Attachment, bridge: string): UndoJournal {
    const j = new UndoJournal();
    j.record = true;
    j.asked = a.interfaces.length;
    // Another plugin made the interface of an IPAM record, and undoes it: only the port is ours.
    if (a.ipam) return j;
    for (const i of a.interfaces) {
      if (i.ofport !== undefined) j.ofports.push(i.ofport);
      j.links.add(i.hostIfName);
      j.plug(bridge, i.hostIfName);
      if (isLimited(i.limits)) j.shaped.add(i.hostIfName);
    }
    return j;
  }

  /** Everything a plain interface may have made, as detach undoes it. */
  static ofPlain(x: Pick<PlainInterface, "hostIfName" | "bridge">): UndoJournal {
    const j = new UndoJournal();
    j.links.add(x.hostIfName);
    j.plug(x.bridge, x.hostIfName);
    return j;
  }

  /** How many of `a`'s interfaces (a prefix) have anything made: a port asked for, a pair. */
  named(a: Attachment): number {
    return Math.max(
      this.asked,
      a.interfaces.findLastIndex((i) => this.links.has(i.hostIfName)) + 1,
    );
  }

  plug(bridge: string, name: string): void {
    let names = this.plugged.get(bridge);
    if (!names) this.plugged.set(bridge, names = new Set());
    names.add(name);
  }
}

/** What a pair is made with when its network has had no interface here yet (the kernel's default). */
const DEFAULT_MTU = 1500;

export class Wiring {
  private readonly shaper: Shaper;
  /** The MTU each network's interfaces got last, by "tenant/network": what a new pair is made with. */
  private readonly mtus = new Map<string, number>();
  /** Wirings under way: only one alone plugs its switch port early (early_plug.ts). */
  private wiring = 0;

  constructor(private readonly d: WiringDeps) {
    this.shaper = d.shaper ?? tcShaper;
  }

  /** The integration bridge's name. */
  get bridge(): string {
    return this.d.flows.bridge;
  }

  /**
   * Wires the attachment's interfaces: the record first (whatever happens next, unwire finds what
   * to undo by the names it holds), then the manager's ports and, while they are asked for, the
   * first interface's veth pair (its MAC and addresses are the manager's to give) and, when no
   * other wiring is under way, its switch port (early_plug.ts), then the other ofports, the record
   * with the result, the veths completed and plugged, and the flow sync alongside (the agent picks
   * the ofports, so the flows need not wait for the ports). The record ends "ready". On a failure
   * what was made is undone, the record too, and the failure thrown; when that undo fails as well
   * the record stays, for unwire to finish. The pair and switch port made while the manager is
   * asked are named by the record already (host end, ofport): a crash leaves nothing DEL (or the
   * reaper) does not find.
   */
  async wire(a: Attachment, req: WireRequest): Promise<void> {
    this.wiring++;
    try {
      await this.wireOne(a, req);
    } finally {
      this.wiring--;
    }
  }

  private async wireOne(a: Attachment, req: WireRequest): Promise<void> {
    const made = new UndoJournal();
    const first = a.ipam || a.interfaces.length === 0 ? undefined : a.interfaces[0];
    // Taken before the record is written, so that the record names it: the early switch port has
    // it, and a crash leaves it reserved at the next start.
    if (first) made.ofports.push(first.ofport = this.d.ports.takeOfport());
    const written = this.d.state.putAttachment(a);
    // The first interface's `ip` starts while the record is written.
    const batch = first && this.d.links.startBatch(a.netns);
    batch?.catch(() => {});
    try {
      await written;
    } catch (err) {
      await abandon(batch);
      this.d.ports.release(made.ofports);
      throw err;
    }
    made.record = true;
    let plug: EarlyPlug | undefined;
    try {
      // Made while the manager is asked, only once the record names it; its switch port too.
      const madeMtu = batch && await this.sendPair(a, made, await batch);
      if (first && batch) plug = this.plugEarly(a, req, first, made, await batch);
      try {
        await this.askPorts(a, req, made);
      } catch (err) {
        // Nothing is undone while `ip` may still be making the pair, or the switch plugging it.
        plug?.cancel();
        await abandon(batch);
        throw err;
      }
      if (a.ipam || !batch || !plug || madeMtu === undefined) return await this.complete(a, req);
      for (const i of a.interfaces.slice(1)) {
        made.ofports.push(i.ofport = this.d.ports.takeOfport());
      }
      // The record write runs alongside: the flows read the state's memory, which the call updates
      // at once, and a crash before it lands leaves an "adding" record that unwire undoes by name.
      // It holds the result already ("building"): the answer need not wait for another write.
      req.complete?.(a);
      a.status = "building";
      await allDone([
        this.d.state.putAttachment(a),
        this.makeInterfaces(a, req, made, { batch: await batch, madeMtu, plug }),
        this.d.flows.sync(),
      ]);
    } catch (err) {
      plug?.cancel();
      await plug?.settled();
      // Interfaces past those asked for and with no pair made have nothing anywhere: the record
      // need not name them (undo asks the manager only for the ports it asked for).
      a.interfaces = a.interfaces.slice(0, made.named(a));
      await this.rollback(() => this.unwire(a, `rollback of a failed ${req.what}`, { made }), {
        container: a.containerId,
        netns: a.netns,
      });
      throw err;
    } finally {
      await abandon(batch);
    }
    this.readyAfterAnswer(a);
  }

  /** Asks the manager for each interface's port, in turn, and checks what it answers. */
  private async askPorts(a: Attachment, req: WireRequest, made: UndoJournal): Promise<void> {
    for (const [k, i] of a.interfaces.entries()) {
      made.asked = k + 1;
      try {
        i.port = await this.d.manager.putPort(i.tenant, i.network, i.portId, req.portRequest(i, k));
      } catch (err) {
        // Refused (the manager answered no), or never sent: nothing was made or changed there.
        if (refusedOrNotSent(err)) made.asked = k;
        throw req.refused?.(err, k) ?? err;
      }
      // No record write here: port IDs are derived, so the record already names what to release.
      const ported = i as PortedInterface;
      if (!a.ipam) this.requirePhysnet(ported.port);
      req.accept?.(ported, k);
      if (!a.ipam) i.limits = limitsOf(ported);
    }
  }

  /**
   * Sends the first interface's pair to its `ip` (the rest follows the manager's answer), with the
   * MTU its network's interfaces got last here; answers that MTU. Noted in `made` as it is sent:
   * whether `ip` made it is known only at the end, and undoing a veth that is not there is no error.
   */
  private async sendPair(a: Attachment, made: UndoJournal, batch: StartedCommand) {
    const i = a.interfaces[0];
    const mtu = this.mtus.get(networkKey(i)) ?? DEFAULT_MTU;
    made.links.add(i.hostIfName);
    await this.d.links.sendPair(
      { netns: a.netns, ifName: i.ifName, hostIfName: i.hostIfName, mtu },
      batch,
    );
    return mtu;
  }

  /** The first interface's switch port, plugged once `ip` has made its pair (early_plug.ts). */
  private plugEarly(
    a: Attachment,
    req: WireRequest,
    i: AttachedInterface,
    made: UndoJournal,
    batch: StartedCommand,
  ): EarlyPlug {
    const spec = {
      name: i.hostIfName,
      ofportRequest: i.ofport!,
      externalIds: req.externalIds(a, i),
    };
    return new EarlyPlug(this.d, batch, spec, {
      noting: () => made.plug(this.bridge, i.hostIfName),
      alone: () => this.wiring === 1,
    });
  }

  /**
   * The record as ready, in memory at once (a DEL or CHECK that follows the answer sees it), on
   * disk after the answer: the write costs the answer nothing. Should it never land (a crash, a
   * failed commit), the record stays "building" on disk, and the agent's next start completes it
   * (cni/settle.ts), as everything it names was made.
   */
  private readyAfterAnswer(a: Attachment): void {
    a.status = "ready";
    this.d.state.putAttachment(a).catch((err) =>
      this.d.log.warn("cannot store an attachment as ready; the agent's next start completes it", {
        container: a.containerId,
        error: String((err as Error)?.message ?? err),
      })
    );
  }

  /** The record, completed by the request (its result), stored as ready. */
  private async complete(a: Attachment, req: WireRequest): Promise<void> {
    req.complete?.(a);
    a.status = "ready";
    await this.d.state.putAttachment(a);
  }

  /**
   * Undoes an attachment: its flows first (the record without ofports, then a flow sync: the pod
   * is cut off, and a burst's flow syncs never queue behind ovs-vswitchd releasing the ports it
   * was told to remove), then switch ports and veths, the ofports, the manager's ports (after their
   * flows, before their addresses can be handed to someone else), and the record last. A heal
   * meanwhile does not plug a port again: the record names no ofport for it.
   * With `made`, only what that journal notes (a failed wiring's rollback); else all the
   * record names. A port another attachment here holds (a stable address) is not released; on a
   * rollback, a stable port it asked for is unbound instead of released (same address), so the
   * pod's network-status, written from the ports bound to it, names no interface taken away.
   */
  async unwire(
    a: Attachment,
    why: string,
    opts: { made?: UndoJournal } = {},
  ): Promise<void> {
    const made = opts.made ?? UndoJournal.of(a, this.bridge);
    const ports = a.interfaces;
    const cut: Promise<void>[] = [];
    if (made.record) {
      a.interfaces = a.interfaces.map((i) => ({ ...i, ofport: undefined }));
      // The result is not needed to undo, and may be what made a record too large to store.
      delete a.result;
      cut.push(this.d.state.putAttachment(a));
    }
    // The flow sync reads the state's memory, which the write changed at once: both together. A
    // crash before the write lands leaves the ofports named, and a DEL again takes them.
    if (made.ofports.length > 0) cut.push(this.d.flows.sync());
    await allDone(cut);
    // Deleting a veth takes its limits with it (a qdisc lives on its device): only limits on a veth
    // that stays are taken away on their own, first.
    await allDone(
      ports.filter((i) => made.shaped.has(i.hostIfName) && !made.links.has(i.hostIfName))
        .map((i) =>
          this.shaper.clear({ netns: a.netns, ifName: i.ifName, hostIfName: i.hostIfName })
        ),
    );
    await this.undoLinks(
      made,
      ports.map((i) => ({
        netns: a.netns,
        ifName: i.ifName,
        hostIfName: i.hostIfName,
        mac: i.port?.mac,
      })),
    );
    this.d.ports.release(made.ofports);
    for (const i of ports.slice(0, made.asked)) {
      if (this.d.state.holdersOf(i, a).length > 0) continue;
      // A stable port asked for is unbound even when its answer never came (i.port unset): the
      // manager may have bound it, and releasing it would lose the address the pod keeps.
      if (opts.made && isStablePortId(i.portId)) {
        await this.unbind(i.tenant, i.network, i.portId);
      } else await this.d.manager.deletePort(i.tenant, i.network, i.portId);
    }
    if (made.record) await this.d.state.deleteAttachment(a.containerId, a.ifName);
    this.d.log.info("detached", { container: a.containerId, why });
  }

  /**
   * The limits `i` was given (AttachedInterface.limits) that its veth does not hold now, in words:
   * a qdisc removed or replaced after ADD (CNI CHECK). Empty when every limit holds.
   */
  async limitsLost(a: Attachment, i: AttachedInterface): Promise<string[]> {
    if (!isLimited(i.limits)) return [];
    const now = await this.shaper.read({
      netns: a.netns,
      ifName: i.ifName,
      hostIfName: i.hostIfName,
    });
    const lost: string[] = [];
    const ends = [["ingress", i.hostIfName], ["egress", `${i.ifName} in ${a.netns}`]] as const;
    for (const [dir, end] of ends) {
      const want = i.limits![dir]?.rate;
      const has = now[dir];
      // tc keeps a rate in whole bytes per second.
      if (want === undefined || (has !== undefined && Math.abs(has - want) < 8)) continue;
      lost.push(
        `the ${dir} limit of ${want} bit/s on ${end} is ${
          has === undefined ? "gone" : `${has} bit/s`
        }`,
      );
    }
    return lost;
  }

  /** Makes a plain veth on another bridge; a failure undoes what was made, and is thrown. */
  async wirePlain(x: PlainInterface): Promise<void> {
    const made = new UndoJournal();
    try {
      await this.d.links.create({
        netns: x.netns,
        ifName: x.ifName,
        hostIfName: x.hostIfName,
        mac: x.mac,
        mtu: x.mtu,
        addresses: x.addresses,
        routes: x.routes,
        softwareChecksums: this.d.flows.softwareChecksums,
      });
      made.links.add(x.hostIfName);
      made.plug(x.bridge, x.hostIfName);
      await this.d.bridges.addPorts(x.bridge, [{
        name: x.hostIfName,
        ...(x.vlan !== undefined ? { tag: x.vlan } : {}),
        externalIds: x.externalIds,
      }]);
    } catch (err) {
      await this.rollback(() => this.undoLinks(made, [x]), { netns: x.netns, ifName: x.ifName });
      throw err;
    }
  }

  /** Undoes a plain veth, or whatever of one may exist: its switch port, then the veth. */
  unwirePlain(x: Pick<PlainInterface, "netns" | "ifName" | "hostIfName" | "bridge" | "mac">) {
    return this.undoLinks(UndoJournal.ofPlain(x), [x]);
  }

  /** Switch ports, then veths, of those `made` notes; a pod end alone only with knitter's MAC. */
  private async undoLinks(
    made: UndoJournal,
    ends: { netns: string; ifName: string; hostIfName: string; mac?: string }[],
  ): Promise<void> {
    await allDone([
      ...[...made.plugged].map(([bridge, names]) => this.unplug(bridge, [...names])),
      ...ends.filter((e) => made.links.has(e.hostIfName)).map((e) =>
        this.d.links.remove(e.hostIfName, { netns: e.netns, ifName: e.ifName, mac: e.mac })
      ),
    ]);
  }

  private unplug(bridge: string, names: string[]): Promise<void> {
    if (bridge === this.bridge) return this.d.ports.remove(names);
    return this.d.bridges.delPorts(bridge, names);
  }

  /**
   * Completes the first interface (its pair sent to `early.batch` with MTU `early.madeMtu`) and
   * makes the others whole, as their ports say; then plugs their host ends into the bridge.
   */
  private async makeInterfaces(
    a: Attachment,
    req: WireRequest,
    made: UndoJournal,
    early: { batch: StartedCommand; madeMtu: number; plug: EarlyPlug },
  ): Promise<void> {
    for (const [k, i] of a.interfaces.entries()) {
      const spec = this.podEnd(a, req, i);
      if (k === 0) await this.d.links.complete(spec, early.madeMtu, early.batch);
      else await this.d.links.create(spec);
      made.links.add(i.hostIfName);
    }
    const [first, ...others] = a.interfaces.map((i): OvsPortSpec => ({
      name: i.hostIfName,
      ofportRequest: i.ofport,
      externalIds: req.externalIds(a, i),
      ...(isLimited(i.limits) ? { keepQdisc: true } : {}),
    }));
    for (const s of [first, ...others]) made.plug(this.bridge, s.name);
    // The limits need the veths only, not their switch ports (which leave the host end's qdisc
    // alone: keepQdisc): both at once.
    await allDone([
      early.plug.finish(first),
      ...(others.length > 0 ? [this.d.ports.add(others)] : []),
      this.limit(a, made),
    ]);
  }

  /** What an interface's pod end is, from its port: MAC, MTU, addresses, routes. */
  private podEnd(a: Attachment, req: WireRequest, i: AttachedInterface): PodInterfaceSpec {
    const ported = i as PortedInterface;
    const { mtu, routes } = req.shape(ported);
    this.mtus.set(networkKey(i), mtu);
    return {
      netns: a.netns,
      ifName: i.ifName,
      hostIfName: i.hostIfName,
      mac: ported.port.mac,
      mtu,
      addresses: portAddresses(ported.port),
      routes,
      softwareChecksums: this.d.flows.softwareChecksums,
      ...(ported.port.networkRouterAdvertisements ? { acceptRouterAdvertisements: true } : {}),
    };
  }

  /** Applies each interface's bandwidth limits to its veth, noting it in `made` first. */
  private async limit(a: Attachment, made: UndoJournal): Promise<void> {
    const limited = a.interfaces.filter((i) => isLimited(i.limits));
    for (const i of limited) made.shaped.add(i.hostIfName);
    await allDone(
      limited.map((i) =>
        this.shaper.apply({ netns: a.netns, ifName: i.ifName, hostIfName: i.hostIfName }, i.limits!)
      ),
    );
  }

  private requirePhysnet(port: Port): void {
    if (port.type === "vxlan" || this.d.flows.physnetPort(port.physnet!) !== undefined) return;
    throw new PhysnetNotMappedError(port, this.d.nodeName);
  }

  private async unbind(tenant: string, network: string, id: string): Promise<void> {
    try {
      await this.d.manager.unbindPort(tenant, network, id);
    } catch (err) {
      if (!(err instanceof ManagerError && err.status === 404)) throw err;
    }
  }

  /** Runs a rollback; when it fails, says so (what stays is for unwire, or detach, to finish). */
  private async rollback(undo: () => Promise<void>, what: Record<string, string>): Promise<void> {
    try {
      await undo();
    } catch (err) {
      this.d.log.error("rollback incomplete", { ...what, error: String(err) });
    }
  }
}

/** The external IDs of a pod interface's port on the bridge: whose it is. */
export function externalIds(a: Attachment, i: AttachedInterface): Record<string, string> {
  const ids: Record<string, string> = {
    "knitter-container": a.containerId,
    "knitter-ifname": i.ifName,
    "knitter-port": i.portId,
    "knitter-network": portNetwork(i),
  };
  if (a.pod) ids["knitter-pod"] = `${a.pod.namespace}/${a.pod.name}`;
  return ids;
}

/**
 * The limits an interface gets, per direction: the port's own (REST), else what the runtime asked
 * for (runtimeConfig.bandwidth), else the network's default; absent when nothing limits it.
 */
export function limitsOf(i: PortedInterface): AttachedInterface["limits"] {
  const limits = effectiveBandwidth([
    { from: "the port", bandwidth: i.port.bandwidth },
    { from: "runtimeConfig.bandwidth", bandwidth: i.bandwidth },
    { from: `network "${i.port.network}"`, bandwidth: i.port.networkBandwidth },
  ]);
  return isLimited(limits) ? limits : undefined;
}

/**
 * The network of an interface's port as "tenant/name": the manager's (a public network's tenant is
 * its owner), or before its answer the path the port is asked under.
 */
export function portNetwork(i: AttachedInterface): string {
  return i.port ? `${i.port.networkTenant}/${i.port.network}` : `${i.tenant}/${i.network}`;
}

function networkKey(i: AttachedInterface): string {
  return `${i.tenant}/${i.network}`;
}

/** Ends a batch not finished (after finish, abandon does nothing). */
async function abandon(batch: Promise<StartedCommand> | undefined): Promise<void> {
  await (await batch?.catch(() => undefined))?.abandon();
}

function refusedOrNotSent(err: unknown): boolean {
  if (err instanceof ManagerUnavailableError) return err.notSent;
  return err instanceof ManagerError && err.status >= 400 && err.status < 500;
}

/**
 * Waits for all of the steps, then fails with the first failure: an undo must not start while a
 * step that failed alongside another is still making things.
 */
async function allDone(steps: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(steps)).find((r) => r.status === "rejected");
  if (failed) throw (failed as PromiseRejectedResult).reason;
}
