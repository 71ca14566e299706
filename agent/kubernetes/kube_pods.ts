/**
 * The agent's view of Kubernetes: it reads the pod a CNI ADD is for (annotations, UID, owner),
 * lists and watches its own node's pods (for hot-plug, node_pod_watch.ts) and its own Node object
 * (for its BGP settings, node_watch.ts), and records events on them, with the node's own
 * credentials. The kubeconfig (or the service account)
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

/** The Node object of this node: what its BGP settings are read from (node_watch.ts). */
export interface NodeObject {
  name: string;
  uid: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** One line of a watch: an object changed, a bookmark, or the server's ERROR (410: list again). */
export type WatchEvent<T> =
  | { type: "ADDED" | "MODIFIED" | "DELETED"; object: T; resourceVersion: string }
  | { type: "BOOKMARK"; resourceVersion: string }
  | { type: "ERROR"; code: number; message: string };

export type PodWatchEvent = WatchEvent<NodePod>;

/** A list (or watch) of one kind, from the API server's objects. */
export interface Listed<T> {
  items: T[];
  resourceVersion: string;
}

/** How long a watch lasts, where it is told to stop, and who is told each line. */
export interface WatchOptions<T> {
  timeoutSeconds: number;
  signal: AbortSignal;
  onEvent: (e: WatchEvent<T>) => void;
}

interface ApiObject {
  metadata: {
    namespace?: string;
    name: string;
    uid: string;
    resourceVersion?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
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
    const list = await this.list("pods", `spec.nodeName=${node}`, nodePodOf);
    return { pods: list.items, resourceVersion: list.resourceVersion };
  }

  /**
   * Watches the pods scheduled on `node` from `resourceVersion`, with bookmarks; the server ends
   * the watch after `timeoutSeconds`. Each line is handed to `onEvent`; the promise settles when
   * the watch ends (cleanly, or with the error that cut it, `signal` included).
   */
  watchOnNode(node: string, resourceVersion: string, opts: WatchOptions<NodePod>): Promise<void> {
    return this.watch("pods", `spec.nodeName=${node}`, resourceVersion, opts, nodePodOf);
  }

  /** This node's Node object by name (none when it does not exist), to watch from. */
  listNode(name: string): Promise<Listed<NodeObject>> {
    return this.list("nodes", `metadata.name=${name}`, nodeObjectOf);
  }

  /** Watches this node's Node object by name, as watchOnNode does its pods. */
  watchNode(name: string, resourceVersion: string, opts: WatchOptions<NodeObject>): Promise<void> {
    return this.watch("nodes", `metadata.name=${name}`, resourceVersion, opts, nodeObjectOf);
  }

  /** A Warning event on the Node, as `kubectl describe node` shows it (namespace default). */
  async warnNode(node: NodeObject, reason: string, message: string): Promise<void> {
    await this.postEvent("default", { kind: "Node", name: node.name, uid: node.uid }, {
      type: "Warning",
      reason,
      message,
      host: node.name,
    });
  }

  /** A cluster-wide list of `resource` by field selector, converted by `of`. */
  private async list<T>(
    resource: string,
    fields: string,
    of: (o: ApiObject) => T,
  ): Promise<Listed<T>> {
    const list = await this.call<{ metadata: { resourceVersion: string }; items: ApiObject[] }>(
      "GET",
      `/api/v1/${resource}?fieldSelector=${enc(fields)}`,
    );
    return { items: list.items.map(of), resourceVersion: list.metadata.resourceVersion };
  }

  private async watch<T>(
    resource: string,
    fields: string,
    resourceVersion: string,
    opts: WatchOptions<T>,
    of: (o: ApiObject) => T,
  ): Promise<void> {
    const q = new URLSearchParams({
      fieldSelector: fields,
      watch: "1",
      resourceVersion,
      allowWatchBookmarks: "true",
      timeoutSeconds: String(opts.timeoutSeconds),
    });
    const res = await this.send("GET", `/api/v1/${resource}?${q}`, undefined, opts.signal);
    if (!res.ok) throw await apiError(res, "GET", `/api/v1/${resource}?watch`);
    const lines = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(splitLines());
    for await (const line of lines) {
      if (line.trim() !== "") opts.onEvent(watchEventOf(JSON.parse(line), of));
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
    await this.postEvent(pod.namespace, { kind: "Pod", ...pod }, {
      type,
      reason,
      message,
      host: node,
    });
  }

  private async postEvent(
    namespace: string,
    involved: { kind: string; name: string; namespace?: string; uid?: string },
    e: { type: "Normal" | "Warning"; reason: string; message: string; host: string },
  ): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    await this.call("POST", `/api/v1/namespaces/${enc(namespace)}/events`, {
      metadata: { generateName: `${involved.name}.`, namespace },
      involvedObject: { apiVersion: "v1", ...involved },
      type: e.type,
      reason: e.reason,
      message: e.message.slice(0, 1024),
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: "knitter-agent", host: e.host },
      reportingComponent: "knitter.io/agent",
      reportingInstance: e.host,
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

function nodePodOf(o: ApiObject): NodePod {
  const m = o.metadata;
  return {
    namespace: m.namespace ?? "",
    name: m.name,
    uid: m.uid,
    annotations: m.annotations ?? {},
    deleting: m.deletionTimestamp !== undefined,
  };
}

function nodeObjectOf(o: ApiObject): NodeObject {
  const m = o.metadata;
  return { name: m.name, uid: m.uid, labels: m.labels ?? {}, annotations: m.annotations ?? {} };
}

function watchEventOf<T>(
  line: { type: string; object: ApiObject & { code?: number; message?: string } },
  of: (o: ApiObject) => T,
): WatchEvent<T> {
  const { type, object } = line;
  if (type === "ERROR") {
    return { type, code: object.code ?? 0, message: object.message ?? "watch error" };
  }
  const resourceVersion = object.metadata?.resourceVersion ?? "";
  if (type === "BOOKMARK") return { type, resourceVersion };
  if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") {
    return { type, object: of(object), resourceVersion };
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
