/**
 * The CNI operations on this node. ADD journals what it is about to make before making it, so
 * that a failure (or a crash) can always be undone; DEL undoes exactly that and succeeds when it
 * is already undone; CHECK compares the pod with what ADD recorded.
 */
import type { Logger, Port } from "@knitter/common";
import { portAddresses } from "@knitter/common";
import { ManagerError, Mutex } from "@knitter/common";
import { CNI_CODE, CniError, type CniResult } from "@knitter/plugin/contract";
import { toCniError } from "./cni_errors.ts";
import { cniResult, podRoutes } from "./cni_result.ts";
import { hostIfName } from "../interfaces/ip_links.ts";
import type { PodNetns } from "../interfaces/netns.ts";
import { goneReason } from "./reaper.ts";
import { ipamPodRequest, ipamResult, isIpamCall } from "./ipam_call.ts";
import { type DelegatedInterface, type Delegates, withDelegates } from "./delegates.ts";
import {
  type AgentRequest,
  checkAddRequest,
  type CniRequest,
  missingTenantHint,
  type PodRequest,
  podRequest,
  portIdFor,
  type WantedInterface,
} from "./pod_request.ts";
import {
  type AttachmentStore,
  type Links,
  type Namespaces,
  procNamespaces,
} from "../interfaces/seams.ts";
import {
  type Attachment,
  isExtraContainer,
  MAX_VALUE_BYTES,
  RecordTooLargeError,
  storedBytes,
} from "../state.ts";
import { externalIds, type WireRequest, type Wiring } from "../interfaces/wiring.ts";

/** Room kept in a record for each interface's port and result, when its size is judged up front. */
const BYTES_PER_INTERFACE = 1024;

export interface AttacherDeps {
  nodeName: string;
  defaults: { tenant: string; network?: string };
  state: AttachmentStore;
  /** Makes and undoes the interfaces (wiring.ts), as for knitctl's extra interfaces. */
  wiring: Wiring;
  links: Links;
  /** Default: the real ones (netns.ts). */
  namespaces?: Namespaces;
  log: Logger;
  /** Where a pod's networks come from besides the request (Kubernetes mode: kube_attacher.ts). */
  podNetworks?: PodNetworkSource;
  /** Runs the plugins of external networks with a delegate (delegates.ts); absent: none. */
  delegates?: Delegates;
}

/** What is known of an ADD's pod besides its request, and who hears of a failed ADD. */
export interface PodNetworkSource {
  /** The request with what the source knows of its pod (`kubePod`), or as it is. */
  resolve(req: CniRequest): Promise<AgentRequest>;
  /** An ADD of `req` failed with `err`: tells the pod's owner, and answers the error to return. */
  failed(req: CniRequest, err: unknown): unknown;
}

export class Attacher {
  private readonly locks = new Map<string, Mutex>();
  /** ADDs called and not answered yet, by container/ifname: GC leaves them alone. */
  private readonly adding = new Map<string, number>();

  private readonly namespaces: Namespaces;

  constructor(private readonly d: AttacherDeps) {
    this.namespaces = d.namespaces ?? procNamespaces;
  }

  async add(req: CniRequest): Promise<CniResult> {
    // Malformed arguments (K8S_* too) are refused before they name anything to anyone.
    checkAddRequest(req);
    const key = `${req.containerId}/${req.ifName}`;
    this.adding.set(key, (this.adding.get(key) ?? 0) + 1);
    const source = this.d.podNetworks;
    try {
      const resolved = source ? await source.resolve(req) : req;
      return await this.locked(lockKey(req), () => this.doAdd(resolved));
    } catch (err) {
      throw source ? source.failed(req, err) : err;
    } finally {
      const n = this.adding.get(key)! - 1;
      if (n > 0) this.adding.set(key, n);
      else this.adding.delete(key);
    }
  }

  del(req: CniRequest): Promise<void> {
    return this.locked(lockKey(req), () => this.doDel(req));
  }

  check(req: CniRequest): Promise<void> {
    return this.locked(lockKey(req), () => this.doCheck(req));
  }

