/**
 * The CNI operations on this node. ADD journals what it is about to make before making it, so
 * that a failure (or a crash) can always be undone; DEL undoes exactly that and succeeds when it
 * is already undone; CHECK compares the pod with what ADD recorded.
 */
import type { Logger, Port } from "@knitter/common";
import {
  isStablePortId,
  type ManagerClient,
  ManagerError,
  ManagerUnavailableError,
  Mutex,
  type StartedCommand,
} from "@knitter/common";
import { CNI_CODE, CniError, type CniResult } from "@knitter/plugin/contract";
import { toCniError } from "./cni_errors.ts";
import { cniResult, podRoutes } from "./cni_result.ts";
import type { Dataplane } from "./dataplane.ts";
import { CONTAINER_PREFIX as EXTRA_CONTAINER_PREFIX } from "./extra_interface.ts";
import {
  createPodInterface,
  deletePodInterface,
  hostIfName,
  podInterfaceState,
  startPodBatch,
} from "./netlink.ts";
import { netnsIdNow, netnsIdOf, type PodNetns, podNetns } from "./netns.ts";
import type { PortPlugger } from "./port_plugger.ts";
import { goneReason } from "./reaper.ts";
import {
  checkAddRequest,
  type CniRequest,
  podRequest,
  portIdFor,
  type WantedInterface,
} from "./pod_request.ts";
import {
  type AgentState,
  type AttachedInterface,
  type Attachment,
  MAX_VALUE_BYTES,
  RecordTooLargeError,
  storedBytes,
} from "./state.ts";

/** Room kept in a record for each interface's port and result, when its size is judged up front. */
const BYTES_PER_INTERFACE = 1024;

export interface AttacherDeps {
  nodeName: string;
  defaults: { tenant: string; network?: string };
  state: AgentState;
  manager: ManagerClient;
  plugger: PortPlugger;
  dataplane: Dataplane;
  log: Logger;
}

export class Attacher {
  private readonly locks = new Map<string, Mutex>();
  /** ADDs called and not answered yet, by container/ifname: GC leaves them alone. */
  private readonly adding = new Map<string, number>();

  constructor(private readonly d: AttacherDeps) {}

  async add(req: CniRequest): Promise<CniResult> {
    checkAddRequest(req);
    const key = `${req.containerId}/${req.ifName}`;
    this.adding.set(key, (this.adding.get(key) ?? 0) + 1);
    try {
      return await this.locked(req.containerId, () => this.doAdd(req));
    } finally {
      const n = this.adding.get(key)! - 1;
      if (n > 0) this.adding.set(key, n);
      else this.adding.delete(key);
    }
  }

  del(req: CniRequest): Promise<void> {
    return this.locked(req.containerId, () => this.doDel(req));
  }

  check(req: CniRequest): Promise<void> {
    return this.locked(req.containerId, () => this.doCheck(req));
  }

  /** Removes every attachment the runtime no longer lists as valid (CNI GC). */
  async gc(req: CniRequest): Promise<void> {
    const list = req.config["cni.dev/valid-attachments"] ?? req.config["cni.dev/attachments"] ?? [];
    const valid = new Set(
      (list as { containerID: string; ifname: string }[]).map((v) =>
        `${v.containerID}/${v.ifname}`
      ),
    );
    let failure: unknown;
    for (const listed of await this.d.state.listAttachments()) {
      // knitctl's extra interfaces are not the runtime's to list: only detach removes them.
      if (listed.containerId.startsWith(EXTRA_CONTAINER_PREFIX)) continue;
      const key = `${listed.containerId}/${listed.ifName}`;
      // An ADD being answered now is newer than the runtime's list: not the list's to judge.
      if (valid.has(key) || this.adding.has(key)) continue;
      try {
        await this.locked(listed.containerId, async () => {
          // Read again under the lock: an ADD that held it may have replaced the record listed.
          const a = await this.d.state.getAttachment(listed.containerId, listed.ifName);
          if (!a || a.createdAt !== listed.createdAt || this.adding.has(key)) return;
          await this.undo(a, "GC");
        });
      } catch (err) {
        // The others are still collected; the first failure is the answer.
        this.d.log.error("GC could not remove an attachment", {
          container: listed.containerId,
          error: String(err),
        });
        failure ??= err;
      }
    }
    if (failure) throw failure;
  }

