/**
 * What only the node's agent can see, for `knitctl trace` and `knitctl verify node`:
 *
 * - a live trace: the packet goes through the switch's real pipeline (`ovs-appctl ofproto/trace`,
 *   which forwards nothing), and each flow it matched is named with the agent's state (ports,
 *   networks, remote endpoints) by explainHop (../wasm/flow_trace.ts);
 * - what verify compares: the flows diff, the bridge's ports against the agent's state, and the
 *   state's ports (knitctl compares those with the manager's).
 */
import {
  evalPacket,
  explainHop,
  flowGateways,
  ofprotoFlow,
  parseOfprotoTrace,
  portLabel,
  type TraceHop,
  type TraceIngress,
  type TracePacket,
  type TraceTarget,
  type TraceView,
} from "@knitter/wasm";
import { portIps } from "@knitter/common";
import type { Dataplane, FlowDiff } from "./dataplane.ts";
import { networkDscp } from "./dscp_model.ts";
import type { Healer } from "./healer.ts";
import type { Ovs, OvsPort } from "./ovs.ts";
import type { RemoteView } from "./remote.ts";
import type { AgentState, AttachedInterface, Attachment } from "../state.ts";

export interface TraceDeps {
  nodeName: string;
  bridge: string;
  tunnelOfport: number;
  /** `ovs-appctl ofproto/trace BRIDGE FLOW` (Ovs.ofprotoTrace). */
  ofprotoTrace(bridge: string, flow: string): Promise<string>;
  state: AgentState;
  remote: RemoteView;
  physnetPort(physnet: string): number | undefined;
  /** The bridge's own ports (tunnel, patch ports, uplinks): never a pod's. */
  preparedPorts(): string[];
  listPorts(bridge: string): Promise<OvsPort[]>;
  flowDiff(): Promise<FlowDiff>;
}

/** The inspector's deps from the running agent's parts (daemon.ts). */
export function traceDeps(parts: {
  config: {
    nodeName: string;
    bridge: string;
    tunnel: { ofport: number };
  };
  state: AgentState;
  remote: RemoteView;
  dataplane: Dataplane;
  ovs: Ovs;
  healer: Healer;
}): TraceDeps {
  const { config, dataplane, ovs, healer } = parts;
  return {
    nodeName: config.nodeName,
    bridge: config.bridge,
    tunnelOfport: config.tunnel.ofport,
    state: parts.state,
    remote: parts.remote,
    physnetPort: (physnet) => dataplane.physnetPort(physnet),
    preparedPorts: () => dataplane.preparedNames().ports,
    listPorts: (bridge) => ovs.listPorts(bridge),
    ofprotoTrace: (bridge, flow) => ovs.ofprotoTrace(bridge, flow),
    flowDiff: () => healer.diff(),
  };
}

/**
 * Where a traced packet enters this node: a local port by its manager ID (and tenant: port IDs are
 * per tenant, two tenants may each have one of the same ID on a public network), the tunnel, a
 * physnet.
 */
export type TraceFrom =
  | { kind: "port"; portId: string; tenant?: string }
  | { kind: "tunnel"; vni: number }
  | { kind: "physnet"; physnet: string; vlan?: number };

export interface TraceRequest {
  from: TraceFrom;
  packet: TracePacket;
  target?: TraceTarget;
}

/** One port of the agent's state, as verify shows it. */
export interface StatePort {
  portId: string;
  tenant: string;
  network: string;
  containerId: string;
  ifName: string;
  hostIfName: string;
  ofport?: number;
  ip?: string;
  mac?: string;
  /** Knitter was another plugin's IPAM for it: no veth, no switch port, no flows (hostIfName ""). */
  dataPlane?: "external";
}

export interface VerifyView {
  node: string;
  bridge: string;
  flows: FlowDiff;
  /** State entries whose port is not on the bridge, or not at its ofport. */
  missingPorts: { hostIfName: string; portId: string; ofport?: number; found?: number }[];
  /** Ports on the bridge that are neither the agent's own nor in its state. */
  extraPorts: { name: string; ofport: number }[];
  state: StatePort[];
}

export class NodeInspector {
  constructor(private readonly d: TraceDeps) {}

  /** The node's numbers named: its networks, local ports and the remote ports it forwards to. */
  async view(): Promise<TraceView> {
    const networks = new Map<string, TraceView["networks"][number]>();
    const localPorts: TraceView["localPorts"] = [];
    for (const a of this.d.state.attachmentsView()) {
      for (const i of a.interfaces) {
        if (!i.port || i.ofport === undefined) continue;
        const p = i.port;
        let net = networks.get(p.networkId);
        if (!net) {
          net = {
            id: await this.d.state.networkNumber(p.networkId),
            label: `${p.networkTenant}/${p.network}`,
            type: p.type,
          };
          if (p.segmentId !== undefined) net.segmentId = p.segmentId;
          Object.assign(net, flowGateways(p.networkId, p.gateway, p.gateway6));
          const dscp = networkDscp(p, this.d.remote);
          if (dscp !== undefined) net.dscp = dscp;
          if (p.physnet !== undefined) {
            net.physnet = p.physnet;
            const ofport = this.d.physnetPort(p.physnet);
            if (ofport !== undefined) net.physnetPort = ofport;
          }
          networks.set(p.networkId, net);
        }
        localPorts.push({
          ofport: i.ofport,
          network: net.id,
          label: portLabel(p),
          mac: p.mac,
          ips: portIps(p),
        });
      }
    }
    const remotePorts: TraceView["remotePorts"] = [];
    for (const p of this.d.remote.ports()) {
      if (p.node === this.d.nodeName || !p.node) continue;
      const net = networks.get(p.networkId);
      const nodeIp = this.d.remote.nodeIp(p.node);
      if (!net || !nodeIp) continue;
      remotePorts.push({
        network: net.id,
        mac: p.mac,
        ips: portIps(p),
        nodeIp,
        node: p.node,
        label: portLabel(p),
      });
    }
    return {
      node: this.d.nodeName,
      tunnelPort: this.d.tunnelOfport,
      networks: [...networks.values()],
      localPorts,
      remotePorts,
    };
  }

