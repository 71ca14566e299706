/**
 * The agent's configuration: its schema, defaults and environment variables. Loaded by
 * common/daemon_config.ts: a JSON file, then environment overrides.
 */
import { z } from "zod";
import { CLUSTER_NAME } from "@knitter/common";
import { formatIp, isIp, parseIp } from "@knitter/common/address";
import {
  commaList,
  DaemonConfigError,
  type DaemonConfigSpec,
  integer,
  loadDaemonConfig,
  type LoadedConfig,
} from "@knitter/common/daemon_config";

const BridgeMapping = z.strictObject({
  physnet: z.string().min(1),
  bridge: z.string().min(1).max(15),
  /** The interface that carries the physnet out of the node; absent: the bridge is left as it is. */
  uplink: z.string().min(1).max(15).optional(),
});

/* The BGP values, shared with the Node's keys (bgp/node_keys.ts): one check for both sources. */
export const Ipv4 = z.string().refine((t) => parseIp(t)?.family === 4, "must be an IPv4 address");
export const Ipv6 = z.string().refine((t) => parseIp(t)?.family === 6, "must be an IPv6 address");
export const Asn = z.int().min(1).max(4294967295);

/** A BGP neighbour (agent/bgp/bird_config.ts). */
const BgpPeer = z.strictObject({
  address: z.string().refine(isIp, "must be an IP address"),
  asn: Asn,
  /** Seconds; BIRD's default 240 when absent. 3 drops a silent node's routes within ~3 s. */
  holdTime: z.int().min(3).max(65535).optional(),
  password: z.string().min(1).max(80)
    .regex(/^[^"\\\n]*$/, 'must hold no ", \\ or line break').optional(),
});

/** Peers, each address once (BIRD's protocol is named after it: bird_config.ts peerName). */
const peerList = <T extends z.ZodType<{ address: string }>>(peer: T) =>
  z.array(peer).min(1, "name at least one peer").refine(
    (ps) => new Set(ps.map((p) => canonical(p.address))).size === ps.length,
    "each peer address once",
  );

function canonical(address: string): string {
  const ip = parseIp(address);
  return ip ? formatIp(ip) : address;
}

export const BgpPeers = peerList(BgpPeer);
/** A Node's peers: no password, which everyone who may read Nodes would read. */
export const NodeBgpPeers = peerList(BgpPeer.omit({ password: true }));

/** Standard communities ("ASN:VALUE", each 0-65535). */
export const Communities = z.array(
  z.string().regex(/^\d{1,5}:\d{1,5}$/, 'must look like "65000:100"')
    .refine((c) => c.split(":").every((n) => Number(n) <= 65535), "each half is 0-65535"),
);

/**
 * BGP advertisement (agent/README.md, "BGP advertisement"): the agent's own BIRD 2 announces the
 * advertised networks of the manager to `peers`. Absent: no BGP.
 */
const Bgp = z.strictObject({
  /**
   * The node's ASN and its peers; in Kubernetes mode either may be left to the Node's keys
   * (bgp/node_keys.ts), which override every field they set.
   */
  localAsn: Asn.optional(),
  /** BIRD's router ID; absent: the IPv4 next hop. */
  routerId: Ipv4.optional(),
  peers: BgpPeers.optional(),
  /** Standard communities added to every route, "ASN:VALUE" (each 0-65535). */
  communities: Communities.default([]),
  /** The IPv4 next hop the peers send to; absent: underlayIp. */
  nextHop: Ipv4.optional(),
  /** The IPv6 next hop; absent: IPv6 CIDRs are not advertised. */
  nextHop6: Ipv6.optional(),
  /** "hosting": a network from the nodes with its pods; "all": from every node. */
  advertiseFrom: z.enum(["hosting", "all"]).default("hosting"),
  /** The BIRD 2 binaries (Debian's bird2). */
  bird: z.string().min(1).default("bird"),
  birdc: z.string().min(1).default("birdc"),
  /** BIRD's configuration file and control socket; absent: bird.conf, bird.ctl in stateDir. */
  configFile: z.string().min(1).optional(),
  controlSocket: z.string().min(1).optional(),
});

export type BgpConfig = z.infer<typeof Bgp>;
/** A collector: host or [IPv6], and a port 1-65535. */
const COLLECTOR =
  /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([1-9]\d{0,3}|[1-5]\d{4}|6[0-4]\d{3}|65[0-4]\d{2}|655[0-2]\d|6553[0-5])$/;

export const AgentConfigSchema = z.strictObject({
  nodeName: z.string().min(1).default(() => Deno.hostname()),
  /** This node's cluster at the manager (one may serve several): its token must be that one's. */
  cluster: z.string().regex(CLUSTER_NAME, "must be a cluster name")
    .default("default"),
  manager: z.strictObject({
    url: z.url(),
    /** Reach the manager through this unix socket instead of the URL's host (same machine). */
    socket: z.string().optional(),
    token: z.string().min(16),
    /** PEM CA for a manager behind HTTPS with its own CA. */
    caFile: z.string().optional(),
  }),
  /** The plugin's way in: a unix socket only root may use. */
  socket: z.string().default("/run/knitter/agent.sock"),
  /** Node-local state (Deno KV) lives here. */
  stateDir: z.string().default("/var/lib/knitter/agent"),
  /** This node's tunnel endpoint, as registered with the manager. */
  underlayIp: z.string().min(1),
  underlayMtu: z.int().min(1280).max(9216).default(1500),
  /**
   * The interfaces egress networks leave through (agent/README.md, "Egress and the node");
   * absent: those of the node's default routes.
   */
  egressInterfaces: z.array(z.string().min(1).max(15)).optional(),
  ovs: z.strictObject({
    /** ovsdb-server socket; absent: the system default. */
    dbSock: z.string().optional(),
    /** OVS_RUNDIR for ovs-ofctl; absent: the system default. */
    rundir: z.string().optional(),
  }).default({}),
  bridge: z.string().max(15).default("br-int"),
  /** "system" uses the kernel datapath; "netdev" the userspace one (no kernel module needed). */
  datapathType: z.enum(["system", "netdev"]).default("system"),
  tunnel: z.strictObject({
    port: z.string().max(15).default("vxlan0"),
    ofport: z.int().min(1).max(65279).default(100),
  }).default({ port: "vxlan0", ofport: 100 }),
  bridgeMappings: z.array(BridgeMapping).default([]),
  /** Tenant of pods whose runtime names no namespace (plain CNI runtimes). */
  defaultTenant: z.string().default("default"),
  /** Network of pods that ask for none. */
  defaultNetwork: z.string().optional(),
  /**
   * Kubernetes mode: the agent reads each pod (annotations, UID, owner) through the API with the
   * node's credentials. kubeconfig: the node's kubeconfig file (absent: the service account);
   * socket: reach the API server through this unix socket (`kubectl proxy --unix-socket`).
   */
  kubernetes: z.strictObject({
    kubeconfig: z.string().optional(),
    socket: z.string().optional(),
    /**
     * Hot-plug (kubernetes/hotplug.ts): follow the node's pods and change a running pod's
     * interfaces with its network annotation. false: the agent lists and watches no pods.
     */
    hotplug: z.boolean().default(true),
  }).optional(),
  /**
   * /healthz and /readyz over HTTP for the kubelet's probes, answered through the plugin's socket;
   * absent: not served. The DaemonSet serves them on the node's loopback.
   */
  health: z.strictObject({
    hostname: z.string().default("127.0.0.1"),
    port: z.int().min(0).max(65535),
  }).optional(),
  /**
   * The periodic flow check: every `intervalSeconds` the bridge's flows are dumped and compared
   * with the computed set; drift (flows changed, added or deleted by hand) is repaired, counted and
   * logged. 0 turns the timer off (Open vSwitch restarts are still noticed through OVSDB and
   * OpenFlow).
   */
  flowCheck: z.strictObject({
    intervalSeconds: z.number().min(0).max(86_400).default(60),
  }).default({ intervalSeconds: 60 }),
  /**
   * Lost DELs (agent/cni/reaper.ts): an attachment whose netns is gone (or is another netns at its
   * path) is undone once it has been gone for `graceSeconds` (the runtime's own DEL may still come),
   * looked for every `intervalSeconds` (0: only at the agent's start, where no grace applies).
   */
  staleAttachments: z.strictObject({
    graceSeconds: z.number().min(0).max(86_400).default(60),
    intervalSeconds: z.number().min(0).max(86_400).default(15),
  }).default({ graceSeconds: 60, intervalSeconds: 15 }),
  bgp: Bgp.optional(),
  logLevel: z.enum(["debug", "info", "warn", "error"]).default("info"),
  /**
   * Flow records (agent/README.md, "Flow records"): IPFIX records of the pods' connections to
   * these collectors, from Open vSwitch's sampling of 1 packet in `sampling`; absent: off.
   */
  flowRecords: z.strictObject({
    collectors: z.array(
      z.string().regex(COLLECTOR, 'must be "host:port" or "[IPv6]:port" with a port 1-65535'),
    ).min(1),
    sampling: z.int().min(1).max(65535).default(1),
    activeTimeout: z.number().min(1).max(3600).default(60),
    idleTimeout: z.number().min(1).max(3600).default(15),
    collectorSetId: z.int().min(1).max(0xffffffff).default(1),
    listenPort: z.int().min(0).max(65535).default(0),
  }).optional(),
});

export type AgentConfig = z.infer<typeof AgentConfigSchema>;

export const USAGE = `knitter-agent: the per-node daemon that builds pod interfaces on Open vSwitch

Usage: deno task agent --config FILE [--help]

Environment (overrides the file):
  KNITTER_AGENT_NODE_NAME      this node's name (default: the hostname)
  KNITTER_AGENT_MANAGER_URL    the manager's URL
  KNITTER_AGENT_MANAGER_TOKEN  a node-scoped token for this node
  KNITTER_AGENT_UNDERLAY_IP    this node's tunnel endpoint
  KNITTER_AGENT_SOCKET         the plugin's unix socket (default /run/knitter/agent.sock)
  KNITTER_AGENT_CLUSTER        its cluster at the manager (default: default)
  KNITTER_AGENT_STATE_DIR      node-local state (default /var/lib/knitter/agent)
  KNITTER_AGENT_LOG_LEVEL      debug | info | warn | error
  KNITTER_AGENT_KUBECONFIG     Kubernetes mode, with this kubeconfig (the node's credentials)
  KNITTER_AGENT_HEALTH_HOSTNAME  where the probes and /metrics listen (health.port stays the file's)
  KNITTER_AGENT_FLOW_COLLECTORS  flow records to these collectors, host:port,... (turns them on)
  KNITTER_AGENT_FLOW_SAMPLING  flow records sample 1 packet in N (default 1: every packet)
`;

/** Where the environment puts its values (common/daemon_config.ts). */
const SPEC: DaemonConfigSpec<AgentConfig> = {
  usage: USAGE,
  schema: AgentConfigSchema,
  env: {
    KNITTER_AGENT_NODE_NAME: "nodeName",
    KNITTER_AGENT_CLUSTER: "cluster",
    KNITTER_AGENT_MANAGER_URL: "manager.url",
    KNITTER_AGENT_MANAGER_TOKEN: "manager.token",
    KNITTER_AGENT_UNDERLAY_IP: "underlayIp",
    KNITTER_AGENT_SOCKET: "socket",
    KNITTER_AGENT_STATE_DIR: "stateDir",
    KNITTER_AGENT_LOG_LEVEL: "logLevel",
    KNITTER_AGENT_KUBECONFIG: "kubernetes.kubeconfig",
    KNITTER_AGENT_HEALTH_HOSTNAME: "health.hostname",
    KNITTER_AGENT_FLOW_COLLECTORS: { at: "flowRecords.collectors", parse: commaList },
    KNITTER_AGENT_FLOW_SAMPLING: {
      at: "flowRecords.sampling",
      parse: integer("KNITTER_AGENT_FLOW_SAMPLING"),
    },
  },
  finish: (config) => {
    if (!config.bgp) return;
    if (!config.kubernetes && (config.bgp.localAsn === undefined || !config.bgp.peers)) {
      throw new DaemonConfigError(
        `bgp: ${config.bgp.localAsn === undefined ? "localAsn" : "peers"} is missing`,
        "outside Kubernetes mode the file is the only source of the node's ASN and peers",
        "set bgp.localAsn and bgp.peers, or run in Kubernetes mode and give them with the " +
          "Node's keys bgp.knitter.io/asn and bgp.knitter.io/peers (agent/README.md)",
      );
    }
    if (config.bgp.nextHop || parseIp(config.underlayIp)?.family === 4) return;
    throw new DaemonConfigError(
      `bgp: no IPv4 next hop: underlayIp ${config.underlayIp} is not IPv4`,
      "IPv4 routes need an IPv4 next hop, and BIRD an IPv4 router ID",
      "set bgp.nextHop (and bgp.routerId) to an IPv4 address of this node the peers reach",
    );
  },
};

/** The file, then the environment (common/daemon_config.ts). */
export function loadAgentConfig(
  args: string[],
  env?: (name: string) => string | undefined,
): Promise<LoadedConfig<AgentConfig>> {
  return loadDaemonConfig(SPEC, args, env && { env });
}
