/** Wires a configuration into a running agent: state, manager, OVS, dataplane, feed, socket. */
import type { Logger } from "@knitter/common";
import {
  checkTokenCluster,
  createLogger,
  ManagerClient,
  ManagerUnavailableError,
  retry,
  serveProbes,
  serveUnix,
} from "@knitter/common";
import { agentProbeChecks } from "./server/health.ts";
import { Attacher, type AttacherDeps } from "./cni/attach.ts";
import { Delegates } from "./cni/delegates.ts";
import type { AgentConfig } from "./config.ts";
import { ConflictReporter } from "./dataplane/conflict_report.ts";
import { Dataplane } from "./dataplane/dataplane.ts";
import { FlowJournal } from "./dataplane/flow_journal.ts";
import { mountFlowRoutes } from "./server/flow_routes.ts";
import { traceDeps } from "./dataplane/trace.ts";
import { mountTraceRoutes } from "./server/trace_routes.ts";
import { mountCaptureRoutes } from "./server/capture_routes.ts";
import { Healer } from "./dataplane/healer.ts";
import { RouterSlowPath } from "./punt/router_slow_path.ts";
import { slowPathSocket } from "./punt/punt_controller.ts";
import { HostPorts, KERNEL } from "./dataplane/host_ports.ts";
import { startBgp } from "./bgp/start_bgp.ts";
import { FloatingKernel } from "./dataplane/floating_kernel.ts";
import { KubePodNetworks } from "./kubernetes/kube_attacher.ts";
import { StablePortsClient } from "./kubernetes/kube_manager.ts";
import { KubePods } from "./kubernetes/kube_pods.ts";
import { ExtraInterfaces } from "./extra/extra_interface.ts";
import { Hotplug } from "./kubernetes/hotplug.ts";
import { NodePodWatch } from "./kubernetes/node_pod_watch.ts";
import { ExtraInterfaceStore } from "./extra/extra_interface_store.ts";
import { Ovs } from "./dataplane/ovs.ts";
import { PortPlugger } from "./dataplane/port_plugger.ts";
import { MirrorRows } from "./dataplane/mirrors.ts";
import { startFlowRecords } from "./flow_records/start.ts";
import { ipLinks, ovsBridges } from "./interfaces/seams.ts";
import { Reaper } from "./cni/reaper.ts";
import { settleAnswered } from "./cni/settle.ts";
import { RemoteView } from "./dataplane/remote.ts";
import { Migrations } from "./dataplane/migration.ts";
import { disableTxChecksumOffload } from "./interfaces/ip_links.ts";
import { agentApp } from "./server/server.ts";
import { AgentMetrics } from "./metrics.ts";
import { AgentState } from "./state.ts";
import { externalIds, Wiring } from "./interfaces/wiring.ts";

export interface RunningAgent {
  stop(): Promise<void>;
}

const MAX_BACKOFF_MS = 5000;

