/**
 * For the custom-resource reconciler's unit tests: the API server's side of what the reconciler
 * does to a resource (merge patches of its finalizers, writes of its status), kept in memory and
 * counted. The real client against the stand-in API server is tested in ../tests/k8s_*_test.ts.
 */
import type { CustomApi, Kube } from "./kube.ts";
import type { ObjectMeta } from "./crd_types.ts";

export interface FakeResource {
  metadata: ObjectMeta;
  spec?: unknown;
  status?: unknown;
}

export class KubeFake {
  readonly objects = new Map<string, FakeResource>();
  /** Every write, in order: "finalizers plural ns/name" or "status plural ns/name" ("plural.group" for another group). */
  readonly writes: string[] = [];

  /** Adds (or replaces) a resource as the API server holds it; answers a copy, as a watch would. */
  put(plural: string, r: FakeResource): FakeResource {
    this.objects.set(key(plural, r.metadata.namespace, r.metadata.name), structuredClone(r));
    return structuredClone(r);
  }

  /** The resource as the API server holds it now (a copy). */
  get(plural: string, namespace: string, name: string): FakeResource | undefined {
    const r = this.objects.get(key(plural, namespace, name));
    return r && structuredClone(r);
  }

  asKube(): Kube {
    return {
      patchCustom: (
        plural: string,
        ns: string,
        name: string,
        body: { metadata: ObjectMeta },
        api?: CustomApi,
      ) => {
        const r = this.found(plural, ns, name);
        r.metadata.finalizers = body.metadata.finalizers;
        this.writes.push(`finalizers ${named(plural, api)} ${ns}/${name}`);
        return Promise.resolve(structuredClone(r));
      },
      patchCustomStatus: (
        plural: string,
        ns: string,
        name: string,
        status: unknown,
        api?: CustomApi,
      ) => {
        const r = this.found(plural, ns, name);
        r.status = structuredClone(status);
        this.writes.push(`status ${named(plural, api)} ${ns}/${name}`);
        return Promise.resolve(structuredClone(r));
      },
    } as unknown as Kube;
  }

  private found(plural: string, namespace: string, name: string): FakeResource {
    const r = this.objects.get(key(plural, namespace, name));
    if (!r) throw new Error(`${plural} ${namespace}/${name} not found`);
    return r;
  }
}

/** A kind as a write names it: "networks" for ours, "plural.group" for another group's. */
function named(plural: string, api: CustomApi | undefined): string {
  return api ? `${plural}.${api.group}` : plural;
}

function key(plural: string, namespace: string, name: string): string {
  return `${plural}/${namespace}/${name}`;
}
