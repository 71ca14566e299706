/**
 * The agent's view of Kubernetes: it reads the pod a CNI ADD is for (annotations, UID, owner) and
 * records events on it, with the node's own credentials. The kubeconfig (or the service account)
 * is read by the client library; the two calls go through Deno's fetch, which can also reach the
 * API through a unix socket (a node-local `kubectl proxy --unix-socket`), as the manager's client
 * does for the manager.
 */
import type { KubePod } from "../cni/pod_request.ts";

interface Endpoint {
  server: string;
  headers: Record<string, string>;
  client?: Deno.HttpClient;
}

/** The API server answered with an error, or could not be reached. */
export class KubeApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = "KubeApiError";
  }
}

export class KubePods {
  private constructor(private readonly ep: Endpoint) {}

  static async open(opts: { kubeconfig?: string; socket?: string }): Promise<KubePods> {
    return new KubePods(await endpoint(opts));
  }

  async get(namespace: string, name: string): Promise<KubePod> {
    const pod = await this.call<{
      metadata: {
        uid: string;
        annotations?: Record<string, string>;
        ownerReferences?: { kind: string }[];
      };
    }>("GET", `/api/v1/namespaces/${enc(namespace)}/pods/${enc(name)}`);
    return {
      uid: pod.metadata.uid,
      annotations: pod.metadata.annotations ?? {},
      ownerKinds: (pod.metadata.ownerReferences ?? []).map((o) => o.kind),
    };
  }

  /** A Warning event on the pod, as `kubectl describe pod` shows it. */
  async warn(
    pod: { namespace: string; name: string; uid?: string },
    reason: string,
    message: string,
    node: string,
  ): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await this.call("POST", `/api/v1/namespaces/${enc(pod.namespace)}/events`, {
      metadata: { generateName: `${pod.name}.`, namespace: pod.namespace },
      involvedObject: { apiVersion: "v1", kind: "Pod", ...pod },
      type: "Warning",
      reason,
      message: message.slice(0, 1024),
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: "knitter-agent", host: node },
      reportingComponent: "knitter.io/agent",
      reportingInstance: node,
    });
  }

  close(): void {
    this.ep.client?.close();
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.ep.server}${path}`, {
        method,
        headers: {
          ...this.ep.headers,
          accept: "application/json",
          ...(body ? { "content-type": "application/json" } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
        client: this.ep.client,
      });
    } catch (err) {
      const why = ((err as Error).cause as Error | undefined)?.message ?? (err as Error).message;
      throw new KubeApiError(
        0,
        `the Kubernetes API at ${this.ep.server} is not reachable (${why})`,
      );
    }
    const text = await res.text();
    if (!res.ok) {
      let message = text.slice(0, 200);
      try {
        message = JSON.parse(text).message ?? message;
      } catch { /* not a Status */ }
      throw new KubeApiError(res.status, `${method} ${path}: ${res.status} ${message}`);
    }
    return JSON.parse(text) as T;
  }
}

/** Server, credentials and CA of the kubeconfig (or the service account). */
async function endpoint(opts: { kubeconfig?: string; socket?: string }): Promise<Endpoint> {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  if (opts.kubeconfig) kc.loadFromFile(opts.kubeconfig);
  else kc.loadFromCluster();
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster) {
    throw new Error(`The kubeconfig ${opts.kubeconfig ?? "(in-cluster)"} names no cluster`);
  }
  const headers: Record<string, string> = {};
  const tokenFile = (user?.authProvider?.config as { tokenFile?: string } | undefined)?.tokenFile;
  const token = user?.token ??
    (tokenFile ? (await Deno.readTextFile(tokenFile)).trim() : undefined);
  if (token) headers.authorization = `Bearer ${token}`;
  const ca = await pem(cluster.caData, cluster.caFile);
  const cert = await pem(user?.certData, user?.certFile);
  const key = await pem(user?.keyData, user?.keyFile);
  const options: Deno.CreateHttpClientOptions = {};
  if (ca) options.caCerts = [ca];
  if (cert && key) Object.assign(options, { cert, key });
  if (opts.socket) options.proxy = { transport: "unix", path: opts.socket };
  const client = Object.keys(options).length > 0 ? Deno.createHttpClient(options) : undefined;
  return { server: cluster.server.replace(/\/$/, ""), headers, client };
}

async function pem(data?: string, file?: string): Promise<string | undefined> {
  if (data) return new TextDecoder().decode(Uint8Array.from(atob(data), (c) => c.charCodeAt(0)));
  if (file) return await Deno.readTextFile(file);
  return undefined;
}

const enc = encodeURIComponent;
