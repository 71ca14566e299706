/**
 * In-memory fakes of the seams (seams.ts), for unit tests without root or Open vSwitch: one
 * {@link FakeWorld} holds what exists (veths, switch ports, the manager's ports, the records) and
 * serves every seam from it. A failure can be injected at any step (`failAt`); a failed step makes
 * what its real counterpart may leave behind (a switch port added with an error stays, a port the
 * manager allocated before the answer was lost stays), so a test sees whether the undo finds it.
 */
import type {
  EffectiveBandwidth,
  Port,
  PortRequest,
  RunResult,
  StartedCommand,
} from "@knitter/common";
import { ManagerError, ManagerUnavailableError } from "@knitter/common";
import { InterfaceExistsError, type PodInterfaceSpec, type PodPairSpec } from "./ip_links.ts";
import type { OvsPortSpec } from "../dataplane/ovs.ts";
import type {
  AttachmentStore,
  Bridges,
  Flows,
  Links,
  PortManager,
  Shaper,
  SwitchPorts,
} from "./seams.ts";
import { type Attachment, samePort } from "../state.ts";
import type { WiringDeps } from "./wiring.ts";

/** The steps a failure can be injected at. */
export type FakeStep =
  | "state.put"
  | "manager.putPort"
  | "manager.deletePort"
  | "links.create"
  | "links.configure"
  | "links.remove"
  | "switch.add"
  | "switch.remove"
  | "switch.label"
  | "bridges.addPorts"
  | "flows.sync"
  | "shaper.apply"
  | "shaper.clear";

/** How an injected failure of `manager.putPort` looks. */
export type PortFailure = "refused" | "not sent" | "answer lost";

/** An interface in a namespace: a veth's pod end, or another's (`hostIfName` absent). */
export interface FakePodEnd {
  mac: string;
  mtu: number;
  addresses: string[];
  routes: { dst: string; via?: string }[];
  hostIfName?: string;
  softwareChecksums?: boolean;
}

export class FakeWorld implements Flows {
  /** Pod ends by "netns/ifName". */
  readonly podEnds = new Map<string, FakePodEnd>();
  /** Host ends of veths, with their pod end's key. */
  readonly hostEnds = new Map<string, string>();
  /** Ports by bridge and name. */
  readonly switchPorts = new Map<string, Map<string, OvsPortSpec>>();
  /** The manager's ports by "tenant/network/id"; unbound ones have no pod. */
  readonly managerPorts = new Map<string, Port>();
  readonly records = new Map<string, Attachment>();
  /** Bandwidth limits on veths, by host end (both of its ends). */
  readonly limits = new Map<string, EffectiveBandwidth>();
  readonly ofportsTaken = new Set<number>();
  readonly physnets = new Map<string, number>();
  /** Every call, in order, as "seam.method name". */
  readonly calls: string[] = [];
  flowSyncs = 0;
  readonly bridge = "br-int";
  softwareChecksums = false;
  private nextOfport = 1000;
  private nextIp = 2;
  private readonly failures = new Map<FakeStep, { nth: number; seen: number; how?: PortFailure }>();

  /** Fails the `nth` call of `step` from now on (1: the next one). */
  failAt(step: FakeStep, nth = 1, how?: PortFailure): void {
    this.failures.set(step, { nth, seen: 0, how });
  }

  /** An interface that knitter did not make, in a namespace. */
  addForeign(netns: string, ifName: string, mac = "0a:00:00:00:00:99"): void {
    this.podEnds.set(`${netns}/${ifName}`, { mac, mtu: 1500, addresses: [], routes: [] });
  }

  /** Every seam of the wiring (wiring.ts WiringDeps), served from this world. */
  seams(): Omit<WiringDeps, "nodeName" | "log"> {
    const { links, ports, bridges, manager, state, shaper } = this;
    return { links, ports, bridges, flows: this, shaper, manager, state };
  }

  /** What exists, as plain data, to compare before and after. */
  snapshot(): Record<string, unknown> {
    return {
      podEnds: Object.fromEntries(this.podEnds),
      hostEnds: Object.fromEntries(this.hostEnds),
      switchPorts: Object.fromEntries(
        [...this.switchPorts].filter(([, ports]) => ports.size > 0)
          .map(([b, ports]) => [b, [...ports.keys()].sort()]),
      ),
      managerPorts: Object.fromEntries(this.managerPorts),
      records: Object.fromEntries(this.records),
      limits: Object.fromEntries(this.limits),
      ofportsTaken: [...this.ofportsTaken].sort(),
    };
  }