  /**
   * Undoes `listed`, found with its netns gone (no DEL came: reaper.ts), under the container's
   * lock, so never across an ADD or DEL of it. Nothing is done when the record changed meanwhile
   * (another ADD) or its netns is back; answers whether it was undone.
   */
  reap(listed: Attachment, why: string): Promise<boolean> {
    return this.locked(listed.containerId, async () => {
      const a = await this.d.state.getAttachment(listed.containerId, listed.ifName);
      if (!a || a.createdAt !== listed.createdAt) return false;
      // Gone still (reaper.ts): the path missing, or another namespace there.
      if (!goneReason(a, await netnsIdNow(a.netns))) return false;
      this.d.log.warn("netns gone without DEL: removing the attachment", {
        container: a.containerId,
        ifName: a.ifName,
        netns: a.netns,
        why,
      });
      await this.undo(a, why);
      return true;
    });
  }

  private async doAdd(req: CniRequest): Promise<CniResult> {
    const pod = await podNetns(req.netns ?? "");
    // The first interface's `ip` starts now and waits for its lines, while the journal and the
    // manager are waited for.
    const batch = await startPodBatch(pod.path);
    try {
      return await this.addWith(req, pod, batch);
    } finally {
      await batch.abandon();
    }
  }

  private async addWith(req: CniRequest, pod: PodNetns, batch: StartedCommand): Promise<CniResult> {
    const netns = pod.path;
    const want = podRequest(req, this.d.defaults);
    const existing = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (existing) {
      const stale = existing.status === "ready" ? await this.staleness(existing, pod) : "";
      if (stale === undefined) {
        // The same ADD again, for the netns that still has what it made: the same answer.
        return cniResult(
          netns,
          existing.interfaces.map((i) => ({ ...i, port: i.port! })),
          req.config.prevResult,
        );
      }
      // Never a result for a netns that does not have it: what the record made goes (its ports
      // too), and this ADD makes it anew.
      await this.undo(
        existing,
        stale ? `ADD again: ${stale}` : "ADD (left over from an interrupted ADD)",
      );
    }

    const a: Attachment = {
      containerId: req.containerId,
      ifName: req.ifName,
      netns,
      netnsId: pod.id,
      tenant: want.tenant,
      pod: want.pod,
      status: "adding",
      interfaces: [],
      createdAt: new Date().toISOString(),
    };
    const cookies = await this.d.state.portNumbers(want.interfaces.length);
    for (const [k, w] of want.interfaces.entries()) {
      a.interfaces.push({
        ifName: w.ifName,
        hostIfName: hostIfName(req.containerId, w.ifName),
        portId: portIdFor(want.owner, w.ifName),
        tenant: want.tenant,
        network: w.network,
        cookie: cookies[k],
        defaultRoute: w.defaultRoute,
      });
    }
    this.requireOwnPorts(a);
    requireRoom(a, req.config.prevResult);
    // The journal goes first: whatever happens next, DEL finds what to undo.
    await this.d.state.putAttachment(a);
    // Interfaces from this index on have nothing made for them anywhere (ports come first).
    let untouched = 0;
    try {
      for (const [k, i] of a.interfaces.entries()) {
        const w = want.interfaces[k];
        untouched = k + 1;
        try {
          i.port = await this.d.manager.putPort(i.tenant, i.network, i.portId, {
            ...(w.ip ? { ip: w.ip } : {}),
            ...(w.ipGroup ? { ipGroup: w.ipGroup } : {}),
            ...(w.mac ? { mac: w.mac } : {}),
            node: this.d.nodeName,
            ...(want.pod ? { pod: want.pod } : {}),
            interface: i.ifName,
          });
        } catch (err) {
          if (err instanceof ManagerUnavailableError && err.notSent) untouched = k;
          throw withSource(err, w);
        }
        // No journal write here: port IDs are derived, so the journal already names what to release.
        this.requirePhysnet(i.port);
        requirePrefix(i.port, w);
      }
      // The agent picks the ofports, so the flows go in while the interfaces are made and plugged.
      for (const i of a.interfaces) i.ofport = this.d.plugger.takeOfport();
      // The journal write runs alongside: the flow model reads the state's memory, which the call
      // updates at once, and a crash before it lands leaves an "adding" record DEL undoes by name.
      await allDone([
        this.d.state.putAttachment(a),
        this.makeInterfaces(a, batch),
        this.d.dataplane.sync(),
      ]);
      a.result = cniResult(
        netns,
        a.interfaces.map((i) => ({ ...i, port: i.port! })),
        req.config.prevResult,
      );
      a.status = "ready";
      await this.d.state.putAttachment(a);
      this.d.log.info("attached", {
        container: a.containerId,
        netns,
        interfaces: a.interfaces.length,
      });
      return a.result as CniResult;
    } catch (err) {
      const failure = toCniError(err, `Cannot attach ${req.containerId} (${netns})`);
      // Undoing what was never made would ask a manager that is not answering, and keep the record.
      if (untouched < a.interfaces.length) a.interfaces = a.interfaces.slice(0, untouched);
      try {
        await this.undo(a, "rollback of a failed ADD", { rollback: true });
      } catch (undoErr) {
        // The journal stays: the runtime's DEL will finish the job.
        this.d.log.error("rollback incomplete", {
          container: a.containerId,
          error: String(undoErr),
        });
      }
      throw failure;
    }
  }

