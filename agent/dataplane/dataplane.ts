/**
 * The node's bridges and its flows. The bridges are prepared once; the flows are recomputed from the
 * whole model (local ports, their networks, remote endpoints) by the WASM compiler, and only the
 * difference from what this process installed goes to OVS, as one atomic bundle. The installed set
 * is kept in memory, and in a journal on disk (flow_journal.ts): a new process whose switch holds
 * what the journal says sends only the difference; otherwise it starts by replacing the table,
 * atomically.
 */
import type { Logger, Port } from "@knitter/common";
import {
  compileFlows,
  type FlowConflict,
  flowGateways,
  type FlowInactivePort,
  type FlowInput,
  type FlowNetwork,
  type FlowRemotePort,
  type FlowSampling,
  isolateConflicts,
  parseDumpFlows,
  splitGroups,
} from "@knitter/wasm";
import { flowRoutes, Mutex, portIps, routedNetworks } from "@knitter/common";
import { type GroupChanges, groupId, type Ovs } from "./ovs.ts";
import { flowServices } from "./service_model.ts";
import type { RemoteView } from "./remote.ts";
import type { AgentState } from "../state.ts";
import type { DataplaneObserver } from "../metrics.ts";
import type { ReportedConflict } from "./conflict_report.ts";
import { type FlowJournal, resumable } from "./flow_journal.ts";
import { aclsOf } from "./acl_model.ts";
import { type DscpSource, networkDscp } from "./dscp_model.ts";
import { type HostPorts, hostPortSpecs } from "./host_ports.ts";
import type { BgpSpeaker } from "../bgp/bgp_speaker.ts";
import { advertisedRoutes } from "../bgp/advertised.ts";
import type { Advertised } from "../bgp/bird_config.ts";
import {
  awaySources,
  collectorsAtNodes,
  mirrorFilters,
  type MirrorRows,
  mirrorRows,
} from "./mirrors.ts";
import { portKey } from "./port_key.ts";
import type { PuntPort } from "../punt/router_slow_path.ts";
import { puntPorts } from "../punt/punt_networks.ts";
import { withMtuChecks } from "../punt/route_mtu.ts";
import { advertOf, slaacIps } from "../punt/slaac.ts";
import type { AdvertSettings } from "../punt/router_advert.ts";
import { ensureSlowPathController } from "../punt/punt_controller.ts";
import {
  carried,
  claimKey,
  type InactivePort,
  managerSaysActive,
  type Migrations,
} from "./migration.ts";

export interface DataplaneConfig {
  nodeName: string;
  bridge: string;
  datapathType: "system" | "netdev";
  tunnel: { port: string; ofport: number };
  bridgeMappings: { physnet: string; bridge: string; uplink?: string }[];
}

/** The bridge's flows against the computed set, as canonical lines (agent/PIPELINE.md). */
/** Flows and select groups (`group_id=…` lines) alike. */
export interface FlowDiff {
  bridge: string;
  /** Flows and groups the model computes. */
  computed: number;
  /** Flows and groups on the bridge. */
  installed: number;
  /** Computed but not on the bridge (deleted or changed by hand, or lost). */
  missing: string[];
  /** On the bridge but not computed (added or changed by hand). */
  extra: string[];
}

/** br-int ofports of the patch ports towards physnet bridges start here. */
const PATCH_OFPORT_BASE = 200;

