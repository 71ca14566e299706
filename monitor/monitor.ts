/**
 * Wires a configuration into a running monitor: the watches with their queues (pods, namespaces,
 * MultiNetworkPolicies, and the custom resources' kinds: watch_queue.ts, cr_reconciler.ts), the
 * manager's port feed, and the timers of the leak reclaim and the resources' resync.
 */
import {
  createLogger,
  type FeedHealth,
  type Logger,
  ManagerClient,
  type Port,
  retry,
  serveProbes,
} from "@knitter/common";
import type { MonitorConfig } from "./config.ts";
import { ensureDefaultNetwork } from "./default_network.ts";
import { checkClusterToken } from "./cluster_check.ts";
import type { Handlers, InformerHealth } from "./informer.ts";
import { ipGroupKind } from "./ip_groups.ts";
import { ipamClaimKind } from "./ipam_claims.ts";
import {
  KUBEVIRT_MIGRATION,
  MigrationActivator,
  type VmiMigration,
} from "./kubevirt_migrations.ts";
import { LabelChanges } from "./label_changes.ts";
import { PolicyGroups } from "./mnp_groups.ts";
import { policyLister } from "./mnp_listing.ts";
import { PolicyReconciler } from "./mnp_reconciler.ts";
import { MNP, type MultiNetworkPolicy } from "./mnp_types.ts";
import { mirrorKind, namesPod } from "./mirrors.ts";
import { routerKind } from "./routers.ts";
import {
  type EndpointSlice,
  type KubeService,
  reconcileService,
  SERVICE_NAME_LABEL,
} from "./services.ts";
import { DISCOVERY, Kube, loadKubeConfig, type PodLike } from "./kube.ts";
import { Tenants } from "./namespaces.ts";
import { networkKind } from "./networks.ts";
import { PodTracker } from "./pods.ts";
import { HotplugPending } from "./hotplug_pending.ts";
import { PortIndex } from "./port_index.ts";
import { Reclaimer } from "./reclaim.ts";
import { MonitorMetrics } from "./metrics.ts";
import { Requeue } from "./work_queue.ts";
import {
  follow,
  followCustomResource,
  type Followed,
  splitKey,
  type Wiring,
  workQueue,
} from "./watch_queue.ts";

export interface MonitorStats {
  pods: number;
  ports: number;
  released: number;
  eventsRecorded: number;
  reclaimRuns: number;
  /** Leak candidates a fresh read found alive (kept; the watch's memory was behind). */
  reclaimKeptAlive: number;
  watchErrors: number;
  /** Watches found dead (deadline, probe) or behind (a fresh read) and started again. */
  watchRestarts: number;
  /** Lists made (the first of each watch, then one per restart, error or 410). */
  lists: number;
  queued: number;
}

export interface RunningMonitor {
  /** Where /healthz and /readyz are served (config `health`). */
  healthUrl: string;
  /** Resolves once every watch has listed and the port feed is followed. */
  ready(): Promise<void>;
  /** Resolves when no reconcile is waiting or running. */
  idle(): Promise<void>;
  /** One leak reclaim pass now; answers how many ports it released. */
  reclaimNow(): Promise<number>;
  stats(): MonitorStats;
  /** Each watch: listed yet, stale, when last alive, errors and restarts. */
  watches(): InformerHealth[];
  /** The manager's change feed, as the port index follows it: stale, errors, lists. */
  portFeed(): FeedHealth;
  stop(): Promise<void>;
}

/** A policy reconcile asked for before the monitor's memory is whole waits this long. */
const POLICY_WAIT_MS = 1000;

