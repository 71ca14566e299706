/**
 * Extra interfaces in running pods or any netns, on request (knitctl attach / detach), as
 * network-controller did for its pods. Two kinds:
 *
 * - network: a port from the manager (the address is owned, and released on detach), a veth into
 *   br-int, and an attachment record in the agent's state, so the flows include it exactly like a
 *   pod's own interface (and keep it across restarts).
 * - bridge: a plain veth on an OVS bridge of this node, optionally as an access port of a VLAN, with
 *   the address given; the manager is not involved.
 *
 * Each is journalled before anything is made, rolled back when a step fails, and undone by detach,
 * which succeeds when there is nothing (left) to undo.
 */
import type { ExtraInterfaceView, Logger, PodRef, Route } from "@knitter/common";
import { ManagerError, ManagerUnavailableError, Mutex } from "@knitter/common";
import type { AttachBody, DetachBody } from "./extra_interface_request.ts";
import type { ExtraInterface, ExtraInterfaceStore } from "./extra_interface_store.ts";
import { hostIfName } from "../interfaces/ip_links.ts";
import { portIdFor } from "../cni/pod_request.ts";
import type { AttachmentStore, Bridges, Links } from "../interfaces/seams.ts";
import { type Attachment, EXTRA_CONTAINER_PREFIX, isExtraContainer } from "../state.ts";
import { PhysnetNotMappedError, portNetwork, type Wiring } from "../interfaces/wiring.ts";

export interface ExtraInterfaceDeps {
  nodeName: string;
  defaultTenant: string;
  store: ExtraInterfaceStore;
  state: AttachmentStore;
  /** Makes and undoes the interfaces (wiring.ts), as for a CNI ADD. */
  wiring: Wiring;
  links: Links;
  /** The switch's other bridges, for plain interfaces. */
  bridges: Bridges;
  log: Logger;
}

/** A failure with the HTTP status the agent answers and a stable code. */
export class ExtraInterfaceError extends Error {
  constructor(
    readonly status: 400 | 404 | 409 | 500 | 503,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ExtraInterfaceError";
  }
}

const BRIDGE_MTU = 1500;

export class ExtraInterfaces {
  /** Rare, operator-driven calls: one at a time keeps "same netns + ifname" checks simple. */
  private readonly mutex = new Mutex();

  constructor(private readonly d: ExtraInterfaceDeps) {}

  /** `hotplug`: made for the pod's network annotation (hot-plug), not by an operator. */
  attach(
    body: AttachBody,
    hotplug?: { uid: string },
  ): Promise<{ view: ExtraInterfaceView; created: boolean }> {
    return this.mutex.run(() => this.doAttach(body, hotplug));
  }

  detach(body: DetachBody): Promise<{ removed: boolean; netns: string; ifName: string }> {
    return this.mutex.run(() => this.doDetach(body));
  }

  /** Undoes one record (hot-plug: an interface no longer asked for, or of a pod that is gone). */
  detachRecord(id: string, why: string): Promise<boolean> {
    return this.mutex.run(async () => {
      const x = (await this.d.store.list()).find((x) => x.id === id);
      if (!x) return false;
      await this.undo(x, why);
      this.d.log.info("extra interface detached", { netns: x.netns, ifName: x.ifName, why });
      return true;
    });
  }

  /** Every record, ready or not, as kept (hot-plug compares them with a pod's annotation). */
  records(): Promise<ExtraInterface[]> {
    return this.d.store.list();
  }

  async list(): Promise<ExtraInterfaceView[]> {
    return (await this.d.store.list()).filter((x) => x.status === "ready").map(viewOf);
  }