export class Dataplane {
  private readonly physnetPorts = new Map<string, number>();
  private readonly mutex = new Mutex();
  /** A run that has not started yet: it will see every change made before it starts. */
  private queued: Promise<void> | null = null;
  private installed: Set<string> | null = null;
  /** The select groups on the switch by id (services); null: not read since the last resync. */
  private groups: Map<number, string> | null = null;
  /** Counts the runs that changed the switch's flows (a dump taken before one is stale). */
  private applied = 0;
  /** The remote ports the last compile left out (agent/PIPELINE.md, "Conflicting entries"). */
  conflicts: FlowConflict[] = [];
  private conflictKey = "[]";
  /**
   * Told the ports left out after every compile, as the manager knows them (conflict_report.ts
   * sends the set when it changed).
   */
  onConflicts: ((ports: ReportedConflict[]) => void) | null = null;
  /** The manager's ports behind each model's local and remote entries, by index. */
  private readonly sources = new WeakMap<FlowInput, { local: Port[]; remote: Port[] }>();
  /**
   * Called whenever the whole computed set is in: after a replacement, or after a first run that
   * resumed from the journal.
   */
  afterReplace: (() => Promise<void>) | null = null;
  /**
   * What this agent installed, on disk (flow_journal.ts): the first run of a process reads it
   * instead of the switch's table, and every change is kept in it.
   */
  journal: FlowJournal | null = null;
  /** Only the first run of a process may resume from the journal; a heal or repair never does. */
  private mayResume = true;
  /** A heal asked that the next run replace the table (resync). */
  private replaceNext = false;
  /** Told of each flow sync and of each change in the isolated entries (metrics.ts). */
  observer: DataplaneObserver | null = null;
  /** The node's interfaces on networks with egress or hostAccess (host_ports.ts); none: off. */
  hostPorts: HostPorts | null = null;
  /** The port mirrors this node realises, as OVS Mirror rows (mirrors.ts); none: off. */
  mirrors: MirrorRows | null = null;
  /** The node's BGP speaker and whence it advertises (agent/bgp/); none: no BGP. */
  bgp: { speaker: BgpSpeaker; from: "hosting" | "all" } | null = null;
  /** This node's side of live migrations (migration.ts); none: inactive ports are only dropped. */
  migrations: Migrations | null = null;
  /** What the last model says the node advertises, handed to the speaker after its flows. */
  private routes: Advertised | null = null;
  /** Flow records' sample actions (agent/flow_records/); none: off. */
  sampling: FlowSampling | null = null;
  /**
   * The router's slow path answers ICMP errors (agent/punt/): prepare() makes its socket the
   * bridge's controller. Off: the punts go nowhere (dropped).
   */
  slowPath = false;
  /** The ports the slow path answers, from the last model (punt_networks.ts). */
  private punts = new Map<number, PuntPort>();
  /** The MTU of each network of the model, by node-local number (its ports say it). */
  private readonly mtus = new Map<number, number>();
  /** The router advertisement of each network whose gateway sends them, by node-local number. */
  private readonly adverts = new Map<number, AdvertSettings>();

  constructor(
    private readonly ovs: Ovs,
    private readonly config: DataplaneConfig,
    private readonly state: AgentState,
    private readonly remote: RemoteView,
    private readonly log: Logger,
  ) {}

  get bridge(): string {
    return this.config.bridge;
  }

  /** The pod port with this ofport as the router's slow path answers it. */
  puntPort(ofport: number): PuntPort | undefined {
    return this.punts.get(ofport);
  }

  /** Every pod port the router's slow path answers, by ofport. */
  puntPortsNow(): Iterable<[number, PuntPort]> {
    return this.punts.entries();
  }

  /** The flows this process installed (canonical lines); null until the first sync. */
  get installedFlows(): ReadonlySet<string> | null {
    return this.installed;
  }

  /** Whether pods on these bridges must compute their own checksums (the userspace datapath). */
  get softwareChecksums(): boolean {
    return this.config.datapathType === "netdev";
  }

  /** The names of the bridges and of the ports prepare() makes or plugs (not the pods'). */
  preparedNames(): { bridges: string[]; ports: string[] } {
    const m = this.config.bridgeMappings;
    return {
      bridges: [this.config.bridge, ...m.map((x) => x.bridge)],
      ports: [
        this.config.tunnel.port,
        ...m.flatMap((x) => [
          patchName("pi", x.physnet),
          patchName("pp", x.physnet),
          ...(x.uplink ? [x.uplink] : []),
        ]),
        ...(this.hostPorts?.portNames ?? []),
      ],
    };
  }