  /**
   * Why a ready record does not describe the netns an ADD names (another netns at the path or
   * another path, an interface gone or changed), or undefined when it does.
   */
  private async staleness(a: Attachment, pod: PodNetns): Promise<string | undefined> {
    if (a.netns !== pod.path) return `the sandbox's netns is now ${pod.path}, not ${a.netns}`;
    if (a.netnsId !== undefined && a.netnsId !== pod.id) {
      return `${pod.path} is a new network namespace (the sandbox was recreated)`;
    }
    for (const i of a.interfaces) {
      const st = await podInterfaceState(a.netns, i.ifName);
      if (st?.mac !== i.port?.mac) return `${i.ifName} in ${a.netns} is gone or changed`;
    }
    return undefined;
  }

  /**
   * A port ID another attachment on this node holds (a stable address, another sandbox of the same
   * pod) is not this one's to take: two interfaces would share its address and MAC.
   */
  private requireOwnPorts(a: Attachment): void {
    for (const i of a.interfaces) {
      const other = this.d.state.holdersOf(i.portId, a)[0];
      if (!other) continue;
      throw new CniError(
        CNI_CODE.tryAgainLater,
        `Port "${i.portId}" on network "${i.network}" is held by container ${other.containerId} (netns ${other.netns}) on this node, another sandbox of ${
          a.pod ? `pod ${a.pod.namespace}/${a.pod.name}` : "this pod"
        }; its address is the pod's stable one, so this sandbox gets it once the runtime has deleted that one (CNI DEL): retry then`,
      );
    }
  }

  private async unbindStable(tenant: string, network: string, id: string): Promise<void> {
    try {
      await this.d.manager.unbindPort(tenant, network, id);
    } catch (err) {
      if (!(err instanceof ManagerError && err.status === 404)) throw err;
    }
  }

  private async doDel(req: CniRequest): Promise<void> {
    const a = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (!a) return; // Already undone, or never made here: DEL succeeds.
    await this.undo(a, "DEL");
  }

