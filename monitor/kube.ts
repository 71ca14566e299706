/**
 * The monitor's way to Kubernetes, through `@kubernetes/client-node`: the calls it makes, each
 * one line over the typed clients, and errors that keep the API's status code and message.
 */
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { GROUP, VERSION } from "./crd_types.ts";

/** A custom resource's API group and version: Knitter's own unless said otherwise. */
export interface CustomApi {
  group: string;
  version: string;
}

const KNITTER: CustomApi = { group: GROUP, version: VERSION };
/** EndpointSlices: read through the custom objects API (a plain list of a group's plural). */
export const DISCOVERY: CustomApi = { group: "discovery.k8s.io", version: "v1" };

/** The object an event is about, as `kubectl describe` finds it. */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

/** A kubeconfig file, or the pod's service account when none is given. */
export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromCluster();
  return kc;
}

export interface PodLike {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
    ownerReferences?: { kind: string; name: string }[];
    deletionTimestamp?: unknown;
  };
  spec?: { nodeName?: string };
}

export interface KubeList<T> {
  metadata?: { resourceVersion?: string; remainingItemCount?: number; _continue?: string };
  items: T[];
}

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** An answer of the API server that is not a success: its code and its own message. */
export class KubeError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
    this.name = "KubeError";
  }
}

export class Kube {
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;

  constructor(readonly config: KubeConfig) {
    this.core = config.makeApiClient(CoreV1Api);
    this.custom = config.makeApiClient(CustomObjectsApi);
  }

  listPods(): Promise<KubeList<PodLike>> {
    return call("list pods", () => this.core.listPodForAllNamespaces());
  }

  listNamespaces(): Promise<KubeList<PodLike>> {
    return call("list namespaces", () => this.core.listNamespace());
  }

  /** Every Service (services.ts reads them as its own shape). */
  listServices<T>(): Promise<KubeList<T>> {
    return call("list services", () => this.core.listServiceForAllNamespaces());
  }

  async countServices(): Promise<number | undefined> {
    return countOf(
      await call("count services", () => this.core.listServiceForAllNamespaces({ limit: 1 })),
    );
  }

  listCustom<T>(plural: string, api = KNITTER): Promise<KubeList<T>> {
    return call(`list ${plural}`, () => this.custom.listClusterCustomObject({ ...api, plural }));
  }

  /** How many pods exist, from a one-item list (cheap: the server counts, sends one). */
  async countPods(): Promise<number | undefined> {
    return countOf(await call("count pods", () => this.core.listPodForAllNamespaces({ limit: 1 })));
  }

  async countNamespaces(): Promise<number | undefined> {
    return countOf(await call("count namespaces", () => this.core.listNamespace({ limit: 1 })));
  }

  async countCustom(plural: string, api = KNITTER): Promise<number | undefined> {
    return countOf(
      await call(
        `count ${plural}`,
        () => this.custom.listClusterCustomObject({ ...api, plural, limit: 1 }),
      ),
    );
  }

  /** A fresh read of one pod from the API server; undefined when it does not exist (404). */
  async getPod(namespace: string, name: string): Promise<PodLike | undefined> {
    try {
      return await call(
        `read pod ${namespace}/${name}`,
        () => this.core.readNamespacedPod({ namespace, name }),
      );
    } catch (err) {
      if (err instanceof KubeError && err.code === 404) return undefined;
      throw err;
    }
  }

  /** Sets (string) or removes (null) annotations of a pod. */
  patchPodAnnotations(
    namespace: string,
    name: string,
    annotations: Record<string, string | null>,
  ): Promise<unknown> {
    return call(`annotate pod ${namespace}/${name}`, () =>
      this.core.patchNamespacedPod(
        { name, namespace, body: { metadata: { annotations } } },
        MERGE,
      ));
  }

  patchCustom(
    plural: string,
    namespace: string,
    name: string,
    body: unknown,
    api = KNITTER,
  ): Promise<unknown> {
    return call(
      `patch ${plural} ${namespace}/${name}`,
      () =>
        this.custom.patchNamespacedCustomObject(
          { ...api, plural, namespace, name, body },
          MERGE,
        ),
    );
  }

  patchCustomStatus(
    plural: string,
    namespace: string,
    name: string,
    status: unknown,
    api = KNITTER,
  ): Promise<unknown> {
    return call(
      `update the status of ${plural} ${namespace}/${name}`,
      () =>
        this.custom.patchNamespacedCustomObjectStatus(
          { ...api, plural, namespace, name, body: { status } },
          MERGE,
        ),
    );
  }

  /** A Warning or Normal event about a pod, as `kubectl describe pod` shows it. */
  podEvent(
    pod: { namespace: string; name: string; uid?: string },
    type: "Warning" | "Normal",
    reason: string,
    message: string,
  ): Promise<unknown> {
    return this.objectEvent({ apiVersion: "v1", kind: "Pod", ...pod }, type, reason, message);
  }

  /** A Warning or Normal event about any namespaced object. */
  objectEvent(
    obj: InvolvedObject,
    type: "Warning" | "Normal",
    reason: string,
    message: string,
  ): Promise<unknown> {
    const now = new Date();
    return call(
      `record an event on ${obj.kind} ${obj.namespace}/${obj.name}`,
      () =>
        this.core.createNamespacedEvent({
          namespace: obj.namespace,
          body: {
            metadata: { generateName: `${obj.name}.`, namespace: obj.namespace },
            involvedObject: obj,
            type,
            reason,
            message,
            count: 1,
            firstTimestamp: now,
            lastTimestamp: now,
            source: { component: "knitter-monitor" },
            reportingComponent: "knitter.io/monitor",
            reportingInstance: Deno.hostname(),
          },
        }),
    );
  }
}

/** The number of objects a one-item list stands for; undefined when the server did not say. */
function countOf(list: KubeList<unknown>): number | undefined {
  const m = list.metadata ?? {};
  const more = m._continue ?? (m as { continue?: string }).continue;
  if (!more) return list.items.length;
  return m.remainingItemCount === undefined ? undefined : list.items.length + m.remainingItemCount;
}

async function call<T>(what: string, fn: () => Promise<unknown>): Promise<T> {
  try {
    return await fn() as T;
  } catch (err) {
    if (err instanceof ApiException) {
      const body = typeof err.body === "string" ? safeJson(err.body) : err.body;
      const message = (body as { message?: string })?.message ?? String(err.body).slice(0, 200);
      throw new KubeError(err.code, `Cannot ${what}: ${err.code} ${message}`);
    }
    throw new KubeError(0, `Cannot ${what}: ${(err as Error).message}`);
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text.slice(0, 200) };
  }
}