  physnetPort(physnet: string): number | undefined {
    return this.physnets.get(physnet);
  }

  sync(): Promise<void> {
    return this.step("flows.sync", "", () => {
      this.flowSyncs++;
    });
  }

  /** Runs a step, or fails it as injected; `partial` is what the failing step leaves made. */
  step<T>(name: FakeStep, what: string, fn: () => T, partial?: () => void): Promise<T> {
    const failed = this.fault(name, what, partial);
    if (failed) return Promise.reject(failed);
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Notes a step in `calls`; the failure injected for it now (after `partial`), if any. */
  private fault(name: FakeStep, what: string, partial?: () => void): Error | undefined {
    this.calls.push(what ? `${name} ${what}` : name);
    const f = this.failures.get(name);
    if (!f || ++f.seen !== f.nth) return undefined;
    partial?.();
    return this.failure(name, f.how);
  }

  private failure(name: FakeStep, how?: PortFailure): Error {
    if (name !== "manager.putPort") return new Error(`injected failure: ${name}`);
    if (how === "not sent") {
      return new ManagerUnavailableError("injected: connection refused", { notSent: true });
    }
    if (how === "answer lost") return new ManagerUnavailableError("injected: answer lost");
    return new ManagerError(409, "address_taken", "injected: address taken", "ip");
  }

  readonly links: Links = {
    startBatch: () => Promise.resolve(new FakeBatch(this.calls)),
    create: (spec: PodInterfaceSpec) =>
      this.step("links.create", spec.hostIfName, () => this.makeVeth(spec)),
    // A "links.create" step like create, done (or failed) when the batch ends or is asked whether
    // the pair is made, as `ip` reports it then: the pod end with the kernel's MAC, down.
    sendPair: (spec: PodPairSpec, batch) => {
      const failed = this.fault("links.create", spec.hostIfName);
      (batch as FakeBatch).atEnd(() => {
        if (failed) throw failed;
        this.makeVeth({ ...spec, mac: KERNEL_MAC, addresses: [], routes: [] });
      });
      return Promise.resolve();
    },
    pairMade: (batch) => (batch as FakeBatch).printed(),
    // A failing step leaves nothing of the interface, as completePodInterface deletes the host end.
    complete: async (spec: PodInterfaceSpec, madeMtu: number, batch) => {
      const b = batch as FakeBatch;
      await b.finish();
      if (b.failed) throw b.failed;
      await this.step("links.configure", spec.hostIfName, () => {
        const end = this.podEnds.get(`${spec.netns}/${spec.ifName}`)!;
        if (end.mtu !== madeMtu) throw new Error("not the MTU it was made with");
        Object.assign(end, {
          mac: spec.mac,
          mtu: spec.mtu,
          addresses: [...spec.addresses],
          routes: spec.routes.map((r) => ({ ...r })),
          ...(spec.softwareChecksums ? { softwareChecksums: true } : {}),
        });
      }, () => this.dropVeth(spec.hostIfName));
    },
    remove: (hostIfName, pod) =>
      this.step("links.remove", hostIfName, () => {
        if (this.dropVeth(hostIfName)) return true;
        if (!pod?.mac) return false;
        const podKey = `${pod.netns}/${pod.ifName}`;
        const end = this.podEnds.get(podKey);
        if (!end?.hostIfName || end.mac !== pod.mac) return false;
        this.podEnds.delete(podKey);
        return true;
      }),
    state: (netns, ifName) => {
      const end = this.podEnds.get(`${netns}/${ifName}`);
      return Promise.resolve(
        end ? { mac: end.mac, mtu: end.mtu, addresses: [...end.addresses], up: true } : null,
      );
    },
  };

  /** A failing apply leaves the host end's limit made (tc on the host end ran first). */
  readonly shaper: Shaper = {
    apply: (ends, limits) =>
      this.step("shaper.apply", ends.hostIfName, () => {
        if (!this.hostEnds.has(ends.hostIfName)) throw new Error(`no veth ${ends.hostIfName}`);
        this.limits.set(ends.hostIfName, limits);
      }, () => this.limits.set(ends.hostIfName, { ingress: limits.ingress })),
    clear: (ends) =>
      this.step("shaper.clear", ends.hostIfName, () => {
        this.limits.delete(ends.hostIfName);
      }),
    read: (ends) => {
      const l = this.limits.get(ends.hostIfName);
      return Promise.resolve({
        ...(l?.ingress ? { ingress: l.ingress.rate } : {}),
        ...(l?.egress ? { egress: l.egress.rate } : {}),
      });
    },
  };

  readonly ports: SwitchPorts = {
    takeOfport: () => {
      while (this.ofportsTaken.has(this.nextOfport)) this.nextOfport++;
      this.ofportsTaken.add(this.nextOfport);
      return this.nextOfport;
    },
    release: (ofports) => {
      for (const n of ofports) if (n !== undefined) this.ofportsTaken.delete(n);
    },
    add: (ports) => {
      const names = ports.map((p) => p.name).join(",");
      // A port added with an error stays in the database, as in Open vSwitch.
      return this.step("switch.add", names, () => this.addPorts(this.bridge, ports), () => {
        this.addPorts(this.bridge, ports);
      });
    },
    remove: (names) =>
      this.step("switch.remove", names.join(","), () => this.delPorts(this.bridge, names)),
    label: (name, externalIds) =>
      this.step("switch.label", name, () => {
        const port = this.switchPorts.get(this.bridge)?.get(name);
        if (!port) throw new Error(`no port ${name}`);
        port.externalIds = { ...externalIds };
      }),
  };

  readonly bridges: Bridges = {
    addPorts: (bridge, ports) =>
      this.step(
        "bridges.addPorts",
        `${bridge} ${ports.map((p) => p.name).join(",")}`,
        () => this.addPorts(bridge, ports),
        () => {
          this.addPorts(bridge, ports);
        },
      ),
    delPorts: (bridge, names) => {
      this.calls.push(`bridges.delPorts ${bridge} ${names.join(",")}`);
      this.delPorts(bridge, names);
      return Promise.resolve();
    },
    list: () => Promise.resolve([...this.switchPorts.keys()]),
  };

  readonly manager: PortManager = {
    putPort: (tenant: string, network: string, id: string, body: PortRequest) => {
      const key = `${tenant}/${network}/${id}`;
      const make = () => {
        // Idempotent, as the manager's PUT: the same ID is the same port (bound again if unbound).
        const known = this.managerPorts.get(key);
        const port = fakePort(tenant, network, id, body, known?.ip ?? `10.0.0.${this.nextIp++}`);
        this.managerPorts.set(key, port);
        return structuredClone(port);
      };
      const f = this.failures.get("manager.putPort");
      // Only an answer lost after the request was made leaves the port allocated.
      const partial = f?.how === "answer lost" ? () => void make() : undefined;
      return this.step("manager.putPort", id, make, partial);
    },
    deletePort: (tenant, network, id) =>
      this.step(
        "manager.deletePort",
        id,
        () => this.managerPorts.delete(`${tenant}/${network}/${id}`),
      ),
    unbindPort: (tenant, network, id) => {
      this.calls.push(`manager.unbindPort ${id}`);
      const port = this.managerPorts.get(`${tenant}/${network}/${id}`);
      if (!port) return Promise.reject(new ManagerError(404, "not_found", `no port ${id}`));
      delete port.pod;
      delete port.node;
      return Promise.resolve(structuredClone(port));
    },
  };

  readonly state: AttachmentStore = {
    getAttachment: (containerId, ifName) => {
      const a = this.records.get(`${containerId}/${ifName}`);
      return Promise.resolve(a ? structuredClone(a) : null);
    },
    putAttachment: (a) =>
      this.step("state.put", `${a.containerId}/${a.ifName}`, () => {
        this.records.set(`${a.containerId}/${a.ifName}`, structuredClone(a));
      }),
    deleteAttachment: (containerId, ifName) => {
      this.calls.push(`state.delete ${containerId}/${ifName}`);
      this.records.delete(`${containerId}/${ifName}`);
      return Promise.resolve();
    },
    listAttachments: () =>
      Promise.resolve([...this.records.values()].map((a) => structuredClone(a))),
    holdersOf: (port, except) =>
      [...this.records.values()].filter((a) =>
        !(except && a.containerId === except.containerId && a.ifName === except.ifName) &&
        a.interfaces.some((i) => samePort(i, port))
      ),
    portNumbers: (count) => Promise.resolve(Array.from({ length: count }, (_, i) => i + 1)),
  };

  /** Deletes a veth by its host end; false when there is none. */
  private dropVeth(hostIfName: string): boolean {
    const key = this.hostEnds.get(hostIfName);
    if (!key) return false;
    this.limits.delete(hostIfName);
    this.hostEnds.delete(hostIfName);
    this.podEnds.delete(key);
    return true;
  }

  /** A veth as the kernel makes it; a name taken is InterfaceExistsError. */
  private makeVeth(spec: Omit<PodInterfaceSpec, "hostNetns">): void {
    const key = `${spec.netns}/${spec.ifName}`;
    if (this.podEnds.has(key)) {
      throw new InterfaceExistsError("pod", `${spec.ifName} already exists in ${spec.netns}`);
    }
    if (this.hostEnds.has(spec.hostIfName)) {
      throw new InterfaceExistsError("host", `${spec.hostIfName} is taken on the node`);
    }
    this.podEnds.set(key, {
      mac: spec.mac,
      mtu: spec.mtu,
      addresses: [...spec.addresses],
      routes: spec.routes.map((r) => ({ ...r })),
      hostIfName: spec.hostIfName,
      ...(spec.softwareChecksums ? { softwareChecksums: true } : {}),
    });
    this.hostEnds.set(spec.hostIfName, key);
  }

  private addPorts(bridge: string, ports: OvsPortSpec[]): Map<string, number> {
    let on = this.switchPorts.get(bridge);
    if (!on) this.switchPorts.set(bridge, on = new Map());
    const out = new Map<string, number>();
    for (const p of ports) {
      on.set(p.name, structuredClone(p));
      out.set(p.name, p.ofportRequest ?? 1);
    }
    return out;
  }

  private delPorts(bridge: string, names: string[]): void {
    const on = this.switchPorts.get(bridge);
    for (const n of names) on?.delete(n);
  }
}

function fakePort(
  tenant: string,
  network: string,
  id: string,
  body: PortRequest,
  ip: string,
): Port {
  const [, , , last] = ip.split(".");
  return {
    id,
    tenant,
    network,
    networkTenant: tenant,
    networkId: `${tenant}-${network}`,
    type: "vxlan",
    segmentId: 5000,
    ip: body.ip ?? ip,
    address: `${body.ip ?? ip}/24`,
    family: 4,
    gateway: "10.0.0.1",
    mac: body.mac ?? `02:00:00:00:00:${Number(last).toString(16).padStart(2, "0")}`,
    mtu: 1450,
    routes: [],
    dns: {},
    ...(network === DUAL_STACK ? dualStack(body.ip ?? ip) : {}),
    ...(body.node ? { node: body.node } : {}),
    ...(body.pod ? { pod: body.pod } : {}),
    ...(body.interface ? { interface: body.interface } : {}),
    createdAt: "2026-11-25T00:00:00.000Z",
  };
}

/** The fake manager's dual-stack network: its ports' IPv6 addresses have their IPv4 host part. */
export const DUAL_STACK = "dual";

function dualStack(ip: string): Pick<Port, "ip6" | "address6" | "gateway6"> {
  const ip6 = `fd00::${Number(ip.split(".")[3]).toString(16)}`;
  return { ip6, address6: `${ip6}/64`, gateway6: "fd00::1" };
}

/** The MAC the kernel gives a veth's pod end made without one. */
const KERNEL_MAC = "fe:00:00:00:00:01";

/**
 * An `ip -batch` waiting for its lines: what was sent to it happens when it ends (finish, or
 * abandon: a killed `ip` may have run them, and the fake takes the worse case), noted in `calls`.
 */
class FakeBatch implements StartedCommand {
  readonly argv = ["fake"];
  /** What a line sent early failed with, once the batch ended. */
  failed?: unknown;
  private readonly pending: (() => void)[] = [];
  private ended = false;

  constructor(private readonly calls: string[]) {}

  atEnd(fn: () => void): void {
    this.pending.push(fn);
  }

  send(): Promise<void> {
    return Promise.resolve();
  }

  finish(): Promise<RunResult> {
    this.end("finish");
    return Promise.resolve({ code: 0, stdout: "", stderr: "" } as RunResult);
  }

  abandon(): Promise<void> {
    this.end("abandon");
    return Promise.resolve();
  }

  /** The lines sent so far are run now; true when they all worked (`ip` went on to print). */
  printed(): Promise<boolean> {
    this.runSent();
    return Promise.resolve(!this.ended && this.failed === undefined);
  }

  private end(how: string): void {
    if (this.ended) return;
    this.ended = true;
    this.calls.push(`batch.${how}`);
    this.runSent();
  }

  private runSent(): void {
    for (const fn of this.pending.splice(0)) {
      try {
        fn();
      } catch (err) {
        this.failed = err;
      }
    }
  }
}