  private async doAttach(
    body: AttachBody,
    hotplug?: { uid: string },
  ): Promise<{ view: ExtraInterfaceView; created: boolean }> {
    const target = await this.resolveNetns(body);
    const request = requestKey(body);
    const existing = await this.find(target, body.ifName);
    if (existing?.status === "ready") {
      if (sameRequest(existing.request, request)) return { view: viewOf(existing), created: false };
      throw new ExtraInterfaceError(
        409,
        "already_attached",
        `${body.ifName} in ${existing.netns} is already attached (${
          describe(existing)
        }): detach it first`,
      );
    }
    if (existing) await this.undo(existing, "left over from an interrupted attach");
    if (await this.d.links.state(target.path, body.ifName)) {
      throw new ExtraInterfaceError(
        409,
        "interface_exists",
        `${body.ifName} already exists in ${target.path} (not made by attach): pick another ifname`,
      );
    }
    const id = crypto.randomUUID().replaceAll("-", "").slice(0, 16);
    const x: ExtraInterface = {
      id,
      netns: target.path,
      netnsId: target.id,
      ifName: body.ifName,
      kind: body.network ? "network" : "bridge",
      status: "adding",
      hostIfName: hostIfName(`${EXTRA_CONTAINER_PREFIX}${id}`, body.ifName),
      bridge: body.bridge ?? this.d.wiring.bridge,
      mac: body.mac ?? randomMac(),
      mtu: body.mtu ?? BRIDGE_MTU,
      routes: body.routes,
      request,
      createdAt: new Date().toISOString(),
      ...(body.pod ? { pod: body.pod } : {}),
      ...(hotplug ? { hotplug } : {}),
      ...(body.vlan !== undefined ? { vlan: body.vlan } : {}),
      ...(body.bridge && body.ip ? { address: body.ip } : {}),
    };
    if (x.kind === "bridge") await this.requireBridge(x.bridge);
    // The journal goes first: whatever happens next, detach finds what to undo.
    await this.d.store.put(x);
    let wired = false;
    try {
      if (x.kind === "network") await this.makeNetworkInterface(x, body, target.pod);
      else await this.makeBridgeInterface(x);
      wired = true;
      x.status = "ready";
      await this.d.store.put(x);
    } catch (err) {
      // A failed wiring undid what it made; after it, all of the interface goes. What an undo
      // could not finish stays recorded, for detach.
      try {
        if (wired) await this.undo(x, "rollback of a failed attach");
        else if (!(await this.leftOver(x))) await this.d.store.delete(x.id);
      } catch (undoErr) {
        this.d.log.error("rollback incomplete", {
          netns: x.netns,
          ifName: x.ifName,
          error: String(undoErr),
        });
      }
      throw asExtraError(err, `Cannot attach ${x.ifName} in ${x.netns}`);
    }
    this.d.log.info("extra interface attached", { netns: x.netns, ifName: x.ifName, kind: x.kind });
    return { view: viewOf(x), created: true };
  }

  private async doDetach(body: DetachBody) {
    const target = await this.resolveNetns(body, true);
    const x = await this.find(target, body.ifName);
    if (!x) return { removed: false, netns: target.path, ifName: body.ifName };
    await this.undo(x, "detach");
    this.d.log.info("extra interface detached", { netns: x.netns, ifName: x.ifName });
    return { removed: true, netns: x.netns, ifName: x.ifName };
  }

  /** As a CNI ADD: the port first (a refused network leaves nothing), the veth, the flows. */
  private async makeNetworkInterface(x: ExtraInterface, body: AttachBody, pod?: PodRef) {
    const tenant = body.tenant ?? this.d.defaultTenant;
    const containerId = `${EXTRA_CONTAINER_PREFIX}${x.id}`;
    const [cookie] = await this.d.state.portNumbers(1);
    const a: Attachment = {
      containerId,
      ifName: x.ifName,
      netns: x.netns,
      tenant,
      ...(pod ? { pod } : {}),
      status: "adding",
      interfaces: [{
        ifName: x.ifName,
        hostIfName: x.hostIfName,
        portId: portIdFor(containerId, x.ifName),
        tenant,
        network: body.network!,
        cookie,
        defaultRoute: false,
      }],
      createdAt: x.createdAt,
    };
    Object.assign(x, {
      containerId,
      tenant,
      network: body.network,
      portId: a.interfaces[0].portId,
    });
    await this.d.store.put(x);
    const ip = body.ip?.split("/")[0];
    await this.d.wiring.wire(a, {
      what: "attach",
      portRequest: () => ({
        ...(ip ? { ip } : {}),
        ...(body.mac ? { mac: body.mac } : {}),
        node: this.d.nodeName,
        ...(pod ? { pod } : {}),
        interface: x.ifName,
      }),
      accept: (i) => requireMtu(i.port.mtu, i.port.network, body),
      // Never a default route: the netns has its own.
      shape: (i) => ({
        mtu: body.mtu ?? i.port.mtu,
        routes: mergeRoutes(i.port.routes, body.routes),
      }),
      externalIds: (_, i) => externalIds(x, portNetwork(i)),
    });
    const port = a.interfaces[0].port!;
    x.address = port.address;
    if (port.address6 !== undefined) x.address6 = port.address6;
    x.mac = port.mac;
    x.mtu = body.mtu ?? port.mtu;
    x.routes = mergeRoutes(port.routes, body.routes);
  }