export async function startMonitor(
  config: MonitorConfig,
  log: Logger = createLogger("monitor", config.logLevel),
): Promise<RunningMonitor> {
  const kc = loadKubeConfig(config.kubernetes.kubeconfig);
  const kube = new Kube(kc);
  const ca = config.manager.caFile ? await Deno.readTextFile(config.manager.caFile) : undefined;
  const manager = new ManagerClient(config.manager.url.replace(/\/$/, ""), config.manager.token, {
    caPem: ca,
  });
  const tenants = new Tenants(manager, log);
  const stopping = new AbortController();
  // Nothing is watched, released or made before the token is known to be this cluster's.
  await checkClusterToken(manager, config.cluster, log, stopping.signal);
  const retryMs = config.resyncSeconds * 1000;
  const wiring: Wiring = {
    kc,
    workers: config.workers,
    log,
    watch: {
      timeoutSeconds: config.watchTimeoutSeconds,
      deadlineMs: config.watchDeadlineSeconds * 1000,
      probeMs: config.watchProbeSeconds * 1000,
    },
  };

  // pods
  const ports = new PortIndex(manager, (p, op, before) => portChanged(p, op, before), log, {
    waitSeconds: config.feedWaitSeconds,
    hangMs: (config.feedDeadlineSeconds - config.feedWaitSeconds) * 1000,
  });
  const pending = new HotplugPending(kube, config.hotplugPendingSeconds * 1000, log);
  const tracker = new PodTracker(kube, manager, ports, log, pending);
  const releases = workQueue(wiring, "releases", (uid) => tracker.release(uid));
  const { informer: pods, queue: podQueue }: Followed<PodLike> = follow<PodLike>(wiring, {
    name: "pods",
    path: "/api/v1/pods",
    lister: { list: () => kube.listPods(), count: () => kube.countPods() },
    reconcile: (k): Promise<void> => {
      const [ns, name] = splitKey(k);
      return tracker.reconcile(pods.get(name, ns));
    },
    handlers: (queue): Handlers<PodLike> => ({
      add: (p) => (tracker.seen(p, queue), relabelled(p)),
      update: (p) => (tracker.seen(p, queue), relabelled(p)),
      delete: (p) => (tracker.deleted(p, releases), labels.forget(p), policiesAffected()),
      // A pod created and deleted while the watch was broken is in no list: its ports are leaks.
      relisted: () => reclaimSoon(),
    }),
  });

  // namespaces
  const { informer: namespaces, queue: nsQueue }: Followed<PodLike> = follow<PodLike>(wiring, {
    name: "namespaces",
    path: "/api/v1/namespaces",
    lister: { list: () => kube.listNamespaces(), count: () => kube.countNamespaces() },
    reconcile: async (name): Promise<void> => {
      const ns = namespaces.get(name);
      if (ns && !ns.metadata?.deletionTimestamp) return await tenants.ensure(name);
      if (!(await tenants.remove(name))) throw new Requeue(retryMs);
    },
    handlers: (queue): Handlers<PodLike> => ({
      add: (n) => (queue.add(n.metadata!.name!), relabelled(n)),
      update: (n) => (queue.add(n.metadata!.name!), relabelled(n)),
      delete: (n) => (queue.add(n.metadata!.name!), labels.forget(n), policiesAffected()),
    }),
  });

  // Network, IPGroup, Router, Mirror and IPAMClaim resources: one reconciler (cr_reconciler.ts), a
  // kind each.
  const crContext = { kube, manager, tenants, retryMs, log };
  const networks = followCustomResource(
    wiring,
    crContext,
    networkKind({
      publicNamespaces: config.publicNamespaces,
      nodeReachNamespaces: config.nodeReachNamespaces,
      segmentNamespaces: config.segmentNamespaces,
      stableRetentionMs: config.stableRetentionSeconds * 1000,
    }, {
      heldStable: () => ports.heldStable(),
      podExists: (namespace, name) => pods.get(name, namespace) !== undefined,
    }),
  );
  const groups = followCustomResource(wiring, crContext, ipGroupKind);
  const routers = followCustomResource(wiring, crContext, routerKind);
  const mirrors = followCustomResource(
    wiring,
    crContext,
    mirrorKind(config.remoteMirrorNamespaces, ports),
  );
  // IPAMClaims (the community's kind): a claim at the manager each, for a VM's pods.
  const claims = followCustomResource(wiring, crContext, ipamClaimKind);
  const resources = [networks, groups, routers, mirrors, ...(config.ipamClaims ? [claims] : [])];

  // KubeVirt's live migrations: the target's claim ports activated once it runs the VM.
  const activator = new MigrationActivator(manager, log);
  const { informer: vmMigrations, queue: vmMigrationQueue }: Followed<VmiMigration> = follow<
    VmiMigration
  >(wiring, {
    name: KUBEVIRT_MIGRATION.plural,
    path:
      `/apis/${KUBEVIRT_MIGRATION.group}/${KUBEVIRT_MIGRATION.version}/${KUBEVIRT_MIGRATION.plural}`,
    lister: {
      list: () => kube.listCustom<VmiMigration>(KUBEVIRT_MIGRATION.plural, KUBEVIRT_MIGRATION),
      count: () => kube.countCustom(KUBEVIRT_MIGRATION.plural, KUBEVIRT_MIGRATION),
    },
    reconcile: (k): Promise<void> => {
      const [ns, name] = splitKey(k);
      return activator.reconcile(vmMigrations.get(name, ns));
    },
  });

  // MultiNetworkPolicies: reconciled per namespace (its tenant's groups and its ports' groups).
  const policyReconciler = new PolicyReconciler(
    kube,
    manager,
    tenants,
    {
      policies: (ns) =>
        policies.list().filter((p) => ns === undefined || p.metadata.namespace === ns),
      pods: () => pods.list(),
      namespaces: () => namespaces.list(),
      ports: () => ports.all(),
      forPod: (uid) => ports.forPod(uid),
    },
    new PolicyGroups(config.cluster),
    retryMs,
    log,
  );
  /**
   * Why policies may not be acted on now: worked out from memory not listed yet (the start) or
   * stale, a port's groups would be stripped or its peers left out. Tried again shortly.
   */
  function policiesBlocked(): string | undefined {
    const behind = [pods, namespaces, policies].find((i) => !i.isFresh);
    if (behind) return `watch of ${behind.what}: not listed yet, or stale`;
    return ports.notReady();
  }
  const { informer: policies, queue: policyQueue }: Followed<MultiNetworkPolicy> = follow<
    MultiNetworkPolicy
  >(
    wiring,
    {
      name: "multi-networkpolicies",
      queue: "multinetworkpolicies",
      path: `/apis/${MNP.group}/${MNP.version}/${MNP.plural}`,
      lister: policyLister(kube, {
        retryMs: Math.min(30_000, wiring.watch.deadlineMs / 2),
        signal: stopping.signal,
      }, log),
      reconcile: (ns): Promise<void> => {
        const why = policiesBlocked();
        if (why !== undefined) throw new Requeue(POLICY_WAIT_MS, why);
        return policyReconciler.reconcile(ns);
      },
      handlers: (queue): Handlers<MultiNetworkPolicy> => ({
        add: (p) => queue.add(p.metadata.namespace),
        update: (p) => queue.add(p.metadata.namespace),
        delete: (p) => (policyReconciler.forget(p), queue.add(p.metadata.namespace)),
      }),
    },
  );
  const labels = new LabelChanges();
  /** Peers may be anywhere: every namespace with a policy is worked out again. */
  function policiesAffected(): void {
    if (!config.multiNetworkPolicies) return;
    for (const ns of new Set(policies.list().map((p) => p.metadata.namespace))) policyQueue.add(ns);
  }
  function relabelled(o: PodLike): void {
    if (labels.changed(o)) policiesAffected();
  }
  /** Groups of ours in tenants with no policy left (a restart, a policy deleted meanwhile). */
  async function sweepPolicies(): Promise<void> {
    if (!config.multiNetworkPolicies) return;
    for (const ns of await policyReconciler.namespacesToReconcile()) policyQueue.add(ns);
  }

  /** A port changed in the manager: its pod's status, its network's and group's usage. */
  function portChanged(p: Port, op: "put" | "delete", before?: Port): void {
    if (op === "delete" || addressedElsewhere(p, before)) policiesAffected();
    else if (
      !sameGroups(p, before) && policies.list().some((x) => x.metadata.namespace === p.tenant)
    ) {
      // Its groups changed by someone else, or its network's defaults (which a port that had none
      // of its own follows while policies select it).
      policyQueue.add(p.tenant);
    }
    if (p.pod) podQueue.add(`${p.pod.namespace}/${p.pod.name}`);
    // A Service's backends are its ready pods' ports: made, moved or gone.
    servicesOf(p.tenant);
    // Unbound (or bound elsewhere): the pod it left has one port less in its status. The queue's
    // key is the name, so a pod of another name is queued too (UIDs may be absent on both).
    const left = before?.pod;
    if (left && (left.namespace !== p.pod?.namespace || left.name !== p.pod?.name)) {
      podQueue.add(`${left.namespace}/${left.name}`);
    }
    if (networks.informer.get(p.network, p.networkTenant)) {
      networks.queue.add(`${p.networkTenant}/${p.network}`);
    }
    if (p.ipGroup && groups.informer.get(p.ipGroup, p.tenant)) {
      groups.queue.add(`${p.tenant}/${p.ipGroup}`);
    }
    // An IPAMClaim's ownerPod is its claim's active port's pod: a port came, went or took over.
    if (p.claim && claims.informer.get(p.claim, p.tenant)) {
      claims.queue.add(`${p.tenant}/${p.claim}`);
    }
    // A Mirror naming the pod it has or had: made once the pod has a port, and follows a new one.
    for (const pod of [p.pod, before?.pod]) {
      if (!pod) continue;
      for (const m of mirrors.informer.list()) {
        if (namesPod(m, pod.namespace, pod.name)) {
          mirrors.queue.add(`${pod.namespace}/${m.metadata.name}`);
        }
      }
    }
  }

  // The default network, so that one apply of deploy/ gives pods a network (default_network.ts).
  let defaultNetwork: string | undefined = config.defaultNetwork &&
    `the default network ${config.defaultNetwork.namespace}/${config.defaultNetwork.name}: not made yet`;
  const defaultNetworkDone = config.defaultNetwork
    ? retry(() => ensureDefaultNetwork(manager, tenants, config.defaultNetwork!, log), {
      signal: stopping.signal,
      maxMs: 10_000,
      jitter: 0.2,
      onError: (err, retryInMs) => {
        defaultNetwork = `${defaultNetwork!.replace(/: .*$/, "")}: ${(err as Error).message}`;
        log.warn("cannot make the default network yet", { error: String(err), retryInMs });
      },
    }).then(() => (defaultNetwork = undefined), () => {/* stopped */})
    : Promise.resolve();

  // Services on a Knitter network and their EndpointSlices (services.ts): one queue of Services.
  const { informer: services, queue: serviceQueue }: Followed<KubeService> = follow<KubeService>(
    wiring,
    {
      name: "services",
      path: "/api/v1/services",
      lister: { list: () => kube.listServices<KubeService>(), count: () => kube.countServices() },
      reconcile: (key): Promise<void> =>
        reconcileService(key, {
          manager,
          retryMs,
          log,
          src: {
            service: (ns, name): KubeService | undefined => services.get(name, ns),
            slices: () => slices.list(),
            ports,
          },
        }),
    },
  );
  const { informer: slices }: Followed<EndpointSlice> = follow<EndpointSlice>(wiring, {
    name: "endpointslices",
    path: `/apis/${DISCOVERY.group}/${DISCOVERY.version}/endpointslices`,
    lister: {
      list: () => kube.listCustom<EndpointSlice>("endpointslices", DISCOVERY),
      count: () => kube.countCustom("endpointslices", DISCOVERY),
    },
    reconcile: () => Promise.resolve(),
    handlers: () => {
      const queueItsService = (e: EndpointSlice) => {
        const name = e.metadata?.labels?.[SERVICE_NAME_LABEL];
        if (name) serviceQueue.add(`${e.metadata?.namespace}/${name}`);
      };
      return { add: queueItsService, update: queueItsService, delete: queueItsService };
    },
  });
  /** The annotated Services of a namespace: a pod's port there may be a backend. */
  function servicesOf(namespace: string): void {
    if (!config.serviceNetworks) return;
    for (const s of services.list()) {
      if (s.metadata?.namespace === namespace) serviceQueue.add(`${namespace}/${s.metadata.name}`);
    }
  }

  const informers = [
    namespaces,
    pods,
    ...resources.map((r) => r.informer),
    ...(config.multiNetworkPolicies ? [policies] : []),
    ...(config.kubevirtMigrations ? [vmMigrations] : []),
    ...(config.serviceNetworks ? [services, slices] : []),
  ];
  const queues = [
    podQueue,
    releases,
    nsQueue,
    ...resources.map((r) => r.queue),
    policyQueue,
    vmMigrationQueue,
    serviceQueue,
  ];
  ports.start();
  await Promise.all(informers.map((i) => i.start()));

  const reclaimer = new Reclaimer(kube, ports, pods, tracker, {
    graceMs: config.reclaimGraceSeconds * 1000,
    stableRetentionMs: config.stableRetentionSeconds * 1000,
    concurrency: config.workers,
  }, log);
  const ready = Promise.all([...informers.map((i) => i.whenSynced()), ports.whenReady()]);
  const timers = new Timers();
  let started = false;
  function reclaimSoon(): void {
    if (started) timers.once("reclaim-soon", 1000, () => reclaimer.run(), log, "reclaim");
  }
  ready.then(() => {
    started = true;
    log.info("watching", { pods: pods.list().length, ports: ports.size });
    timers.every(config.reclaimIntervalSeconds * 1000, () => reclaimer.run(), log, "reclaim");
    timers.once("policies", 0, sweepPolicies, log, "MultiNetworkPolicy sweep");
    timers.every(
      config.resyncSeconds * 1000,
      () => {
        for (const r of resources) r.resync();
        return sweepPolicies();
      },
      log,
      "resync",
      false,
    );
  });

  const stale = () =>
    informers.filter((i) => i.isSynced && i.isStale).map((i) => {
      const h = i.health();
      return `watch of ${i.what}: nothing heard for ${
        Math.round(h.lastAliveMsAgo / 1000)
      } s (deadline ${config.watchDeadlineSeconds} s)`;
    });
  const metrics = new MonitorMetrics({
    watches: informers,
    queues,
    tracker,
    reclaimer,
    feed: () => ports.health(),
  });
  const probes = serveProbes(config.health, {
    metrics: () => metrics.render(),
    // Not healthy while a watch is stale: what the monitor knows may be wrong.
    healthz: () => [
      ...stale(),
      ...informers.filter((i) => !i.isSynced && i.isStale).map((i) =>
        `watch of ${i.what}: not listed within ${config.watchDeadlineSeconds} s of start`
      ),
    ],
    readyz: () => [
      ...informers.filter((i) => !i.isSynced).map((i) => `watch of ${i.what}: not listed yet`),
      ...stale(),
      // Behind the manager (down, restarting, a hung poll): released and written from old news.
      ...[ports.notReady(), defaultNetwork].filter((r) => r !== undefined),
    ],
  });
  log.info("serving probes", { url: probes.url });

  return {
    healthUrl: probes.url,
    ready: () => ready.then(() => {}),
    async idle() {
      while (queues.some((q) => q.size > 0)) await Promise.all(queues.map((q) => q.idle()));
    },
    reclaimNow: () => reclaimer.run(),
    stats: () => ({
      pods: pods.list().length,
      ports: ports.size,
      released: tracker.released,
      eventsRecorded: tracker.eventsRecorded,
      reclaimRuns: reclaimer.runs,
      reclaimKeptAlive: reclaimer.contradicted,
      watchErrors: informers.reduce((n, i) => n + i.errors, 0),
      watchRestarts: informers.reduce((n, i) => n + i.restarts, 0),
      lists: informers.reduce((n, i) => n + i.lists, 0),
      queued: queues.reduce((n, q) => n + q.size, 0),
    }),
    watches: () => informers.map((i) => i.health()),
    portFeed: () => ports.health(),
    async stop() {
      stopping.abort();
      await defaultNetworkDone;
      timers.stop();
      reclaimer.stop();
      await probes.shutdown();
      for (const q of queues) q.stop();
      await Promise.all(informers.map((i) => i.stop()));
      await ports.stop();
      manager.close();
    },
  };
}