  /**
   * Undoes an attachment in reverse order. Every step tolerates what is already gone, so running it
   * again after a partial failure finishes the job. The record goes last.
   */
  private async undo(a: Attachment, why: string, opts: { rollback?: boolean } = {}): Promise<void> {
    try {
      await allDone([
        this.d.plugger.remove(a.interfaces.map((i) => i.hostIfName)),
        // The pod end goes with the host end; alone only when it is provably knitter's.
        ...a.interfaces.map((i) =>
          deletePodInterface(i.hostIfName, { netns: a.netns, ifName: i.ifName, mac: i.port?.mac })
        ),
      ]);
      // Flows of the gone ports go before their addresses can be handed to someone else.
      const ports = a.interfaces;
      a.interfaces = a.interfaces.map((i) => ({ ...i, ofport: undefined }));
      // The result is not needed to undo, and may be what made a record too large to store.
      delete a.result;
      await this.d.state.putAttachment(a);
      await this.d.dataplane.sync();
      this.d.plugger.release(ports.map((i) => i.ofport));
      for (const i of ports) {
        // A port another attachment here still uses (a stable one) is not this one's to release.
        if (this.d.state.holdersOf(i.portId, a).length > 0) continue;
        // A stable port (Kubernetes mode) outlives DEL, bound to its pod; one this failed ADD bound
        // is unbound instead (same address), so that the pod's network-status, which the monitor
        // writes from the ports bound to it, names no interface the rollback took away.
        if (opts.rollback && i.port?.pod && isStablePortId(i.portId)) {
          await this.unbindStable(i.tenant, i.network, i.portId);
        } else await this.d.manager.deletePort(i.tenant, i.network, i.portId);
      }
      await this.d.state.deleteAttachment(a.containerId, a.ifName);
      this.d.log.info("detached", { container: a.containerId, why });
    } catch (err) {
      throw toCniError(err, `Cannot detach ${a.containerId} (${why})`);
    }
  }

  private async doCheck(req: CniRequest): Promise<void> {
    const a = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (!a || a.status !== "ready") {
      throw new CniError(
        CNI_CODE.checkFailed,
        `No attachment of ${req.containerId}/${req.ifName} on this node`,
      );
    }
    const id = await netnsIdOf(a.netns);
    if (a.netnsId !== undefined && id !== undefined && id !== a.netnsId) {
      throw new CniError(
        CNI_CODE.checkFailed,
        `${a.netns} is not the network namespace ADD made ${a.ifName} in: the sandbox was recreated; ADD it again`,
      );
    }
    for (const i of a.interfaces) {
      const st = await podInterfaceState(a.netns, i.ifName);
      const port = i.port!;
      const where = `${i.ifName} in ${a.netns}`;
      if (!st) throw new CniError(CNI_CODE.checkFailed, `Interface ${where} is missing`);
      if (st.mac !== port.mac) {
        throw new CniError(
          CNI_CODE.checkFailed,
          `Interface ${where} has MAC ${st.mac}, not ${port.mac} that knitter gave it: the MAC was changed after ADD, likely by a plugin chained after knitter (such as tuning with "mac")`,
          `Knitter's port security (anti-spoofing flows on the bridge) admits frames from ${port.mac} only and drops every other, so ${i.ifName} has no traffic. Ask knitter for the MAC instead: "mac" in the interface's entry of "networks" in the network config, MAC= in CNI_ARGS, or the "mac" capability (runtimeConfig.mac); and take "mac" out of the chained plugin's config.`,
        );
      }
      if (!st.addresses.includes(port.address)) {
        throw new CniError(
          CNI_CODE.checkFailed,
          `Interface ${where} lacks its address ${port.address} (has ${
            st.addresses.join(", ") || "none"
          })`,
        );
      }
      // A plugin chained after us (tuning) may lower the MTU; only one above the network's breaks.
      if (st.mtu > port.mtu) {
        throw new CniError(
          CNI_CODE.checkFailed,
          `Interface ${where} has MTU ${st.mtu}, above its network's ${port.mtu}`,
        );
      }
    }
    const prev = req.config.prevResult as CniResult | undefined;
    const mine = new Set(a.interfaces.map((i) => i.port!.address));
    for (const ip of prev?.ips ?? []) {
      const owner = ip.interface === undefined ? undefined : prev!.interfaces?.[ip.interface];
      if (
        owner?.sandbox === a.netns && a.interfaces.some((i) => i.ifName === owner.name) &&
        !mine.has(ip.address)
      ) {
        throw new CniError(
          CNI_CODE.checkFailed,
          `prevResult lists ${ip.address} on ${owner.name}, which ADD did not give`,
        );
      }
    }
  }