export async function startAgent(config: AgentConfig): Promise<RunningAgent> {
  const log = createLogger(`agent ${config.nodeName}`, config.logLevel);
  const state = await AgentState.open(config.stateDir);
  const ca = config.manager.caFile ? await Deno.readTextFile(config.manager.caFile) : undefined;
  // In Kubernetes mode, ports of stable StatefulSet pods outlive the pod (kube_manager.ts).
  const Client = config.kubernetes ? StablePortsClient : ManagerClient;
  const manager = new Client(config.manager.url.replace(/\/$/, ""), config.manager.token, {
    caPem: ca,
    socket: config.manager.socket,
  });
  const pods = config.kubernetes ? await KubePods.open(config.kubernetes) : undefined;
  const ovs = new Ovs({ dbSock: config.ovs.dbSock, rundir: config.ovs.rundir }, {
    prestartBundles: true,
  });
  const remote = new RemoteView(
    manager,
    config.nodeName,
    () => void dataplane.sync().catch(syncFailed),
    log,
  );
  const dataplane = new Dataplane(ovs, config, state, remote, log);
  // Live migration: an inactive port's guest announcing itself here activates it (migration.ts).
  const migrations = new Migrations({
    ofctl: (args) => ovs.ofctl(args),
    bridge: config.bridge,
    activatePort: (tenant, network, id) => manager.activatePort(tenant, network, id),
    resync: () => dataplane.sync(),
    log,
  });
  dataplane.migrations = migrations;
  const metrics = new AgentMetrics();
  dataplane.observer = metrics;
  // The node on networks with egress or hostAccess (host_ports.ts).
  dataplane.hostPorts = new HostPorts(
    ovs,
    config.bridge,
    log,
    undefined,
    config.egressInterfaces,
    config.underlayIp,
  );
  // Floating addresses: conntrack cleaned when a binding leaves; ARP answered without BGP.
  dataplane.hostPorts.floating = new FloatingKernel(KERNEL, log, !config.bgp);
  // Advertised networks announced to the fabric by the node's own BIRD (agent/bgp/), with the
  // settings of the config file and, in Kubernetes mode, of the Node's keys.
  const bgp = config.bgp ? await startBgp(config, pods, log) : null;
  if (bgp) dataplane.bgp = { speaker: bgp.speaker, from: config.bgp!.advertiseFrom };
  // The remote ports the flows leave out go to the manager, into those ports' status.
  const conflicts = new ConflictReporter(manager, config.nodeName, log);
  dataplane.onConflicts = (ports) => conflicts.set(ports);
  // What was installed, on disk: a restart sends only what changed (flow_journal.ts).
  if (config.stateDir !== ":memory:") dataplane.journal = new FlowJournal(config.stateDir, log);
  function syncFailed(err: unknown) {
    log.error("flow sync failed", { error: String((err as Error)?.message ?? err) });
  }

  // ICMP errors of the distributed router, answered by the agent (agent/punt/).
  dataplane.slowPath = true;
  const slowPath = new RouterSlowPath({
    socket: slowPathSocket(config.bridge, config.ovs.rundir),
    port: (ofport) => dataplane.puntPort(ofport),
    ports: () => dataplane.puntPortsNow(),
    log,
  });
  await dataplane.prepare();
  slowPath.start();
  // Flow records (flow_records/): OVS samples to this agent, records to the collectors.
  const flowRecords = await startFlowRecords(config, ovs, dataplane, state, remote, log);
  let notReady: string | null = "not registered with the manager yet";
  const plugger = new PortPlugger(config.ovs.dbSock, config.bridge);
  // Port mirrors as OVS Mirror rows, over the same OVSDB connection (mirrors.ts).
  dataplane.mirrors = new MirrorRows(
    plugger.db,
    config.bridge,
    log,
    () => ovs.appctl(["revalidator/purge"]),
  );
  // The ofports of this node's ports (recorded, or on the bridge already) stay theirs.
  const attachments = [...state.attachmentsView()];
  plugger.reserve(attachments.flatMap((a) => a.interfaces.flatMap((i) => i.ofport ?? [])));
  await plugger.reserveInstalled();
  // One way to make and undo an interface, for CNI ADDs and knitctl's extra interfaces alike.
  const wiring = new Wiring({
    nodeName: config.nodeName,
    links: ipLinks,
    ports: plugger,
    bridges: ovsBridges(ovs),
    flows: dataplane,
    manager,
    state,
    log,
  });
  const deps: AttacherDeps = {
    nodeName: config.nodeName,
    defaults: { tenant: config.defaultTenant, network: config.defaultNetwork },
    state,
    wiring,
    links: ipLinks,
    log,
    // External networks with a delegate: their reference plugins, run as a runtime would.
    delegates: new Delegates({
      plane: (tenant, network) => manager.networkPlane(tenant, network),
      socket: config.socket,
      nodeName: config.nodeName,
    }),
  };
  if (pods) deps.podNetworks = new KubePodNetworks(pods, manager, config.nodeName, log);
  const attacher = new Attacher(deps);
  if (pods) log.info("Kubernetes mode: pods are read through the API");
  const extraStore = await ExtraInterfaceStore.open(config.stateDir);
  const extra = new ExtraInterfaces({
    nodeName: config.nodeName,
    defaultTenant: config.defaultTenant,
    store: extraStore,
    state,
    wiring,
    links: ipLinks,
    bridges: ovsBridges(ovs),
    log,
  });
  // Kubernetes mode: a running pod's network annotation changed adds or removes its interfaces.
  const hotplug = pods && config.kubernetes?.hotplug
    ? new Hotplug({
      nodeName: config.nodeName,
      defaultNetwork: config.defaultNetwork,
      extra,
      attachments: () => state.attachmentsView(),
      pods,
      log,
    })
    : undefined;
  const nodePods = hotplug && new NodePodWatch(pods!, config.nodeName, hotplug, log);
  // Open vSwitch restarts, lost bridges and flow drift are noticed and repaired (healer.ts).
  const healer = new Healer({
    dataplane,
    ovsdb: plugger.db,
    plug: (ports) => plugger.add(ports),
    unplug: (names) => plugger.remove(names),
    podPorts: () =>
      [...state.attachmentsView()].flatMap((a) =>
        a.interfaces.flatMap((i) =>
          i.port && i.ofport !== undefined
            ? [{
              name: i.hostIfName,
              ofportRequest: i.ofport,
              externalIds: externalIds(a, i),
              // A limited veth's qdisc stays as tc made it (shaper.ts).
              ...(i.limits ? { keepQdisc: true } : {}),
            }]
            : []
        )
      ),
    rundir: config.ovs.rundir,
    checkIntervalSeconds: config.flowCheck.intervalSeconds,
    log,
  });
  healer.start();
  metrics.connect({
    installedFlows: () => dataplane.installedFlows,
    conflicts: () => dataplane.conflicts,
    healer: healer.stats,
    feedLastAliveMsAgo: () => remote.feedHealth().lastAliveMsAgo,
    slowPath: slowPath.counts,
    ...(bgp && {
      bgp: {
        sessions: () => bgp.speaker.sessions(),
        get advertised() {
          return bgp.speaker.advertised;
        },
        configErrors: bgp.configErrors,
      },
    }),
  });
  // Attachments whose netns is gone without a DEL (reaper.ts): at start, then on a timer.
  const reaper = new Reaper({
    state,
    attacher,
    graceSeconds: config.staleAttachments.graceSeconds,
    intervalSeconds: config.staleAttachments.intervalSeconds,
    log,
  });
  // The plugin's way in: root only, in a directory of the agent's own.
  const app = agentApp({ attacher, notReady: () => notReady, log, extra, metrics });
  mountFlowRoutes(app, healer);
  mountTraceRoutes(app, traceDeps({ config, state, remote, dataplane, ovs, healer }));
  // A capture asks the manager with the caller's token, never the node's: its scope is the caller's.
  mountCaptureRoutes(app, {
    nodeName: config.nodeName,
    state,
    managerAs: (token) =>
      new ManagerClient(config.manager.url.replace(/\/$/, ""), token, {
        caPem: ca,
        socket: config.manager.socket,
      }),
    log,
  });
  const server = await serveUnix(config.socket, app.fetch, { privateDir: true });
  log.info("serving the plugin", { socket: config.socket });
  const checks = config.health ? agentProbeChecks(config.socket) : undefined;
  let probes;
  try {
    probes = config.health &&
      serveProbes(config.health, { ...checks!, metrics: () => metrics.render() });
  } catch (err) {
    throw new Error(
      `Cannot serve probes on ${config.health!.hostname}:${config.health!.port}: ${
        (err as Error).message
      }`,
    );
  }
  if (probes) log.info("serving probes", { url: probes.url });
  // Interfaces made before this start (an older agent, a changed datapath) get the same settings.
  const reapplied = dataplane.softwareChecksums
    ? reapplySoftwareChecksums(
      [
        // An IPAM record's interface is another plugin's, with its own settings.
        ...attachments.filter((a) => !a.ipam).flatMap((a) =>
          a.interfaces.map((i) => ({ netns: a.netns, ifName: i.ifName }))
        ),
        ...(await extraStore.list()).filter((x) => x.kind === "bridge"),
      ],
      log,
    )
    : Promise.resolve();

  // Existing pods keep their flows: the first sync applies only the difference to what is there.
  const stopping = new AbortController();
  const joined = retry(async () => {
    // Another cluster's token would register this node, and bind its pods, in that cluster.
    await checkTokenCluster(manager, config.cluster, "node");
    await manager.registerNode(config.nodeName, config.underlayIp);
    await remote.start();
    await dataplane.sync();
    await healer.ready();
    // After a reboot every netns is gone: nothing stale stays, in the manager or here.
    const reaped = await reaper.pass(false);
    if (reaped > 0) log.info("reaped attachments whose netns was gone", { count: reaped });
    // ADDs answered before their "ready" write landed (settle.ts): ready when whole. A failure
    // (the switch's database not answering) leaves them "building", which DEL still undoes.
    await settleAnswered({
      state,
      attacher,
      links: ipLinks,
      switchPorts: () => plugger.db.ofportsByName(),
      flows: () => dataplane.installedFlows,
      log,
    }).catch((err) =>
      log.error("cannot complete the ADDs answered before this start; they stay building", {
        error: String((err as Error)?.message ?? err),
      })
    );
    reaper.start();
    // Hot-plug follows the node's pods once the node's own ports and flows are in place.
    nodePods?.start();
    notReady = null;
    log.info("ready", { node: config.nodeName, underlayIp: config.underlayIp });
  }, {
    signal: stopping.signal,
    maxMs: MAX_BACKOFF_MS,
    onError(err) {
      notReady = `the manager is not answering (${(err as Error).message})`;
      if (!(err instanceof ManagerUnavailableError)) {
        log.error("start failed", { error: String(err) });
      }
    },
  }).catch(() => {/* stopped before the agent joined */});

  return {
    async stop() {
      stopping.abort();
      await joined;
      // First: the fabric stops sending to this node while its pods still answer.
      await bgp?.stop();
      await nodePods?.stop();
      await hotplug?.stop();
      await reapplied;
      await reaper.stop();
      await healer.stop();
      await slowPath.stop();
      await conflicts.stop();
      await migrations.stop();
      await remote.stop();
      await flowRecords?.stop();
      await probes?.shutdown();
      checks?.close();
      await server.shutdown();
      plugger.close();
      await ovs.close();
      manager.close();
      pods?.close();
      extraStore.close();
      // An ADD's "ready" write and the flow journal's last line follow their answer.
      await state.flushed();
      await dataplane.journal?.settled();
      state.close();
    },
  };
}

/**
 * Turns tx checksum offload off on interfaces that exist already, a few at a time; an interface
 * or netns that is gone is left to DEL and GC, anything else is logged.
 */
async function reapplySoftwareChecksums(
  interfaces: { netns: string; ifName: string }[],
  log: Logger,
): Promise<void> {
  const queue = [...interfaces];
  const worker = async () => {
    for (let i = queue.shift(); i; i = queue.shift()) {
      try {
        await Deno.stat(i.netns);
        await disableTxChecksumOffload(i.netns, i.ifName);
      } catch (err) {
        if (err instanceof Deno.errors.NotFound || /No such device|Cannot get/.test(String(err))) {
          continue;
        }
        log.warn("cannot turn off tx checksum offload", {
          netns: i.netns,
          interface: i.ifName,
          error: String((err as Error).message ?? err),
        });
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
}
