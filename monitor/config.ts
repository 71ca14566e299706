/**
 * The monitor's configuration: its schema, defaults, environment variables and flags. Loaded by
 * common/daemon_config.ts: a JSON file, then environment overrides, then flags.
 */
import { z } from "zod";
import { CLUSTER_NAME } from "@knitter/common";
import {
  type DaemonConfigSpec,
  loadDaemonConfig,
  type LoadedConfig,
} from "@knitter/common/daemon_config";

export const MonitorConfigSchema = z.strictObject({
  kubernetes: z.strictObject({
    /** A kubeconfig file; absent: the pod's service account (in-cluster). */
    kubeconfig: z.string().optional(),
  }).default({}),
  manager: z.strictObject({
    url: z.url(),
    /**
     * An admin token: the monitor creates tenants and networks and releases any port; with several
     * clusters on one manager, a monitor token of its cluster (it reaches that cluster only).
     */
    token: z.string().min(16),
    caFile: z.string().optional(),
  }),
  /**
   * The cluster this monitor watches, as the manager knows it (one manager may serve several):
   * its manager token must be that cluster's and reach no other (cluster_check.ts).
   */
  cluster: z.string().regex(CLUSTER_NAME, "must be a cluster name")
    .default("default"),
  /** How often every port is checked against the pods that exist (and once at start). */
  reclaimIntervalSeconds: z.int().min(1).default(60),
  /** Ports younger than this are never reclaimed: their pod may not have reached the watch yet. */
  reclaimGraceSeconds: z.int().min(0).default(30),
  /** How long the port of a stable StatefulSet pod outlives the pod's name (scale-down). */
  stableRetentionSeconds: z.int().min(0).default(3600),
  /** How often Network and IPGroup resources are reconciled again (usage, refused changes). */
  resyncSeconds: z.int().min(1).default(60),
  /**
   * A running pod whose network annotation asks for an interface it has not got after this long is
   * told (a Warning event): its node's agent, which hot-plugs it, is down or cannot act.
   */
  hotplugPendingSeconds: z.int().min(1).default(30),
  /**
   * Whether MultiNetworkPolicies (k8s.cni.cncf.io) are followed and turned into security groups;
   * false on a cluster without their CRD (the watch would never list).
   */
  multiNetworkPolicies: z.boolean().default(true),
  /**
   * Whether IPAMClaims (k8s.cni.cncf.io) are followed and turned into the manager's claims; false
   * on a cluster without their CRD (the watch would never list).
   */
  ipamClaims: z.boolean().default(true),
  /**
   * Whether KubeVirt's VirtualMachineInstanceMigrations are followed (kubevirt_migrations.ts): a
   * migration's target pod's claim ports are activated once it runs the VM; false (the default)
   * on a cluster without KubeVirt (the watch would never list).
   */
  kubevirtMigrations: z.boolean().default(false),
  /**
   * Whether Services annotated `k8s.v1.cni.cncf.io/service-network` (and their EndpointSlices)
   * are followed and made services of their network at the manager (services.ts).
   */
  serviceNetworks: z.boolean().default(true),
  /** Namespaces whose Network resources may be public (every namespace's pods may attach). */
  publicNamespaces: z.array(z.string()).default(["knitter-system"]),
  /**
   * Namespaces whose Network resources may turn on `egress` or `hostAccess`: both put the node on
   * the network, an admin's decision at the manager, which trusts the monitor with it.
   */
  nodeReachNamespaces: z.array(z.string()).default(["knitter-system"]),
  /**
   * Namespaces whose Network resources may be `flat` or name a `segmentId`: a physnet's one untagged
   * segment and a chosen VLAN ID or VNI are shared by every tenant, an admin's decision at the
   * manager, which trusts the monitor with it.
   */
  segmentNamespaces: z.array(z.string()).default(["knitter-system"]),
  /**
   * Namespaces whose Mirror resources may send copies to a remote address over GRE: they leave the
   * tenant's networks, an admin's decision at the manager (which allows it to an admin token only).
   */
  remoteMirrorNamespaces: z.array(z.string()).default(["knitter-system"]),
  /**
   * The cluster's default network (the agents' `defaultNetwork`), made at the manager when the
   * monitor starts unless it exists: tenant `namespace`, a Network resource's spec.
   */
  defaultNetwork: z.strictObject({
    namespace: z.string().min(1).default("knitter-system"),
    name: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/),
    spec: z.looseObject({ type: z.enum(["vxlan", "vlan", "flat"]), cidr: z.string() }),
  }).optional(),
  /** Every watch asks the API server to end it cleanly after this long (then resumes). */
  watchTimeoutSeconds: z.int().min(1).max(3600).default(30),
  /**
   * A watch with no event, bookmark or clean end for this long is dead: it is abandoned and the
   * objects are listed again. Longer than watchTimeoutSeconds.
   */
  watchDeadlineSeconds: z.int().min(2).max(7200).default(45),
  /** How often a one-item list compares the API server's object count with the monitor's; 0: never. */
  watchProbeSeconds: z.int().min(0).max(3600).default(5),
  /** How long the manager may hold a poll of its change feed open when nothing happens. */
  feedWaitSeconds: z.int().min(1).max(300).default(25),
  /**
   * A poll of the manager's feed with no answer for this long is hung: it is abandoned and the
   * feed resumed. Nothing heard from the feed for this long: the monitor is not ready.
   */
  feedDeadlineSeconds: z.int().min(2).max(600).default(40),
  /** /healthz and /readyz over HTTP, for the kubelet's probes (port 0: any free port). */
  health: z.strictObject({
    hostname: z.string().default("127.0.0.1"),
    port: z.int().min(0).max(65535).default(9530),
  }).default({ hostname: "127.0.0.1", port: 9530 }),
  /** Reconciles run at most this many at a time. */
  workers: z.int().min(1).max(64).default(8),
  logLevel: z.enum(["debug", "info", "warn", "error"]).default("info"),
}).refine((c) => c.watchDeadlineSeconds > c.watchTimeoutSeconds, {
  path: ["watchDeadlineSeconds"],
  message: "must be longer than watchTimeoutSeconds: a quiet watch shows life by its clean end",
}).refine(
  (c) => !c.defaultNetwork?.spec.public || c.publicNamespaces.includes(c.defaultNetwork.namespace),
  {
    path: ["defaultNetwork", "namespace"],
    message: "a public default network must be in one of publicNamespaces",
  },
).refine((c) => c.feedDeadlineSeconds > c.feedWaitSeconds, {
  path: ["feedDeadlineSeconds"],
  message:
    "must be longer than feedWaitSeconds: a quiet feed shows life when the manager's wait ends",
});