  /** Creates the pod's interfaces in its netns, then plugs their host ends into the bridge. */
  private async makeInterfaces(a: Attachment, batch: StartedCommand): Promise<void> {
    for (const [k, i] of a.interfaces.entries()) {
      await createPodInterface({
        netns: a.netns,
        ifName: i.ifName,
        hostIfName: i.hostIfName,
        mac: i.port!.mac,
        mtu: i.port!.mtu,
        addresses: [i.port!.address],
        routes: podRoutes({ ...i, port: i.port! }),
        softwareChecksums: this.d.dataplane.softwareChecksums,
      }, k === 0 ? batch : undefined);
    }
    await this.d.plugger.add(a.interfaces.map((i) => ({
      name: i.hostIfName,
      ofportRequest: i.ofport,
      externalIds: externalIds(a, i),
    })));
  }

  private requirePhysnet(port: Port): void {
    if (port.type === "vxlan" || this.d.dataplane.physnetPort(port.physnet!) !== undefined) return;
    throw new CniError(
      CNI_CODE.invalidConfig,
      `Network "${port.network}" rides on physnet "${port.physnet}", which node "${this.d.nodeName}" does not map to a bridge (agent bridgeMappings)`,
    );
  }

  private async locked<T>(containerId: string, fn: () => Promise<T>): Promise<T> {
    let m = this.locks.get(containerId);
    if (!m) this.locks.set(containerId, m = new Mutex());
    try {
      return await m.run(fn);
    } finally {
      if (!m.busy) this.locks.delete(containerId);
    }
  }
}

/**
 * Waits for all of the steps, then fails with the first failure: an undo must not start while a
 * step that failed alongside another is still making things.
 */
async function allDone(steps: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(steps)).find((r) => r.status === "rejected");
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/**
 * Refuses, before anything is written, an ADD whose record would be too large to store: a huge
 * prevResult (it becomes part of the result), or a huge list of networks.
 */
function requireRoom(a: Attachment, prevResult: unknown): void {
  const prev = prevResult === undefined ? 0 : storedBytes(prevResult);
  const bytes = storedBytes(a) + prev + a.interfaces.length * BYTES_PER_INTERFACE;
  if (bytes <= MAX_VALUE_BYTES) return;
  throw new RecordTooLargeError(
    bytes,
    MAX_VALUE_BYTES,
    `The record of ${a.containerId}/${a.ifName} (${a.interfaces.length} interfaces, a prevResult of ${
      Math.round(prev / 1024)
    } KiB)`,
    "ask for fewer networks, or chain fewer or smaller results before knitter",
  );
}

/** A fixed address asked with a prefix length must have its network's. */
function requirePrefix(port: Port, w: WantedInterface): void {
  const prefix = Number(port.address.slice(port.address.indexOf("/") + 1));
  if (w.ipPrefix === undefined || w.ipPrefix === prefix) return;
  throw new CniError(
    CNI_CODE.invalidConfig,
    `${w.ipFrom} asks for ${w.ip}/${w.ipPrefix}, but network "${port.network}" has /${prefix} (${port.address}): ask for ${w.ip} or ${w.ip}/${prefix}`,
  );
}

/** A manager's refusal of a fixed address or MAC, saying where the request came from. */
function withSource(err: unknown, w: WantedInterface): unknown {
  if (!(err instanceof ManagerError)) return err;
  const from = err.field === "ip" ? w.ipFrom : err.field === "mac" ? w.macFrom : undefined;
  if (!from) return err;
  return new ManagerError(err.status, err.code, `${from}: ${err.message}`, err.field);
}

/** The external IDs of a pod interface's port on the bridge: whose it is. */
export function externalIds(a: Attachment, i: AttachedInterface): Record<string, string> {
  const ids: Record<string, string> = {
    "knitter-container": a.containerId,
    "knitter-ifname": i.ifName,
    "knitter-port": i.portId,
    "knitter-network": `${i.port!.networkTenant}/${i.port!.network}`,
  };
  if (a.pod) ids["knitter-pod"] = `${a.pod.namespace}/${a.pod.name}`;
  return ids;
}
