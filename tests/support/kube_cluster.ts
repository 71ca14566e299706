/**
 * A Kubernetes cluster for tests, made of real parts and one stand-in: the stand-in API server
 * (kube_api.ts), a manager, simulated nodes whose agents run in Kubernetes mode (reading pods with
 * their node's own token, through the API server's unix socket), and the monitor, in this process
 * so that tests can stop it, start it again and wait for it to settle. The "kubelet" is the test:
 * it creates pod objects, then runs the CNI plugin for them on their node.
 */
import { createLogger, run } from "@knitter/common";
import { type MonitorConfig, MonitorConfigSchema } from "../../monitor/config.ts";
import { type RunningMonitor, startMonitor } from "../../monitor/monitor.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { type KubeApi, KubeApi as Api, type KubeObject } from "./kube_api.ts";
import { makePod, type Pod } from "./pods.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../../devstack/stack.ts";

export const MONITOR_USER = "system:serviceaccount:knitter-system:knitter-monitor";
export const DEFAULT_NETWORK = { name: "pods", cidr: "10.244.0.0/24", gateway: "10.244.0.1" };
/** The agents' probe port, on their node's loopback (each node is its own netns), as deployed. */
export const AGENT_HEALTH_PORT = 9529;

export interface KubeCluster {
  api: KubeApi;
  stack: Stack;
  monitor?: RunningMonitor;
  startMonitor(): Promise<RunningMonitor>;
  stopMonitor(): Promise<void>;
  /** Creates a namespace in the API server. */
  namespace(name: string): KubeObject;
  /** Creates the pod object (scheduled on `node`) and the netns kubelet would make for it. */
  pod(node: StackNode, spec: PodSpec): Promise<{ obj: KubeObject; cni: Pod }>;
}

export interface PodSpec {
  namespace: string;
  name: string;
  annotations?: Record<string, string>;
  /** Owner kind, e.g. "StatefulSet". */
  owner?: string;
}

/** The conflist kubelet finds: no networks in it, the pod's annotations decide. */
export const KUBE_CONFLIST = {
  cniVersion: "1.1.0",
  name: "knitter",
  plugins: [{ type: "knitter" }],
};