  private makeBridgeInterface(x: ExtraInterface): Promise<void> {
    return this.d.wiring.wirePlain({
      ...x,
      addresses: x.address ? [x.address] : [],
      externalIds: externalIds(x),
    });
  }

  /**
   * Undoes an extra interface; every step tolerates what is already gone. A network interface is
   * undone through its attachment record (bridge port, veth, flows, then the manager's port).
   */
  private async undo(x: ExtraInterface, why: string): Promise<void> {
    try {
      const a = x.containerId ? await this.d.state.getAttachment(x.containerId, x.ifName) : null;
      if (a) await this.d.wiring.unwire(a, why);
      // A network interface whose journal never reached the attachment record, or a bridge one.
      await this.d.wiring.unwirePlain(x);
      await this.d.store.delete(x.id);
    } catch (err) {
      throw asExtraError(err, `Cannot undo ${x.ifName} in ${x.netns} (${why})`);
    }
  }

  /** Whether a failed attach left something its rollback could not undo (detach finishes it). */
  private async leftOver(x: ExtraInterface): Promise<boolean> {
    if (x.containerId && await this.d.state.getAttachment(x.containerId, x.ifName)) return true;
    const end = await this.d.links.state(x.netns, x.ifName).catch(() => null);
    return end?.mac === x.mac;
  }

  private async requireBridge(bridge: string): Promise<void> {
    if (bridge === this.d.wiring.bridge) {
      throw new ExtraInterfaceError(
        400,
        "bridge_managed",
        `${bridge} carries the agent's computed flows, where a plain port gets no traffic: use network instead of bridge`,
      );
    }
    const bridges = await this.d.bridges.list();
    if (!bridges.includes(bridge)) {
      throw new ExtraInterfaceError(
        404,
        "no_such_bridge",
        `No OVS bridge "${bridge}" on node "${this.d.nodeName}" (it has ${
          bridges.join(", ") || "none"
        }): create it (ovs-vsctl add-br ${bridge}) or name another`,
      );
    }
  }

  /** The netns as a path and its identity; with `gone`, a vanished netns still names a path. */
  private async resolveNetns(
    t: { netns?: string; pid?: number; pod?: string },
    gone = false,
  ): Promise<{ path: string; id: string; pod?: PodRef; podName?: string }> {
    let path: string;
    let pod: PodRef | undefined;
    let podName: string | undefined;
    if (t.pod !== undefined) {
      const [namespace, name] = t.pod.split("/");
      // The newest sandbox's: an older one's records stay until its DEL (or the reaper).
      const a = (await this.d.state.listAttachments()).filter((a) =>
        a.pod?.namespace === namespace && a.pod.name === name && a.status === "ready" &&
        !isExtraContainer(a.containerId)
      ).sort((a, b) =>
        b.createdAt.localeCompare(a.createdAt)
      )[0];
      if (!a) {
        if (gone) return { path: `pod ${t.pod}`, id: "", podName: t.pod };
        throw new ExtraInterfaceError(
          404,
          "pod_not_here",
          `Pod ${t.pod} has no interfaces from this node's agent (node "${this.d.nodeName}"): run attach on the pod's node`,
        );
      }
      path = a.netns;
      pod = { namespace, name, ...(a.pod?.uid ? { uid: a.pod.uid } : {}) };
      podName = t.pod;
    } else if (t.pid !== undefined) {
      path = `/proc/${t.pid}/ns/net`;
    } else {
      path = t.netns!.includes("/") ? t.netns! : `/var/run/netns/${t.netns}`;
    }
    try {
      const st = await Deno.stat(path);
      return { path, id: `${st.dev}:${st.ino}`, ...(pod ? { pod, podName } : {}) };
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      if (gone) return { path, id: "", ...(podName ? { podName } : {}) };
      throw new ExtraInterfaceError(
        404,
        "no_such_netns",
        `Network namespace ${path} does not exist`,
      );
    }
  }