  /**
   * Makes the next run forget what this process installed and replace the whole table (after a
   * switch that lost its flows), and runs it. The next run, not now: a run in progress (its bundle
   * at the switch) would otherwise record its own set over the forgetting, and the replay would
   * never happen (dataplane_race_test.ts).
   */
  resync(): Promise<void> {
    this.replaceNext = true;
    this.groups = null;
    // The host ports' devices may be new (ovs-vswitchd made them again): set up again.
    this.hostPorts?.invalidate();
    this.mirrors?.forget();
    this.mayResume = false;
    return this.sync();
  }

  /** The bridge's flows against the computed set, after any run in progress. */
  async diff(): Promise<FlowDiff> {
    return await this.compare(false);
  }

  /**
   * Compares the bridge's flows with the computed set and, when they differ (flows changed, added
   * or deleted by hand), replaces the table with the computed set. Answers what differed.
   */
  async repair(): Promise<FlowDiff> {
    return await this.compare(true);
  }

  /**
   * The dump and its parsing (most of a check's time: about 1.1-1.6 s for 112k flows) run outside
   * the mutex, so flow syncs are not held up; a sync that applied changes meanwhile makes the
   * dump stale, and it is taken again (the last try holds the mutex throughout).
   */
  private async compare(repair: boolean): Promise<FlowDiff> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const applied = this.applied;
      const actual = await this.dumpFlows();
      const result = await this.mutex.run(async () => {
        if (this.applied !== applied) return null;
        return await this.compareTo(actual, repair);
      });
      if (result) return result;
    }
    return await this.mutex.run(async () => this.compareTo(await this.dumpFlows(), repair));
  }

  private async dumpFlows(): Promise<string[]> {
    return parseDumpFlows(await this.ovs.ofctl(["dump-flows", this.config.bridge]));
  }

  /**
   * On demand (`repair` false) the reference is the set computed now; a repair compares with what
   * this process installed, so a model change whose sync is still queued is not counted as drift,
   * and puts in the set computed now.
   */
  private async compareTo(actual: string[], repair: boolean): Promise<FlowDiff> {
    const computed = async () => splitGroups(this.compile(await this.model()));
    const installed = repair ? this.installed : null;
    const now = installed && this.groups ? null : await computed();
    const wanted = installed ? [...installed].sort() : now!.flows;
    // Select groups are compared as lines too: a bucket changed by hand is drift like a flow.
    const wantedGroups = installed && this.groups ? [...this.groups.values()] : now!.groups;
    const actualGroups = [...(await this.ovs.dumpGroups(this.config.bridge)).values()];
    const want = new Set([...wanted, ...wantedGroups]);
    const have = new Set([...actual, ...actualGroups]);
    const diff: FlowDiff = {
      bridge: this.config.bridge,
      computed: wanted.length + wantedGroups.length,
      installed: actual.length + actualGroups.length,
      missing: [...wanted, ...wantedGroups].filter((l) => !have.has(l)),
      extra: [...actual, ...actualGroups].filter((l) => !want.has(l)),
    };
    if (repair && diff.missing.length + diff.extra.length > 0) {
      // The groups as well: flows that name a group a hand deleted would be refused.
      const { flows, groups } = await computed();
      this.groups = null;
      await this.replace(flows, { groups: await this.groupChanges(groups) });
      this.groups = groupMap(groups);
    }
    return diff;
  }

  /** Creates what is missing of br-int, the tunnel port and the physnet bridges; touches no flow. */
  async prepare(): Promise<void> {
    const { bridge, datapathType, tunnel } = this.config;
    // secure: with no flow installed the bridge drops, it never falls back to learning.
    await this.ovs.ensureBridge(bridge, { datapathType, failMode: "secure" });
    await this.ovs.ensureVxlanPort(bridge, tunnel.port, tunnel.ofport);
    if (this.slowPath) await ensureSlowPathController(this.ovs, bridge);
    for (const [i, m] of this.config.bridgeMappings.entries()) {
      await this.ovs.ensureBridge(m.bridge, { datapathType, failMode: "standalone" });
      if (m.uplink) await this.ovs.addPorts(m.bridge, [{ name: m.uplink }]);
      const ofport = PATCH_OFPORT_BASE + i;
      await this.ovs.ensurePatchPair(
        bridge,
        patchName("pi", m.physnet),
        m.bridge,
        patchName("pp", m.physnet),
        ofport,
      );
      this.physnetPorts.set(m.physnet, ofport);
    }
  }

  physnetPort(physnet: string): number | undefined {
    return this.physnetPorts.get(physnet);
  }

  /**
   * Brings the installed flows in line with the model, and resolves once a run that started after
   * this call has applied them. Calls that arrive while one run is going share the next run, so a
   * burst of changes costs two computations, not one each.
   */
  sync(): Promise<void> {
    this.queued ??= this.mutex.run(async () => {
      this.queued = null;
      const started = performance.now();
      let ok = false;
      try {
        await this.apply(await this.model());
        if (this.routes) this.bgp?.speaker.advertise(this.routes);
        await this.syncMirrors();
        ok = true;
      } finally {
        this.observer?.synced((performance.now() - started) / 1000, ok);
      }
    });
    return this.queued;
  }

  /** The Mirror rows of the mirrors whose collector is here, after the flows (mirrors.ts). */
  private async syncMirrors(): Promise<void> {
    if (!this.mirrors) return;
    const local = new Map<string, string>();
    for (const a of this.state.attachmentsView()) {
      for (const i of a.interfaces) {
        if (i.port && i.ofport !== undefined) local.set(portKey(i.port), i.hostIfName);
      }
    }
    const mirrors = [...this.remote.mirrors()];
    const nodes = this.remote.nodeAddresses();
    await this.mirrors.reconcile(
      mirrorRows(mirrors, local, nodes),
      awaySources(mirrors, local),
      collectorsAtNodes(mirrors, nodes),
    );
  }

  /**
   * The flows of the model without the remote ports that collide with a local port, with each
   * other or are malformed: one bad entry never stops the flows of everything else. Logs the set
   * of ports left out whenever it changes.
   */
  private compile(model: FlowInput): string[] {
    const { input, conflicts } = isolateConflicts(model);
    const key = JSON.stringify(conflicts.map(({ remote: _, ...c }) => c));
    if (key !== this.conflictKey) {
      this.conflictKey = key;
      this.conflicts = conflicts;
      this.observer?.conflicts(conflicts);
      if (conflicts.length > 0) {
        this.log.warn("remote ports left out of the flows", {
          count: conflicts.length,
          ports: conflicts.map((c) => ({
            network: c.network,
            mac: c.mac,
            ips: c.ips,
            nodeIp: c.nodeIp,
            reason: c.reason,
            detail: c.detail,
          })),
        });
      } else {
        this.log.info("no remote port left out of the flows any more");
      }
    }
    this.onConflicts?.(this.reported(model, conflicts));
    return compileFlows(input);
  }

  /** The left-out ports that collide with another claimant, named as the manager names them. */
  private reported(model: FlowInput, conflicts: FlowConflict[]): ReportedConflict[] {
    const sources = this.sources.get(model);
    if (!sources) return [];
    return conflicts.flatMap((c) => {
      const port = sources.remote[c.remote];
      if (!port || c.reason === "invalid") return [];
      return c.collisions.map((k) => {
        const other = (c.reason === "local" ? sources.local : sources.remote)[k.index];
        const item: ReportedConflict = {
          networkId: port.networkId,
          tenant: port.tenant,
          id: port.id,
          field: k.field,
          value: k.value,
          reason: c.reason as "local" | "remote",
        };
        if (other) item.with = { tenant: other.tenant, id: other.id };
        return item;
      });
    });
  }

  private async apply(input: FlowInput): Promise<void> {
    if (this.replaceNext) {
      this.replaceNext = false;
      this.installed = null;
    }
    const { flows: wanted, groups } = splitGroups(this.compile(input));
    const changes = await this.groupChanges(groups);
    if (this.installed === null) {
      const known = await this.resumed();
      if (!(known instanceof Set)) {
        // First run of this process without a journal to trust, or a heal: what the switch has
        // is unknown, so the table is replaced at once. ovs-ofctl changes only the difference, so
        // flows that are already right stay, with their counters, and traffic never sees a gap.
        // A switch known to have no flow at all just gets them (nothing to read back first).
        await this.replace(wanted, { empty: known === "empty", groups: changes });
        this.groups = groupMap(groups);
        return;
      }
      // A restart onto a switch that has what the journal says: only the difference goes.
      this.installed = known;
      await this.update(wanted, changes);
      this.groups = groupMap(groups);
      this.log.info("flows resumed from the journal", { flows: wanted.length });
      await this.afterReplace?.();
      return;
    }
    await this.update(wanted, changes);
    this.groups = groupMap(groups);
  }

  /**
   * What the switch's select groups need to become `wanted` (read from the switch after a
   * resync or at the first run). A failed bundle leaves them unknown: read again next time.
   */
  private async groupChanges(wanted: string[]): Promise<GroupChanges> {
    const have = this.groups ?? await this.ovs.dumpGroups(this.config.bridge);
    this.groups = null;
    const want = groupMap(wanted);
    const changes: GroupChanges = { add: [], modify: [], del: [] };
    for (const [id, line] of want) {
      const now = have.get(id);
      if (now === undefined) changes.add.push(line);
      else if (now !== line) changes.modify.push(line);
    }
    for (const id of have.keys()) if (!want.has(id)) changes.del.push(id);
    return changes;
  }

  /** The set on the switch as the journal has it, at a process's first run (flow_journal.ts). */
  private async resumed(): Promise<Set<string> | "empty" | null> {
    if (!this.mayResume || !this.journal) return null;
    this.mayResume = false;
    return await resumable(this.journal, this.ovs, this.config.bridge);
  }

  /** Bundles the difference between what is installed and `wanted`, journalled around it. */
  private async update(wanted: string[], groups: GroupChanges): Promise<void> {
    const installed = this.installed!;
    const want = new Set(wanted);
    const add = wanted.filter((l) => !installed.has(l));
    const del = [...installed].filter((l) => !want.has(l));
    const regrouped = groups.add.length + groups.modify.length + groups.del.length > 0;
    if (add.length === 0 && del.length === 0 && !regrouped) return;
    this.applied++;
    await this.journal?.begin(add, del);
    try {
      await this.ovs.bundle(this.config.bridge, add, del, { groups });
    } catch (err) {
      await this.journal?.end(false, installed);
      throw err;
    }
    this.installed = want;
    // Not waited for: the flows are in, the next change's lines queue behind it, and a crash
    // before it lands leaves a change begun and never closed, which a restart does not trust.
    void this.journal?.end(true, want);
    this.log.debug("flows updated", {
      added: add.length,
      deleted: del.length,
      total: wanted.length,
    });
  }

  /**
   * Makes `wanted` the whole table, atomically; then tells afterReplace. `empty`: the switch was
   * seen with no flow just now.
   */
  private async replace(
    wanted: string[],
    opts: { empty?: boolean; groups?: GroupChanges } = {},
  ): Promise<void> {
    this.installed = null;
    this.applied++;
    this.mayResume = false;
    await this.journal?.invalidate();
    await this.ovs.bundle(this.config.bridge, wanted, [], { replaceAll: true, ...opts });
    this.installed = new Set(wanted);
    this.log.info("flows replaced", { flows: wanted.length });
    await this.afterReplace?.();
    // Written in the background: the flows are in.
    void this.journal?.snapshot(wanted);
  }

  /** The compiler's input, from the attachments on this node and what the manager says of others. */
  private async model(): Promise<FlowInput> {
    const networks = new Map<string, FlowNetwork>();
    const localPorts: FlowInput["localPorts"] = [];
    const sources = { local: [] as Port[], remote: [] as Port[] };
    const hosted: { port: Port; number: number }[] = [];
    // A live migration's ports (migration.ts): the inactive ones here, the claims active here.
    const inactivePorts: FlowInactivePort[] = [];
    const watched: InactivePort[] = [];
    const localClaims = new Set<string>();
    // The active local ports' ofports, by port key: a filtered mirror's sources and collector.
    const ofports = new Map<string, number>();
    for (const a of this.state.attachmentsView()) {
      for (const i of a.interfaces) {
        if (!i.port || i.ofport === undefined) continue;
        const net = await this.network(networks, i.port);
        // As the feed has it now: a network's egress and hostAccess change at once.
        const current = this.remote.port(i.port) ?? i.port;
        const active = this.migrations?.isActive(current) ?? managerSaysActive(current);
        if (!active) {
          inactivePorts.push({
            ofport: i.ofport,
            network: net.id,
            mac: i.port.mac,
            cookie: i.cookie,
          });
          watched.push({
            tenant: i.tenant,
            network: i.network,
            id: i.portId,
            key: portKey(i.port),
            cookie: (BigInt(net.id) << 32n) | BigInt(i.cookie),
            ofport: i.ofport,
            mac: i.port.mac,
            ...(i.port.family === 4 ? { ipv4: i.port.ip } : {}),
            ...(i.port.family === 6 ? { ipv6: i.port.ip } : i.port.ip6 ? { ipv6: i.port.ip6 } : {}),
            target: !managerSaysActive(i.port),
          });
          continue;
        }
        if (current.claim !== undefined) localClaims.add(claimKey(current));
        localPorts.push({
          ofport: i.ofport,
          network: net.id,
          mac: i.port.mac,
          // With SLAAC, the address the pod makes from its MAC is its own too.
          ips: [...portIps(i.port), ...slaacIps(current)],
          cookie: i.cookie,
        });
        ofports.set(portKey(i.port), i.ofport);
        sources.local.push(i.port);
        hosted.push({ port: current, number: net.id });
      }
    }
    await this.hostPortsOf(networks, hosted);
    // The networks a router connects to one of ours: routed traffic is delivered from here.
    const local = new Set(networks.keys());
    const routed = routedNetworks(this.remote.routers(), local);
    // Ports of a network another plugin carries (the knitter IPAM's) are on no switch.
    const remote = [...this.remote.ports()].filter((p) => p.networkDataPlane !== "external");
    for (const p of remote) {
      if (!routed.has(p.networkId) || networks.has(p.networkId)) continue;
      // A VLAN or flat network is only reachable from a node attached to its physnet.
      if (p.physnet !== undefined && !this.physnetPorts.has(p.physnet)) continue;
      await this.network(networks, p);
    }
    const remotePorts: FlowRemotePort[] = [];
    for (const p of remote) {
      if (p.node === this.config.nodeName || !carried(p, localClaims)) continue;
      const net = networks.get(p.networkId);
      const nodeIp = p.node ? this.remote.nodeIp(p.node) : undefined;
      // Only networks present here matter; a port on a node with no known endpoint cannot be reached.
      if (!net || !nodeIp) continue;
      remotePorts.push({
        network: net.id,
        mac: p.mac,
        ips: [...portIps(p), ...slaacIps(p)],
        nodeIp,
      });
      sources.remote.push(p);
    }
    const model: FlowInput = {
      tunnelPort: this.config.tunnel.ofport,
      networks: [...networks.values()],
      localPorts,
      remotePorts,
      // A route into a smaller MTU checks the size (the slow path answers "too big").
      routes: withMtuChecks(flowRoutes(this.remote.routers(), networks, local), this.mtus),
    };
    // Services of the networks this node's pods are on, and of those a router joins to them: a
    // routed client's node balances for the VIP (PIPELINE.md, "Services", "Through a router").
    const services = await flowServices(
      { services: this.remote.services(), ports: remote },
      { all: networks, local: new Set(networks.keys()) },
      (key) => this.state.serviceNumber(key),
    );
    if (services.length > 0) model.services = services;
    // Security groups (PIPELINE.md): only ports in a group get an entry.
    const acls = aclsOf(
      sources.local.map((port, k) => ({ port, cookie: localPorts[k].cookie })),
      this.remote,
    );
    if (acls.length > 0) model.acls = acls;
    if (this.sampling) model.sampling = this.sampling;
    if (inactivePorts.length > 0) model.inactivePorts = inactivePorts;
    // Filtered mirrors are copied by flows (mirrors.ts; PIPELINE.md, "Filtered mirrors").
    const rules = this.mirrors ? mirrorFilters(this.remote.mirrors(), ofports) : [];
    if (rules.length > 0) model.mirrorFilters = rules;
    this.migrations?.watch(watched);
    this.sources.set(model, sources);
    this.punts = puntPorts(model, this.adverts);
    return model;
  }

  /**
   * The host ports of the local ports' networks with egress or hostAccess, made where missing
   * (host_ports.ts), into their networks' hostPort.
   */
  private async hostPortsOf(
    networks: Map<string, FlowNetwork>,
    hosted: { port: Port; number: number }[],
  ): Promise<void> {
    if (!this.hostPorts) return;
    const specs = hostPortSpecs(hosted);
    const ofports = await this.hostPorts.reconcile(specs);
    const ready = new Set<string>();
    for (const s of specs) {
      const ofport = ofports.get(s.number);
      const net = networks.get(s.networkId);
      if (net && ofport !== undefined && ofport > 0) {
        net.hostPort = ofport;
        ready.add(s.networkId);
      }
    }
    // Advertised only where the node can take the traffic in: its host port is set up (and, in
    // sync(), once the flows to its pods are in).
    if (this.bgp) {
      this.routes = advertisedRoutes({
        local: hosted.map((h) => h.port),
        ready,
        all: this.remote.ports(),
        from: this.bgp.from,
      });
    }
  }

  private async network(
    networks: Map<string, FlowNetwork>,
    port: {
      networkId: string;
      type: "vxlan" | "vlan" | "flat";
      segmentId?: number;
      physnet?: string;
      gateway?: string;
      gateway6?: string;
      mtu?: number;
      networkRouterAdvertisements?: Port["networkRouterAdvertisements"];
      address?: string;
      address6?: string;
      mac?: string;
    } & DscpSource,
  ): Promise<FlowNetwork> {
    let net = networks.get(port.networkId);
    if (!net) {
      net = { id: await this.state.networkNumber(port.networkId), type: port.type };
      if (port.segmentId !== undefined) net.segmentId = port.segmentId;
      const dscp = networkDscp(port, this.remote);
      if (dscp !== undefined) net.dscp = dscp;
      // The distributed gateway (PIPELINE.md, "Distributed gateway").
      Object.assign(net, flowGateways(port.networkId, port.gateway, port.gateway6));
      if (port.physnet !== undefined) {
        const ofport = this.physnetPorts.get(port.physnet);
        if (ofport !== undefined) net.physnetPort = ofport;
      }
      networks.set(port.networkId, net);
      if (port.mtu !== undefined) this.mtus.set(net.id, port.mtu);
      this.advertising(net, port);
    }
    return net;
  }

  /**
   * A network whose IPv6 gateway sends router advertisements (PIPELINE.md): the flows punt its
   * pods' solicitations, and the slow path answers with the advertisement kept here.
   */
  private advertising(net: FlowNetwork, port: Parameters<typeof advertOf>[0]): void {
    const v6 = [net.gateway, net.gateway6].some((g) => g?.includes(":"));
    const advert = v6 && net.gatewayMac ? advertOf(port, net.gatewayMac) : undefined;
    if (!advert) return;
    net.routerAdvertisements = true;
    this.adverts.set(net.id, advert);
  }
}

/** Group lines by their ids. */
function groupMap(lines: string[]): Map<number, string> {
  return new Map(lines.map((line) => [groupId(line)!, line]));
}

/** Patch port names: short, stable, within the 15-character limit. */
function patchName(prefix: string, physnet: string): string {
  return `${prefix}-${physnet}`.slice(0, 15);
}