  /** The packet through the switch's pipeline (ofproto/trace), step by step. */
  async trace(req: TraceRequest): Promise<TraceHop> {
    const view = await this.view();
    const ingress = this.ingress(req.from);
    const packet = evalPacket(view, ingress, req.packet);
    const text = await this.d.ofprotoTrace(this.d.bridge, ofprotoFlow(packet));
    const matched = parseOfprotoTrace(text, this.d.bridge);
    return explainHop(view, ingress, req.packet, matched, {
      mode: "live",
      ...(req.target ? { target: req.target } : {}),
    });
  }

  private ingress(from: TraceFrom): TraceIngress {
    if (from.kind === "tunnel") return { kind: "tunnel", vni: from.vni };
    if (from.kind === "physnet") {
      if (this.d.physnetPort(from.physnet) === undefined) {
        throw new TraceRefused(
          `Node ${this.d.nodeName} has no bridge for physnet "${from.physnet}"`,
        );
      }
      return from.vlan === undefined
        ? { kind: "physnet", physnet: from.physnet }
        : { kind: "physnet", physnet: from.physnet, vlan: from.vlan };
    }
    const found = this.localPorts(from);
    const tenants = [...new Set(found.map(({ i }) => i.tenant))].sort();
    if (tenants.length > 1) {
      throw new TraceRefused(
        `Port "${from.portId}" on node ${this.d.nodeName} is one of tenants ${
          tenants.join(", ")
        }: name the tenant whose port to trace from`,
      );
    }
    for (const { a, i } of found) {
      if (i.ofport !== undefined) return { kind: "port", ofport: i.ofport };
      if (a.ipam) {
        throw new TraceRefused(
          `Port "${from.portId}" is another plugin's interface (knitter is its IPAM): network "${i.network}" has the external data plane, so no Open vSwitch flows carry it and there is nothing to trace`,
        );
      }
    }
    const whose = from.tenant === undefined ? "" : ` of tenant ${from.tenant}`;
    throw new TraceRefused(
      `Port "${from.portId}"${whose} is not plugged on node ${this.d.nodeName}: trace it where its pod runs, or --offline`,
    );
  }

  /** The interfaces here on the port `from` names (of its tenant, if it names one). */
  private localPorts(from: { portId: string; tenant?: string }) {
    const found: { a: Readonly<Attachment>; i: Readonly<AttachedInterface> }[] = [];
    for (const a of this.d.state.attachmentsView()) {
      for (const i of a.interfaces) {
        if (i.portId !== from.portId) continue;
        if (from.tenant === undefined || i.tenant === from.tenant) found.push({ a, i });
      }
    }
    return found;
  }

  /** The flows diff, the bridge's ports against the state, and the state's ports. */
  async verify(): Promise<VerifyView> {
    const [flows, onBridge] = await Promise.all([
      this.d.flowDiff(),
      this.d.listPorts(this.d.bridge),
    ]);
    const byName = new Map(onBridge.map((p) => [p.name, p]));
    const state: StatePort[] = [];
    const missingPorts: VerifyView["missingPorts"] = [];
    for (const a of this.d.state.attachmentsView()) {
      for (const i of a.interfaces) {
        state.push({
          portId: i.portId,
          tenant: i.tenant,
          network: i.network,
          containerId: a.containerId,
          ifName: i.ifName,
          hostIfName: i.hostIfName,
          ...(i.ofport !== undefined ? { ofport: i.ofport } : {}),
          ...(i.port ? { ip: i.port.ip, mac: i.port.mac } : {}),
          ...(a.ipam ? { dataPlane: "external" as const } : {}),
        });
        if (i.ofport === undefined) continue;
        const found = byName.get(i.hostIfName);
        if (!found || found.ofport !== i.ofport) {
          missingPorts.push({
            hostIfName: i.hostIfName,
            portId: i.portId,
            ofport: i.ofport,
            ...(found ? { found: found.ofport } : {}),
          });
        }
      }
    }
    const known = new Set([...this.d.preparedPorts(), ...state.map((s) => s.hostIfName)]);
    const extraPorts = onBridge
      .filter((p) => !known.has(p.name))
      .map((p) => ({ name: p.name, ofport: p.ofport }));
    return {
      node: this.d.nodeName,
      bridge: this.d.bridge,
      flows,
      missingPorts,
      extraPorts,
      state,
    };
  }
}

/** A trace the agent cannot make from what it was asked (a 400, not a failure). */
export class TraceRefused extends Error {}
