/**
 * The CNI operations on this node. ADD journals what it is about to make before making it, so
 * that a failure (or a crash) can always be undone; DEL undoes exactly that and succeeds when it
 * is already undone; CHECK compares the pod with what ADD recorded.
 */
import type { Logger, Port } from "@knitter/common";
import {
  type ManagerClient,
  ManagerUnavailableError,
  Mutex,
  type StartedCommand,
} from "@knitter/common";
import { CNI_CODE, CniError, toCniError } from "./cni_errors.ts";
import { type CniResult, cniResult, podRoutes } from "./cni_result.ts";
import type { Dataplane } from "./dataplane.ts";
import { CONTAINER_PREFIX as EXTRA_CONTAINER_PREFIX } from "./extra_interface.ts";
import {
  createPodInterface,
  deletePodInterface,
  hostIfName,
  podInterfaceState,
  startPodBatch,
} from "./netlink.ts";
import type { PortPlugger } from "./port_plugger.ts";
import { type CniRequest, podRequest, portIdFor } from "./pod_request.ts";
import type { AgentState, AttachedInterface, Attachment } from "./state.ts";

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

  constructor(private readonly d: AttacherDeps) {}

  async add(req: CniRequest): Promise<CniResult> {
    return await this.locked(req.containerId, () => this.doAdd(req));
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
    for (const a of await this.d.state.listAttachments()) {
      // knitctl's extra interfaces are not the runtime's to list: only detach removes them.
      if (a.containerId.startsWith(EXTRA_CONTAINER_PREFIX)) continue;
      if (valid.has(`${a.containerId}/${a.ifName}`)) continue;
      await this.locked(a.containerId, () => this.undo(a, "GC"));
    }
  }

  private async doAdd(req: CniRequest): Promise<CniResult> {
    const netns = req.netns ?? "";
    await requireNetns(netns);
    // The first interface's `ip` starts now and waits for its lines, while the journal and the
    // manager are waited for.
    const batch = await startPodBatch(netns);
    try {
      return await this.addWith(req, netns, batch);
    } finally {
      await batch.abandon();
    }
  }

  private async addWith(req: CniRequest, netns: string, batch: StartedCommand): Promise<CniResult> {
    const want = podRequest(req, this.d.defaults);
    const existing = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (existing?.status === "ready") return existing.result as CniResult;
    if (existing) await this.undo(existing, "ADD (left over from an interrupted ADD)");

    const a: Attachment = {
      containerId: req.containerId,
      ifName: req.ifName,
      netns,
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
          throw err;
        }
        // No journal write here: port IDs are derived, so the journal already names what to release.
        this.requirePhysnet(i.port);
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
        await this.undo(a, "rollback of a failed ADD");
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

  private async doDel(req: CniRequest): Promise<void> {
    const a = await this.d.state.getAttachment(req.containerId, req.ifName);
    if (!a) return; // Already undone, or never made here: DEL succeeds.
    await this.undo(a, "DEL");
  }

  /**
   * Undoes an attachment in reverse order. Every step tolerates what is already gone, so running it
   * again after a partial failure finishes the job. The record goes last.
   */
  private async undo(a: Attachment, why: string): Promise<void> {
    try {
      await allDone([
        this.d.plugger.remove(a.interfaces.map((i) => i.hostIfName)),
        ...a.interfaces.map((i) => deletePodInterface(i.hostIfName, a.netns, i.ifName)),
      ]);
      // Flows of the gone ports go before their addresses can be handed to someone else.
      const ports = a.interfaces;
      a.interfaces = a.interfaces.map((i) => ({ ...i, ofport: undefined }));
      await this.d.state.putAttachment(a);
      await this.d.dataplane.sync();
      this.d.plugger.release(ports.map((i) => i.ofport));
      for (const i of ports) await this.d.manager.deletePort(i.tenant, i.network, i.portId);
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
    for (const i of a.interfaces) {
      const st = await podInterfaceState(a.netns, i.ifName);
      const port = i.port!;
      const where = `${i.ifName} in ${a.netns}`;
      if (!st) throw new CniError(CNI_CODE.checkFailed, `Interface ${where} is missing`);
      if (st.mac !== port.mac) {
        throw new CniError(
          CNI_CODE.checkFailed,
          `Interface ${where} has MAC ${st.mac}, not ${port.mac}`,
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
      const owner = prev!.interfaces[ip.interface];
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

async function requireNetns(netns: string): Promise<void> {
  if (!netns) throw new CniError(CNI_CODE.invalidEnvironment, "CNI_NETNS is required for ADD");
  try {
    await Deno.stat(netns);
  } catch {
    throw new CniError(CNI_CODE.invalidEnvironment, `CNI_NETNS ${netns} does not exist`);
  }
}

function externalIds(a: Attachment, i: AttachedInterface): Record<string, string> {
  const ids: Record<string, string> = {
    "knitter-container": a.containerId,
    "knitter-ifname": i.ifName,
    "knitter-port": i.portId,
    "knitter-network": `${i.port!.networkTenant}/${i.port!.network}`,
  };
  if (a.pod) ids["knitter-pod"] = `${a.pod.namespace}/${a.pod.name}`;
  return ids;
}
