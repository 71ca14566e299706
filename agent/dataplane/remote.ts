/**
 * What the agent knows of the rest of the cluster: every port, every node's tunnel endpoint and
 * every router,
 * listed once and then followed through the manager's change feed with the shared follower
 * (common/feed_follower.ts), over a WebSocket (streamed from a manager that refuses sockets, long-polled
 * from one that does not stream either): an
 * expired feed (a manager restart) is listed again, a failed one resumed with backoff, a hung
 * stream or poll abandoned. Nothing here is ever guessed.
 */
import {
  type FeedEvent,
  FeedFollower,
  type FeedHealth,
  type Logger,
  type ManagerClient,
  ManagerError,
  type MirrorInfo,
  type Port,
  type RouterInfo,
  type SecurityGroup,
  type ServiceInfo,
  socketFirst,
} from "@knitter/common";
import { remarked } from "./dscp_model.ts";
import { portKey, type PortRef } from "./port_key.ts";

export class RemoteView {
  private readonly portsByKey = new Map<string, Port>();
  private readonly nodeIps = new Map<string, string>();
  private readonly routersByKey = new Map<string, RouterInfo>();
  /** Every tenant's security groups, by "tenant/name". */
  private readonly groups = new Map<string, SecurityGroup>();
  /** Every tenant's port mirrors, by "tenant/name". */
  private readonly mirrorsByKey = new Map<string, MirrorInfo>();
  /** Every tenant's services, by "tenant/name". */
  private readonly servicesByKey = new Map<string, ServiceInfo>();
  private readonly feed: FeedFollower;

  constructor(
    private readonly manager: ManagerClient,
    /** This node: its own ports are the journal's business, not the feed's. */
    private readonly nodeName: string,
    private readonly onChange: () => void,
    log: Logger,
  ) {
    this.feed = new FeedFollower({
      what: "the manager's feed",
      source: socketFirst(manager, log),
      relist: () => this.relist(),
      // Our own ports' events echo what this agent just did: no flow change follows from them.
      apply: (events) => {
        if (events.map((e) => this.apply(e)).some(Boolean)) this.onChange();
      },
      // The agent's flows wait on it: come back sooner than the monitor does.
      backoff: { firstMs: 100, maxMs: 5000 },
      // One socket (or streamed answer) instead of a request a page: the manager writes each page
      // once for every node of a cluster (issue 32); a manager without streams is long-polled.
      stream: true,
      log,
    });
  }

  ports(): Iterable<Port> {
    return this.portsByKey.values();
  }

  /** Every tenant's routers (each node computes the routes that leave its pods' networks). */
  routers(): Iterable<RouterInfo> {
    return this.routersByKey.values();
  }

  /** Every tenant's port mirrors (each node realises those whose collector it hosts). */
  mirrors(): Iterable<MirrorInfo> {
    return this.mirrorsByKey.values();
  }

  /** Every tenant's services (each node balances those of the networks it has ports on). */
  services(): Iterable<ServiceInfo> {
    return this.servicesByKey.values();
  }

  /** A tenant's security group, if it exists. */
  securityGroup(tenant: string, name: string): SecurityGroup | undefined {
    return this.groups.get(`${tenant}/${name}`);
  }

  /** The port as the manager last said, this node's own included. */
  port(ref: PortRef): Port | undefined {
    return this.portsByKey.get(portKey(ref));
  }

  nodeIp(node: string): string | undefined {
    return this.nodeIps.get(node);
  }

  /** Every registered node's underlay address. */
  nodeAddresses(): Set<string> {
    return new Set(this.nodeIps.values());
  }

  /**
   * Lists everything once (so the first flows are complete), then follows the feed in the
   * background; throws when that list fails (the caller tries again).
   */
  start(): Promise<void> {
    return this.feed.start();
  }

  async stop(): Promise<void> {
    await this.feed.stop();
  }

  /** The change feed's state: listed yet, stale, when last heard (metrics.ts). */
  feedHealth(): FeedHealth {
    return this.feed.health();
  }