export type MonitorConfig = z.infer<typeof MonitorConfigSchema>;

export const USAGE =
  `knitter-monitor: follows Kubernetes for Knitter (pods, namespaces, Network and IPGroup
resources): releases ports of deleted pods, reclaims leaks, writes the pods' network-status,
turns namespaces into tenants and Network / IPGroup resources into the manager's.

Usage: deno task monitor [--config FILE] [--kubeconfig FILE] [--help]

Environment (overrides the file; flags override both):
  KNITTER_MONITOR_KUBECONFIG      a kubeconfig file (default: the service account, in-cluster)
  KNITTER_MONITOR_MANAGER_URL     the manager's URL
  KNITTER_MONITOR_MANAGER_TOKEN   an admin token of the manager, or its cluster's monitor token
  KNITTER_MONITOR_LOG_LEVEL       debug | info | warn | error
  KNITTER_MONITOR_CLUSTER         the cluster it watches, as the manager knows it (default: default)
  KNITTER_MONITOR_HEALTH_HOSTNAME where the probes and /metrics listen (default 127.0.0.1)
`;

/** Where the environment and flags put their values (common/daemon_config.ts). */
const SPEC: DaemonConfigSpec<MonitorConfig> = {
  usage: USAGE,
  schema: MonitorConfigSchema,
  env: {
    KNITTER_MONITOR_KUBECONFIG: "kubernetes.kubeconfig",
    KNITTER_MONITOR_MANAGER_URL: "manager.url",
    KNITTER_MONITOR_MANAGER_TOKEN: "manager.token",
    KNITTER_MONITOR_LOG_LEVEL: "logLevel",
    KNITTER_MONITOR_CLUSTER: "cluster",
    KNITTER_MONITOR_HEALTH_HOSTNAME: "health.hostname",
  },
  flags: { kubeconfig: "kubernetes.kubeconfig" },
};

/** The file, then the environment, then flags (common/daemon_config.ts). */
export function loadMonitorConfig(
  args: string[],
  env?: (name: string) => string | undefined,
): Promise<LoadedConfig<MonitorConfig>> {
  return loadDaemonConfig(SPEC, args, env && { env });
}