/** A port new, moved to another pod or given another address: peers' CIDRs may change. */
function addressedElsewhere(p: Port, before?: Port): boolean {
  return !before || before.ip !== p.ip || before.ip6 !== p.ip6 || before.pod?.uid !== p.pod?.uid;
}

function sameGroups(p: Port, before?: Port): boolean {
  return JSON.stringify(p.securityGroups) === JSON.stringify(before?.securityGroups) &&
    JSON.stringify(p.networkSecurityGroups) === JSON.stringify(before?.networkSecurityGroups);
}

/** Periodic jobs, each run to its end before the next is scheduled. */
class Timers {
  private readonly handles = new Set<ReturnType<typeof setTimeout>>();
  private readonly pending = new Set<string>();
  private stopped = false;

  every(ms: number, job: () => Promise<unknown>, log: Logger, what: string, now = true): void {
    const tick = async () => {
      if (this.stopped) return;
      try {
        await job();
      } catch (err) {
        log.warn(`${what} failed; next run as scheduled`, { error: String(err) });
      }
      this.schedule(tick, ms);
    };
    if (now) void tick();
    else this.schedule(tick, ms);
  }

  /** Runs `job` once after `ms`; asked again before then, it still runs once. */
  once(key: string, ms: number, job: () => Promise<unknown>, log: Logger, what: string): void {
    if (this.pending.has(key)) return;
    this.pending.add(key);
    this.schedule(async () => {
      this.pending.delete(key);
      try {
        await job();
      } catch (err) {
        log.warn(`${what} failed`, { error: String(err) });
      }
    }, ms);
  }

  stop(): void {
    this.stopped = true;
    for (const h of this.handles) clearTimeout(h);
  }

  private schedule(fn: () => void, ms: number): void {
    if (this.stopped) return;
    const h = setTimeout(() => {
      this.handles.delete(h);
      fn();
    }, ms);
    this.handles.add(h);
  }
}