  /**
   * The record for this netns (by identity while it lives, else by path, or by the pod it was
   * attached to) and interface name.
   */
  private async find(target: { path: string; id: string; podName?: string }, ifName: string) {
    const all = (await this.d.store.list()).filter((x) => x.ifName === ifName);
    return all.find((x) => target.id !== "" && x.netnsId === target.id) ??
      all.find((x) => x.netns === target.path) ??
      all.find((x) => target.podName !== undefined && x.pod === target.podName);
  }
}

/** An MTU asked above the network's is refused (the port is released again). */
function requireMtu(mtu: number, network: string, body: AttachBody): void {
  if (body.mtu === undefined || body.mtu <= mtu) return;
  throw new ExtraInterfaceError(
    400,
    "mtu_too_big",
    `MTU ${body.mtu} is above network "${network}"'s ${mtu}: ask for ${mtu} or less`,
  );
}

function viewOf(x: ExtraInterface): ExtraInterfaceView {
  return {
    ifName: x.ifName,
    netns: x.netns,
    kind: x.kind,
    ...(x.address ? { address: x.address } : {}),
    ...(x.address6 ? { address6: x.address6 } : {}),
    mac: x.mac,
    mtu: x.mtu,
    hostIfName: x.hostIfName,
    bridge: x.bridge,
    ...(x.vlan !== undefined ? { vlan: x.vlan } : {}),
    ...(x.network ? { network: x.network, tenant: x.tenant, portId: x.portId } : {}),
    routes: x.routes,
  };
}

function describe(x: ExtraInterface): string {
  if (x.kind === "network") return `network ${x.tenant}/${x.network}`;
  return `bridge ${x.bridge}${x.vlan !== undefined ? ` vlan ${x.vlan}` : ""}`;
}

/** The request without its target: what must match for a repeated attach to be the same one. */
function requestKey(body: AttachBody): Record<string, unknown> {
  const { netns: _n, pid: _p, pod: _o, ...rest } = body;
  return JSON.parse(JSON.stringify(rest));
}

function sameRequest(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The network's routes, then the asked ones; an asked route replaces the network's to the same place. */
function mergeRoutes(network: Route[], asked: Route[]): Route[] {
  const dsts = new Set(asked.map((r) => r.dst));
  return [...network.filter((r) => !dsts.has(r.dst)), ...asked];
}

function externalIds(x: ExtraInterface, network?: string): Record<string, string> {
  return {
    "knitter-extra": x.id,
    "knitter-ifname": x.ifName,
    "knitter-netns": x.netns,
    ...(network ? { "knitter-network": network } : {}),
  };
}

/** Locally administered, unicast: 02:xx:xx:xx:xx:xx. */
function randomMac(): string {
  const b = crypto.getRandomValues(new Uint8Array(5));
  return ["02", ...Array.from(b, (v) => v.toString(16).padStart(2, "0"))].join(":");
}

function asExtraError(err: unknown, what: string): ExtraInterfaceError {
  if (err instanceof ExtraInterfaceError) return err;
  if (err instanceof PhysnetNotMappedError) {
    return new ExtraInterfaceError(400, "physnet_not_mapped", err.message);
  }
  if (err instanceof ManagerError) {
    const status = err.status === 404 ? 404 : err.status === 409 ? 409 : 400;
    return new ExtraInterfaceError(
      status,
      err.code,
      `${what}: the manager refused: ${err.message}`,
    );
  }
  if (err instanceof ManagerUnavailableError) {
    return new ExtraInterfaceError(
      503,
      "manager_unavailable",
      `${what}: ${err.message}; try again`,
    );
  }
  return new ExtraInterfaceError(500, "failed", `${what}: ${(err as Error).message ?? err}`);
}
