/**
 * The agent's view of Kubernetes: it reads the pod a CNI ADD is for (annotations, UID, owner),
 * lists and watches its own node's pods (for hot-plug, node_pod_watch.ts) and records events on
 * them, with the node's own credentials. The kubeconfig (or the service account)
 * is read by the client library; the two calls go through Deno's fetch, which can also reach the
 * API through a unix socket (a node-local `kubectl proxy --unix-socket`), as the manager's client
 * does for the manager.
 */
import type { KubePod } from "../cni/pod_request.ts";

/** A pod of this node as the watch sees it. */
export interface NodePod {
  namespace: string;
  name: string;
  uid: string;
  annotations: Record<string, string>;
  /** Being deleted (deletionTimestamp set): nothing is plugged into it any more. */
  deleting: boolean;
}

/** One line of a watch: a pod changed, a bookmark, or the server's ERROR (410: list again). */
export type PodWatchEvent =
  | { type: "ADDED" | "MODIFIED" | "DELETED"; pod: NodePod; resourceVersion: string }
  | { type: "BOOKMARK"; resourceVersion: string }
  | { type: "ERROR"; code: number; message: string };

interface PodObject {
  metadata: {
    namespace: string;
    name: string;
    uid: string;
    resourceVersion?: string;
    deletionTimestamp?: string;
    annotations?: Record<string, string>;
  };
}

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

  /** The pods scheduled on `node`, and the list's resourceVersion to watch from. */
  async listOnNode(node: string): Promise<{ pods: NodePod[]; resourceVersion: string }> {
    const list = await this.call<{ metadata: { resourceVersion: string }; items: PodObject[] }>(
      "GET",
      `/api/v1/pods?fieldSelector=${enc(`spec.nodeName=${node}`)}`,
    );
    return { pods: list.items.map(nodePodOf), resourceVersion: list.metadata.resourceVersion };
  }

  /**
   * Watches the pods scheduled on `node` from `resourceVersion`, with bookmarks; the server ends
   * the watch after `timeoutSeconds`. Each line is handed to `onEvent`; the promise settles when
   * the watch ends (cleanly, or with the error that cut it, `signal` included).
   */
  async watchOnNode(
    node: string,
    resourceVersion: string,
    opts: { timeoutSeconds: number; signal: AbortSignal; onEvent: (e: PodWatchEvent) => void },
  ): Promise<void> {
    const q = new URLSearchParams({
      fieldSelector: `spec.nodeName=${node}`,
      watch: "1",
      resourceVersion,
      allowWatchBookmarks: "true",
      timeoutSeconds: String(opts.timeoutSeconds),
    });
    const res = await this.send("GET", `/api/v1/pods?${q}`, undefined, opts.signal);
    if (!res.ok) throw await apiError(res, "GET", "/api/v1/pods?watch");
    const lines = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(splitLines());
    for await (const line of lines) {
      if (line.trim() !== "") opts.onEvent(watchEventOf(JSON.parse(line)));
    }
  }

  /** A Warning event on the pod, as `kubectl describe pod` shows it. */
  warn(
    pod: { namespace: string; name: string; uid?: string },
    reason: string,
    message: string,
    node: string,
  ): Promise<void> {
    return this.event(pod, "Warning", reason, message, node);
  }

  /** An event on the pod (Normal: something done; Warning: something refused or failed). */
  async event(
    pod: { namespace: string; name: string; uid?: string },
    type: "Normal" | "Warning",
    reason: string,
    message: string,
    node: string,
  ): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await this.call("POST", `/api/v1/namespaces/${enc(pod.namespace)}/events`, {
      metadata: { generateName: `${pod.name}.`, namespace: pod.namespace },
      involvedObject: { apiVersion: "v1", kind: "Pod", ...pod },
      type,
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
    const res = await this.send(method, path, body);
    if (!res.ok) throw await apiError(res, method, path);
    return JSON.parse(await res.text()) as T;
  }

  private async send(
    method: string,
    path: string,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<Response> {
    try {
      return await fetch(`${this.ep.server}${path}`, {
        method,
        headers: {
          ...this.ep.headers,
          accept: "application/json",
          ...(body ? { "content-type": "application/json" } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
        client: this.ep.client,
        signal,
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      const why = ((err as Error).cause as Error | undefined)?.message ?? (err as Error).message;
      throw new KubeApiError(
        0,
        `the Kubernetes API at ${this.ep.server} is not reachable (${why})`,
      );
    }
  }
}

async function apiError(res: Response, method: string, path: string): Promise<KubeApiError> {
  const text = await res.text();
  let message = text.slice(0, 200);
  try {
    message = JSON.parse(text).message ?? message;
  } catch { /* not a Status */ }
  return new KubeApiError(res.status, `${method} ${path}: ${res.status} ${message}`);
}

function nodePodOf(o: PodObject): NodePod {
  const m = o.metadata;
  return {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid,
    annotations: m.annotations ?? {},
    deleting: m.deletionTimestamp !== undefined,
  };
}

function watchEventOf(line: {
  type: string;
  object: PodObject & { code?: number; message?: string };
}): PodWatchEvent {
  const { type, object } = line;
  if (type === "ERROR") {
    return { type, code: object.code ?? 0, message: object.message ?? "watch error" };
  }
  const resourceVersion = object.metadata?.resourceVersion ?? "";
  if (type === "BOOKMARK") return { type, resourceVersion };
  if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") {
    return { type, pod: nodePodOf(object), resourceVersion };
  }
  return { type: "ERROR", code: 0, message: `a watch event of unknown type "${type}"` };
}

/** Newline-delimited JSON, one watch event a line. */
function splitLines(): TransformStream<string, string> {
  let rest = "";
  return new TransformStream({
    transform(chunk, out) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop()!;
      for (const p of parts) out.enqueue(p);
    },
    flush(out) {
      if (rest !== "") out.enqueue(rest);
    },
  });
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