export async function startKubeCluster(opts: {
  cleanup: Cleanup;
  nodes: string[];
  monitor?: Partial<MonitorConfig>;
  /** How often the stand-in sends a bookmark to watches that ask; 0: never. Default 1000. */
  bookmarkMs?: number;
  /**
   * One of the clusters of a stack already running (StackOptions.clusters): this Kubernetes
   * cluster is made of its `nodes` of that stack, and its monitor uses the cluster's token.
   */
  of?: { stack: Stack; cluster: string };
}): Promise<KubeCluster> {
  const { cleanup } = opts;
  const stack = opts.of?.stack ?? await startStack({ cleanup, nodes: opts.nodes });
  const nodes = stack.nodes.filter((n) => opts.nodes.includes(n.name));
  // Each Kubernetes cluster's files apart, when several share a stack.
  const own = opts.of ? `${stack.dir}/${opts.of.cluster}` : stack.dir;
  await Deno.mkdir(own, { recursive: true });
  const monitorToken = `monitor-${crypto.randomUUID()}`;
  const nodeTokens = Object.fromEntries(
    opts.nodes.map((n) => [n, `kubelet-${crypto.randomUUID()}`]),
  );
  const api = Api.start({
    tokens: {
      [monitorToken]: MONITOR_USER,
      ...Object.fromEntries(opts.nodes.map((n) => [nodeTokens[n], `system:node:${n}`])),
    },
    socket: `${own}/kube-api.sock`,
    bookmarkMs: opts.bookmarkMs ?? 1000,
  });
  cleanup.defer(() => api.close());

  // Clusters of one manager share the default network: the first one makes it.
  const shared = opts.of &&
    (await stack.api("GET", `tenants/admin/networks/${DEFAULT_NETWORK.name}`)).status === 200;
  if (!shared) {
    const net = await stack.api("POST", "tenants/admin/networks", {
      ...DEFAULT_NETWORK,
      public: true,
    });
    if (net.status !== 201) throw new Error(`default network: ${JSON.stringify(net.body)}`);
  }

  // The agents switch to Kubernetes mode, with their node's own credentials.
  for (const node of nodes) {
    const kubeconfig = await api.writeKubeconfig(
      `${own}/${node.name}.kubeconfig`,
      nodeTokens[node.name],
    );
    const path = `${node.sim.stateDir}/agent.json`;
    const config = JSON.parse(await Deno.readTextFile(path));
    config.kubernetes = { kubeconfig, socket: `${own}/kube-api.sock` };
    config.defaultNetwork = DEFAULT_NETWORK.name;
    config.health = { hostname: "127.0.0.1", port: AGENT_HEALTH_PORT };
    await Deno.writeTextFile(path, JSON.stringify(config));
    // The probes listen on the node's loopback, which a new netns has down.
    await run(["ip", "link", "set", "lo", "up"], { netns: node.sim.netns });
    await node.stopAgent();
    await node.startAgent();
  }

  const monitorKubeconfig = await api.writeKubeconfig(`${own}/monitor.kubeconfig`, monitorToken);
  const managerToken = opts.of ? stack.monitorTokens[opts.of.cluster] : stack.adminToken;
  const monitorConfig = MonitorConfigSchema.parse({
    kubernetes: { kubeconfig: monitorKubeconfig },
    manager: { url: stack.managerUrl, token: managerToken },
    ...(opts.of ? { cluster: opts.of.cluster } : {}),
    reclaimGraceSeconds: 0,
    resyncSeconds: 2,
    logLevel: "warn",
    health: { hostname: "127.0.0.1", port: 0 },
    ...opts.monitor,
  });

  const cluster: KubeCluster = {
    api,
    stack,
    async startMonitor() {
      const m = await startMonitor(monitorConfig, createLogger("monitor", monitorConfig.logLevel));
      cluster.monitor = m;
      await waitFor("monitor watching", async () => {
        let synced = false;
        await Promise.race([
          m.ready().then(() => synced = true),
          new Promise((r) => setTimeout(r, 200)),
        ]);
        return synced;
      }, 20_000);
      return m;
    },
    async stopMonitor() {
      await cluster.monitor?.stop();
      cluster.monitor = undefined;
    },
    namespace(name) {
      return api.create("namespaces", { metadata: { name } });
    },
    async pod(node, spec) {
      const obj = api.create("pods", {
        metadata: {
          name: spec.name,
          namespace: spec.namespace,
          ...(spec.annotations ? { annotations: spec.annotations } : {}),
          ...(spec.owner
            ? {
              ownerReferences: [{
                apiVersion: "apps/v1",
                kind: spec.owner,
                name: spec.name.replace(/-\d+$/, ""),
                uid: crypto.randomUUID(),
                controller: true,
              }],
            }
            : {}),
        },
        spec: { nodeName: node.name, containers: [{ name: "app", image: "app" }] },
      });
      const cni = await makePod(
        node,
        `${spec.name}-${obj.metadata.uid.slice(0, 4)}`,
        spec.namespace,
        KUBE_CONFLIST,
      );
      // As kubelet passes them: the pod's own name and UID.
      cni.args.K8S_POD_NAME = spec.name;
      cni.args.K8S_POD_UID = obj.metadata.uid;
      return { obj, cni };
    },
  };
  cleanup.defer(() => cluster.stopMonitor());
  return cluster;
}

/**
 * A pod object (scheduled on `node`, no netns) and a port bound to it in the manager, as the agent
 * would make it on ADD: for monitor tests that need no data plane.
 */
export async function podWithPort(
  k: KubeCluster,
  name: string,
  opts: { namespace?: string; network?: string; node?: string } = {},
): Promise<KubeObject> {
  const namespace = opts.namespace ?? "acme";
  const obj = k.api.create("pods", {
    metadata: { name, namespace },
    spec: { nodeName: opts.node ?? "n1", containers: [] },
  });
  const uid = obj.metadata.uid;
  const r = await k.stack.api(
    "PUT",
    `tenants/${namespace}/networks/${opts.network ?? DEFAULT_NETWORK.name}/ports/${uid}-eth0`,
    { pod: { namespace, name, uid }, interface: "eth0" },
  );
  if (r.status !== 201) throw new Error(`port of ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  return obj;
}

/** The manager's ports of a pod (by namespace/name). */
export async function portsOfPod(
  k: KubeCluster,
  name: string,
  namespace = "acme",
): Promise<{ id: string; ip: string; pod?: { uid?: string } }[]> {
  return (await k.stack.api("GET", `ports?pod=${namespace}/${name}`)).body.items;
}

/** A Network resource in namespace acme (a /24, gateway .1), once the monitor has made it Ready. */
export async function networkReady(
  k: KubeCluster,
  name: string,
  cidr: string,
  more: Record<string, unknown> = {},
): Promise<void> {
  k.api.create("networks", {
    metadata: { name, namespace: "acme" },
    spec: { cidr, gateway: cidr.replace(/0\/24$/, "1"), ...more },
  });
  await eventually(
    `network ${name} ready`,
    () =>
      k.api.get("networks", "acme", name)?.status?.conditions?.[0]?.status === "True"
        ? true
        : undefined,
  );
}

/** Waits until `probe` answers something other than undefined, and answers it. */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  ms = 30_000,
): Promise<T> {
  let value: T | undefined;
  await waitFor(what, async () => (value = await probe()) !== undefined, ms);
  return value!;
}