  /** Lists ports, nodes and routers (the follower took a cursor first: nothing is lost meanwhile). */
  private async relist(): Promise<void> {
    const [ports, nodes, routers, groups, mirrors, services] = await Promise.all([
      this.manager.listPorts(),
      this.manager.listNodes(),
      unlessMissing(() => this.manager.listRouters()),
      unlessMissing(() => this.manager.listSecurityGroups()),
      unlessMissing(() => this.manager.listMirrors()),
      unlessMissing(() => this.manager.listServices()),
    ]);
    this.servicesByKey.clear();
    for (const s of services) this.servicesByKey.set(`${s.tenant}/${s.name}`, s);
    this.mirrorsByKey.clear();
    for (const m of mirrors) this.mirrorsByKey.set(`${m.tenant}/${m.name}`, m);
    this.routersByKey.clear();
    for (const r of routers) this.routersByKey.set(routerKey(r), r);
    this.groups.clear();
    for (const g of groups) this.groups.set(`${g.tenant}/${g.name}`, g);
    this.portsByKey.clear();
    for (const p of ports) this.portsByKey.set(portKey(p), p);
    this.nodeIps.clear();
    for (const n of nodes) this.nodeIps.set(n.name, n.underlayIp);
    this.onChange();
  }

  /** Applies one event; true when it can change this node's flows. */
  private apply(e: FeedEvent): boolean {
    if (e.type === "port") {
      const before = this.portsByKey.get(portKey(e.port));
      if (e.op === "put") this.portsByKey.set(portKey(e.port), e.port);
      else this.portsByKey.delete(portKey(e.port));
      // Our own port's groups and its network's DSCP and node settings change through the API,
      // not through this agent.
      // Our own port's activity changes at the manager: a live migration's activation.
      return e.port.node !== this.nodeName || regrouped(before, e.port) ||
        before?.active !== e.port.active ||
        remarked(before, e.port) || nodeReachChanged(before, e.port);
    }
    if (e.type === "securityGroup") {
      const k = `${e.securityGroup.tenant}/${e.securityGroup.name}`;
      if (e.op === "put") this.groups.set(k, e.securityGroup);
      else this.groups.delete(k);
      return true;
    }
    if (e.type === "mirror") {
      const k = `${e.mirror.tenant}/${e.mirror.name}`;
      if (e.op === "put") this.mirrorsByKey.set(k, e.mirror);
      else this.mirrorsByKey.delete(k);
      return true;
    }
    if (e.type === "service") {
      const k = `${e.service.tenant}/${e.service.name}`;
      if (e.op === "put") this.servicesByKey.set(k, e.service);
      else this.servicesByKey.delete(k);
      return true;
    }
    if (e.type === "router") {
      if (e.op === "put") this.routersByKey.set(routerKey(e.router), e.router);
      else this.routersByKey.delete(routerKey(e.router));
      return true;
    }
    if (e.op === "put") this.nodeIps.set(e.node.name, e.node.underlayIp);
    else this.nodeIps.delete(e.node.name);
    return e.node.name !== this.nodeName;
  }
}

function regrouped(before: Port | undefined, after: Port): boolean {
  const groups = (p?: Port) => JSON.stringify([p?.securityGroups, p?.networkSecurityGroups]);
  return groups(before) !== groups(after);
}

/** Its network's egress, hostAccess or advertise, or its floating address or whether it is active, changed (host_ports.ts). */
function nodeReachChanged(before: Port | undefined, after: Port): boolean {
  return before?.networkEgress !== after.networkEgress ||
    before?.networkHostAccess !== after.networkHostAccess ||
    before?.networkAdvertise !== after.networkAdvertise || before?.floating !== after.floating ||
    before?.floating6 !== after.floating6 ||
    // A claim's port that takes or leaves its traffic takes or leaves its floating address's NAT.
    ((after.floating ?? after.floating6) !== undefined && before?.active !== after.active);
}

/**
 * Every router (security group); none from a manager that predates them (404: an agent upgraded
 * first keeps its flows instead of failing every list).
 */
async function unlessMissing<T>(list: () => Promise<T[]>): Promise<T[]> {
  try {
    return await list();
  } catch (err) {
    if (err instanceof ManagerError && err.status === 404) return [];
    throw err;
  }
}

function routerKey(r: RouterInfo): string {
  return `${r.tenant}/${r.name}`;
}