  /**
   * Removes every attachment the runtime no longer lists as valid (CNI GC), of the calling plugin
   * only: knitter's own interfaces, or (an IPAM call) the addresses it gave the CNI network named.
   */
  async gc(req: CniRequest): Promise<void> {
    const ipamOf = isIpamCall(req.config) ? req.config.name : undefined;
    const list = req.config["cni.dev/valid-attachments"] ?? req.config["cni.dev/attachments"] ?? [];
    const valid = new Set(
      (list as { containerID: string; ifname: string }[]).map((v) =>
        `${v.containerID}/${v.ifname}`
      ),
    );
    let failure: unknown;
    for (const listed of await this.d.state.listAttachments()) {
      // knitctl's extra interfaces are not the runtime's to list: only detach removes them.
      if (isExtraContainer(listed.containerId)) continue;
      // Another plugin's interfaces are not in knitter's list, nor knitter's in theirs.
      if (listed.ipam?.cniNetwork !== ipamOf) continue;
      const key = `${listed.containerId}/${listed.ifName}`;
      // An ADD being answered now is newer than the runtime's list: not the list's to judge.
      if (valid.has(key) || this.adding.has(key)) continue;
      try {
        await this.locked(recordLockKey(listed), async () => {
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
    return this.locked(recordLockKey(listed), async () => {
      const a = await this.d.state.getAttachment(listed.containerId, listed.ifName);
      if (!a || a.createdAt !== listed.createdAt) return false;
      // Gone still (reaper.ts): the path missing, or another namespace there.
      if (!goneReason(a, await this.namespaces.idNow(a.netns))) return false;
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

  /**
   * Completes `listed` as ready: a record an ADD answered left "building" (settle.ts), under the
   * container's lock. Nothing is done when the record changed meanwhile (a DEL, another ADD) or
   * `lacks` names something of it that is not there; answers whether it was completed.
   */
  completeAnswered(
    listed: Attachment,
    lacks: (a: Attachment) => Promise<string | undefined>,
  ): Promise<boolean> {
    return this.locked(recordLockKey(listed), async () => {
      const a = await this.d.state.getAttachment(listed.containerId, listed.ifName);
      if (!a || a.createdAt !== listed.createdAt || a.status !== "building") return false;
      const missing = await lacks(a);
      if (missing !== undefined) {
        this.d.log.warn("an ADD cut short by a restart is not whole: left for the runtime's DEL", {
          container: a.containerId,
          ifName: a.ifName,
          missing,
        });
        return false;
      }
      a.status = "ready";
      await this.d.state.putAttachment(a);
      this.d.log.info("an ADD answered before a restart completed as ready", {
        container: a.containerId,
        ifName: a.ifName,
      });
      return true;
    });
  }

  private async doAdd(req: AgentRequest): Promise<CniResult> {
    const pod = await this.namespaces.pod(req.netns ?? "");
    // Knitter as another plugin's IPAM: the port of one interface, nothing made here.
    if (isIpamCall(req.config)) return await this.addIpam(req, pod);
    return await this.addWith(req, pod);
  }

  private async addWith(req: CniRequest, pod: PodNetns): Promise<CniResult> {
    const netns = pod.path;
    const want = podRequest(req, this.d.defaults);
    const delegated = this.d.delegates ? await this.d.delegates.split(req, want) : [];
    const existing = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (existing) {
      const stale = existing.status === "ready" ? await this.staleness(existing, pod) : "";
      if (stale === undefined) {
        // The same ADD again, for the netns that still has what it made: the same answer.
        return withDelegates(
          cniResult(
            netns,
            existing.interfaces.map((i) => ({ ...i, port: i.port! })),
            req.config.prevResult,
          ),
          existing.delegates ?? [],
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
      // Journaled with the rest before anything is made: DEL runs their plugins' DEL too.
      ...(delegated.length > 0 ? { delegates: delegated } : {}),
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
        ...(w.bandwidth ? { bandwidth: w.bandwidth } : {}),
      });
    }
    this.requireOwnPorts(a);
    requireRoom(a, req.config.prevResult);
    try {
      await this.d.wiring.wire(a, {
        what: "ADD",
        ...this.portAsk(want),
        accept: (i, k) => {
          requirePrefix(i.port, want.interfaces[k]);
          requireDataPlane(i.port, "ovs");
        },
        shape: (i) => ({ mtu: i.port.mtu, routes: podRoutes(i) }),
        externalIds,
        complete: (a) => {
          a.result = cniResult(
            netns,
            a.interfaces.map((i) => ({ ...i, port: i.port! })),
            req.config.prevResult,
          );
        },
      });
    } catch (err) {
      // The record stays when the rollback did not finish: the runtime's DEL will finish the job.
      throw toCniError(err, `Cannot attach ${req.containerId} (${netns})`);
    }
    if (delegated.length > 0) await this.addDelegates(a, req);
    this.d.log.info("attached", {
      container: a.containerId,
      netns,
      interfaces: a.interfaces.length,
    });
    return a.result as CniResult;
  }

  /**
   * The delegate plugins' ADDs, after knitter's own interfaces: their results join the pod's. A
   * failure undoes the whole attachment (every delegate's DEL, then knitter's own interfaces).
   */
  private async addDelegates(a: Attachment, req: CniRequest): Promise<void> {
    const at = { containerId: a.containerId, netns: a.netns, args: req.args };
    try {
      for (const d of a.delegates ?? []) await this.d.delegates!.add(at, d);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      // The ADD's failure is the answer; a rollback left unfinished is the runtime's DEL's to end.
      await this.undo(a, `ADD failed: ${why}`).catch((undoErr) =>
        this.d.log.error("rollback of a failed delegate ADD is unfinished", {
          container: a.containerId,
          error: String(undoErr),
        })
      );
      throw err;
    }
    a.result = withDelegates(a.result as CniResult, a.delegates ?? []);
    await this.d.state.putAttachment(a);
  }

  /**
   * An IPAM call's ADD (ipam_call.ts): the manager's port for this container and interface, recorded
   * like any, with nothing made on the node. The same ADD again answers the same addresses.
   */
  private async addIpam(req: AgentRequest, pod: PodNetns): Promise<CniResult> {
    const want = ipamPodRequest(req, this.d.defaults);
    const w = want.interfaces[0];
    const portId = portIdFor(want.owner, w.ifName);
    const existing = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (existing) {
      const same = existing.ipam && existing.status === "ready" && existing.netns === pod.path &&
        existing.interfaces[0]?.portId === portId && existing.interfaces[0].network === w.network &&
        existing.tenant === want.tenant;
      if (same) return existing.result as CniResult;
      await this.undo(existing, "IPAM ADD again, asking for another port or netns");
    }
    const a: Attachment = {
      containerId: req.containerId,
      ifName: req.ifName,
      netns: pod.path,
      netnsId: pod.id,
      tenant: want.tenant,
      pod: want.pod,
      status: "adding",
      // No veth and no flows: no host end, no flow cookie.
      interfaces: [{
        ifName: w.ifName,
        hostIfName: "",
        portId,
        tenant: want.tenant,
        network: w.network,
        cookie: 0,
        defaultRoute: w.defaultRoute,
      }],
      createdAt: new Date().toISOString(),
      ipam: { cniNetwork: req.config.name },
    };
    this.requireOwnPorts(a);
    try {
      await this.d.wiring.wire(a, {
        what: "IPAM ADD",
        ...this.portAsk(want),
        accept: (i) => {
          requirePrefix(i.port, w);
          requireDataPlane(i.port, "external");
        },
        shape: (i) => ({ mtu: i.port.mtu, routes: podRoutes(i) }),
        externalIds,
        complete: (a) => {
          a.result = ipamResult(a.interfaces[0].port!, w.defaultRoute);
        },
      });
    } catch (err) {
      throw toCniError(err, `Cannot give ${req.containerId}/${req.ifName} an address`);
    }
    this.d.log.info("addressed (IPAM)", {
      container: a.containerId,
      ifName: a.ifName,
      network: w.network,
    });
    return a.result as CniResult;
  }

  /** How the manager is asked for the wanted interfaces' ports, and its refusals explained. */
  private portAsk(want: PodRequest): Pick<WireRequest, "portRequest" | "refused"> {
    return {
      portRequest: (i, k) => {
        const w = want.interfaces[k];
        return {
          ...(w.ip ? { ip: w.ip } : {}),
          ...(w.ipGroup ? { ipGroup: w.ipGroup } : {}),
          ...(w.mac ? { mac: w.mac } : {}),
          ...(w.claim ? { claim: w.claim } : {}),
          node: this.d.nodeName,
          ...(want.pod ? { pod: want.pod } : {}),
          interface: i.ifName,
        };
      },
      refused: (err, k) => withSource(withTenantHint(err, want), want.interfaces[k]),
    };
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
      const st = await this.d.links.state(a.netns, i.ifName);
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
      const other = this.d.state.holdersOf(i, a)[0];
      if (!other) continue;
      throw new CniError(
        CNI_CODE.tryAgainLater,
        `Port "${i.portId}" on network "${i.network}" is held by container ${other.containerId} (netns ${other.netns}) on this node, another sandbox of ${
          a.pod ? `pod ${a.pod.namespace}/${a.pod.name}` : "this pod"
        }; its address is the pod's stable one, so this sandbox gets it once the runtime has deleted that one (CNI DEL): retry then`,
      );
    }
  }

  private async doDel(req: CniRequest): Promise<void> {
    const a = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (!a) return; // Already undone, or never made here: DEL succeeds.
    await this.undo(a, "DEL");
  }

  /** Undoes an attachment as its record says (wiring.ts unwire). */
  private async undo(a: Attachment, why: string): Promise<void> {
    try {
      // The delegates' interfaces first, in reverse: their plugins' DEL releases their ports.
      for (const d of [...(a.delegates ?? [])].reverse()) await this.delDelegate(a, d);
      await this.d.wiring.unwire(a, why);
    } catch (err) {
      throw toCniError(err, `Cannot detach ${a.containerId} (${why})`);
    }
  }

  private async doCheck(req: CniRequest): Promise<void> {
    const a = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (!a || a.status !== "ready" || !a.ipam !== !isIpamCall(req.config)) {
      throw new CniError(
        CNI_CODE.checkFailed,
        `No ${
          isIpamCall(req.config) ? "address given by the knitter IPAM to" : "attachment of"
        } ${req.containerId}/${req.ifName} on this node`,
      );
    }
    if (a.ipam) return checkIpam(a, req.config.prevResult as CniResult | undefined);
    for (const d of a.delegates ?? []) {
      await this.requireDelegates().check({ containerId: a.containerId, netns: a.netns }, d);
    }
    const id = await this.namespaces.idNow(a.netns);
    if (a.netnsId !== undefined && id !== null && id !== "missing" && id !== a.netnsId) {
      throw new CniError(
        CNI_CODE.checkFailed,
        `${a.netns} is not the network namespace ADD made ${a.ifName} in: the sandbox was recreated; ADD it again`,
      );
    }
    for (const i of a.interfaces) {
      const st = await this.d.links.state(a.netns, i.ifName);
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
      const lost = await this.d.wiring.limitsLost(a, i);
      if (lost.length > 0) {
        throw new CniError(
          CNI_CODE.checkFailed,
          `Interface ${where}: ${lost.join("; ")}; it was removed or changed after ADD`,
          "A process with CAP_NET_ADMIN in the pod, or tc on the node, took away the token bucket knitter put on the veth. DEL and ADD the pod again to restore it, and do not give the pod CAP_NET_ADMIN if its limits must hold.",
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

  /**
   * A delegate's DEL. One with no result recorded failed its ADD (and cleaned up after itself, as
   * CNI plugins do) or was cut short by a crash: its DEL is still tried, and its failure (e.g. the
   * master it never found) is not this DEL's.
   */
  private async delDelegate(a: Attachment, d: DelegatedInterface): Promise<void> {
    const at = { containerId: a.containerId, netns: a.netns };
    try {
      await this.requireDelegates().del(at, d);
    } catch (err) {
      if (d.result) throw err;
      this.d.log.warn("DEL of a delegate that never finished its ADD failed", {
        container: a.containerId,
        ifName: d.ifName,
        error: String(err),
      });
    }
  }

  /** The delegate runner, which a record with delegates was made with. */
  private requireDelegates(): Delegates {
    if (this.d.delegates) return this.d.delegates;
    throw new CniError(
      CNI_CODE.internal,
      "This attachment has interfaces made by delegate plugins, and this agent runs none",
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
 * The lock of a call: knitter's own interfaces by container, the IPAM calls apart, since a delegate
 * plugin that knitter runs under the pod's lock calls the knitter IPAM for the same container.
 */
function lockKey(req: CniRequest): string {
  return isIpamCall(req.config) ? `ipam:${req.containerId}` : req.containerId;
}

function recordLockKey(a: Attachment): string {
  return a.ipam ? `ipam:${a.containerId}` : a.containerId;
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

/**
 * CHECK of an IPAM record: the calling plugin checks its interface has the addresses of its
 * prevResult; knitter checks that prevResult has the addresses it gave.
 */
function checkIpam(a: Attachment, prev: CniResult | undefined): void {
  const listed = new Set((prev?.ips ?? []).map((ip) => ip.address));
  const port = a.interfaces[0].port!;
  const lost = portAddresses(port).filter((address) => !listed.has(address));
  if (lost.length === 0) return;
  throw new CniError(
    CNI_CODE.checkFailed,
    `prevResult of ${a.containerId}/${a.ifName} lacks ${
      lost.join(", ")
    }, which the knitter IPAM gave it (port "${port.id}" on network "${port.network}")`,
  );
}

/**
 * A port is wired by the plugin its network's data plane is for. The knitter IPAM gives no address
 * on an Open vSwitch network (the other nodes' switches would send its traffic to this node's
 * switch, where it has no port), and knitter makes no veth on an external one (its flows and
 * every node's would claim an address another plugin's interface has).
 */
function requireDataPlane(port: Port, wanted: "ovs" | "external"): void {
  const has = port.networkDataPlane ?? "ovs";
  if (has === wanted) return;
  const [msg, fix] = has === "ovs"
    ? [
      `Network "${port.network}" has the Open vSwitch data plane (knitter's own veths and flows), so the knitter IPAM gives no addresses on it`,
      `make the interface with knitter instead ("type": "knitter", "networks": ["${port.network}"]), or give the other plugin's interfaces a network created with "dataPlane": "external"`,
    ]
    : [
      `Network "${port.network}" has an external data plane (another plugin's interfaces, with the knitter IPAM), so knitter makes no interface of its own on it`,
      `make the interface with macvlan, ipvlan, host-device or sriov and "ipam": {"type": "knitter", "network": "${port.network}"}, or ask knitter for a network with the Open vSwitch data plane`,
    ];
  throw new CniError(CNI_CODE.invalidConfig, msg, fix);
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
/** The manager's "Tenant ... does not exist", with what to do about it. */
function withTenantHint(err: unknown, want: PodRequest): unknown {
  if (!(err instanceof ManagerError) || err.code !== "not_found") return err;
  if (err.message !== `Tenant "${want.tenant}" does not exist`) return err;
  return new ManagerError(
    err.status,
    err.code,
    `${err.message}; ${missingTenantHint(want)}`,
    err.field,
  );
}

function withSource(err: unknown, w: WantedInterface): unknown {
  if (!(err instanceof ManagerError)) return err;
  const from = err.field === "ip" ? w.ipFrom : err.field === "mac" ? w.macFrom : undefined;
  if (!from) return err;
  return new ManagerError(err.status, err.code, `${from}: ${err.message}`, err.field);
}
