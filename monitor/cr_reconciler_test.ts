/**
 * The one custom-resource reconciler (cr_reconciler.ts) with a kind of the test's own: what every
 * kind gets without writing it. Our finalizer before anything is made, the tenant before the
 * record, the status written only when it changes, refusals (the manager's and the monitor's) in
 * the Ready condition and tried again later, the manager away thrown on with nothing written, and
 * a deleted resource's record released before its finalizer goes.
 */
import assert from "node:assert/strict";
import { createLogger, type ManagerClient, ManagerError } from "@knitter/common";
import { type CrKind, CrReconciler } from "./cr_reconciler.ts";
import { FINALIZER, type ObjectMeta } from "./crd_types.ts";
import { type FakeResource, KubeFake } from "./kube_fake.ts";
import { Tenants } from "./namespaces.ts";
import { type Problem, Refusal } from "./resources.ts";
import { Requeue } from "./work_queue.ts";

const log = createLogger("cr-test", "error");
const RETRY_MS = 7000;

interface Widget {
  metadata: ObjectMeta;
  spec: { size: number };
  status?: { size?: number; observedGeneration?: number; conditions?: unknown[] };
}

/** The manager's side: widgets by "tenant/name", tenants, and how it answers. */
class Manager {
  readonly tenants = new Set<string>();
  readonly widgets = new Map<string, { size: number }>();
  /** Creates and updates above this size are refused (a quota). */
  maxSize = 100;
  /** Widgets whose delete is refused (still in use). */
  readonly inUse = new Set<string>();
  down = false;

  readonly client = {
    request: (method: string, path: string) => {
      if (this.down) return Promise.reject(new TypeError("fetch failed"));
      const tenant = path.match(/^\/api\/v1\/tenants\/([^/]+)$/)?.[1];
      if (method === "PUT" && tenant) this.tenants.add(tenant);
      return Promise.resolve(undefined);
    },
  } as unknown as ManagerClient;

  check(size: number): void {
    if (this.down) throw new TypeError("fetch failed");
    if (size > this.maxSize) {
      throw new ManagerError(409, "quota_exceeded", `size ${size} is over the quota of 100`);
    }
  }
}

const key = (cr: Widget) => `${cr.metadata.namespace}/${cr.metadata.name}`;

/** A kind as small as a module adding a custom resource would be. */
function widgetKind(m: Manager): CrKind<Widget, { size: number }> {
  return {
    plural: "widgets",
    what: "widget",
    refuse: (cr) => {
      if (cr.spec.size < 0) throw new Refusal("NegativeSize", "size must be 0 or more; fix it");
    },
    find: (cr) => {
      m.check(0);
      return Promise.resolve(m.widgets.get(key(cr)));
    },
    create: (cr) => {
      m.check(cr.spec.size);
      m.widgets.set(key(cr), { size: cr.spec.size });
      return Promise.resolve({ size: cr.spec.size });
    },
    update: (cr, have) => {
      if (cr.spec.size < have.size) {
        const problem = { reason: "CannotShrink", message: `size is ${have.size}: cannot shrink` };
        return Promise.resolve({ record: have, problem });
      }
      m.check(cr.spec.size);
      m.widgets.set(key(cr), { size: cr.spec.size });
      return Promise.resolve({ record: { size: cr.spec.size } });
    },
    release: (cr) => {
      if (m.inUse.has(key(cr))) {
        return Promise.reject(new ManagerError(409, "in_use", "widget is in use by 2 ports"));
      }
      if (!m.widgets.delete(key(cr))) {
        return Promise.reject(new ManagerError(404, "not_found", "no such widget"));
      }
      return Promise.resolve(true);
    },
    refusedRelease: (p: Problem) => ({ ...p, message: `${p.message}; it stays until then` }),
    fields: (cr, record) => record ? { size: record.size } : { size: cr.status?.size },
    ready: (record) => `widget of size ${record.size}`,
  };
}

function setup() {
  const kube = new KubeFake();
  const m = new Manager();
  const reconciler = new CrReconciler(
    widgetKind(m),
    { kube: kube.asKube(), manager: m.client, log },
    new Tenants(m.client, log),
    RETRY_MS,
  );
  /** The resource as a watch would deliver it now. */
  const now = (name = "w") => kube.get("widgets", "acme", name) as Widget;
  const ready = (
    name = "w",
  ) => (now(name).status?.conditions?.[0] as { status: string; reason: string; message: string });
  return { kube, m, reconciler, now, ready };
}

function widget(size: number, name = "w"): FakeResource {
  return { metadata: { namespace: "acme", name, generation: 1 }, spec: { size } };
}

async function requeued(p: Promise<void>, message: RegExp): Promise<void> {
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof Requeue, `a Requeue, got ${err}`);
    assert.equal(err.afterMs, RETRY_MS);
    assert.match(err.message, message);
    return true;
  });
}

Deno.test("cr reconciler: a new resource gets our finalizer, its tenant, its record and a Ready status, written once", async () => {
  const { kube, m, reconciler, now, ready } = setup();
  kube.put("widgets", widget(3));
  await reconciler.reconcile(now());
  assert.deepEqual(now().metadata.finalizers, [FINALIZER]);
  assert.ok(m.tenants.has("acme"));
  assert.deepEqual(m.widgets.get("acme/w"), { size: 3 });
  assert.equal(ready().status, "True");
  assert.equal(ready().message, "widget of size 3");
  assert.equal(now().status?.size, 3);
  assert.equal(now().status?.observedGeneration, 1);
  assert.deepEqual(kube.writes, ["finalizers widgets acme/w", "status widgets acme/w"]);

  await reconciler.reconcile(now());
  assert.equal(kube.writes.length, 2, "nothing new to say: nothing written");
  await reconciler.reconcile(undefined);
  assert.equal(kube.writes.length, 2, "a resource gone from the watch: nothing to do");
});

Deno.test("cr reconciler: a manager refusal is the Ready condition, and the resource is tried again later", async () => {
  const { kube, m, reconciler, now, ready } = setup();
  kube.put("widgets", widget(500));
  await requeued(reconciler.reconcile(now()), /over the quota/);
  assert.equal(ready().status, "False");
  assert.equal(ready().reason, "QuotaExceeded");
  assert.match(ready().message, /size 500 is over the quota of 100/);
  assert.equal(m.widgets.size, 0);

  // The user fixes the spec: the next run makes it and says so.
  kube.put("widgets", { ...now(), spec: { size: 50 } });
  await reconciler.reconcile(now());
  assert.equal(ready().status, "True");
  assert.deepEqual(m.widgets.get("acme/w"), { size: 50 });
});

Deno.test("cr reconciler: what the spec asks that cannot be applied is said beside the record", async () => {
  const { kube, reconciler, now, ready } = setup();
  kube.put("widgets", widget(10));
  await reconciler.reconcile(now());
  kube.put("widgets", { ...now(), spec: { size: 5 } });
  await requeued(reconciler.reconcile(now()), /cannot shrink/);
  assert.equal(ready().reason, "CannotShrink");
  assert.equal(now().status?.size, 10, "the status still shows the record as it is");
});

Deno.test("cr reconciler: the monitor's own refusal makes nothing, not even the tenant", async () => {
  const { kube, m, reconciler, now, ready } = setup();
  kube.put("widgets", widget(-1));
  await requeued(reconciler.reconcile(now()), /size must be 0 or more/);
  assert.equal(ready().reason, "NegativeSize");
  assert.equal(m.tenants.size, 0);
  assert.equal(m.widgets.size, 0);
});

Deno.test("cr reconciler: the manager away is thrown on (the queue's backoff), no status written", async () => {
  const { kube, m, reconciler, now } = setup();
  kube.put("widgets", widget(3));
  m.down = true;
  await assert.rejects(reconciler.reconcile(now()), (err) => {
    assert.ok(!(err instanceof Requeue), "a failure, not a refusal");
    assert.match(String(err), /fetch failed/);
    return true;
  });
  assert.equal(now().status, undefined);
});

Deno.test("cr reconciler: a deleted resource's record goes first, then our finalizer; a refused release says why and keeps it", async () => {
  const { kube, m, reconciler, now, ready } = setup();
  kube.put("widgets", widget(3));
  await reconciler.reconcile(now());
  m.inUse.add("acme/w");
  const deleting = () => ({
    ...now(),
    metadata: { ...now().metadata, deletionTimestamp: "2026-01-01T00:00:00Z" },
  });
  kube.put("widgets", deleting());
  await requeued(reconciler.reconcile(now()), /in use by 2 ports; it stays until then/);
  assert.equal(ready().reason, "InUse");
  assert.deepEqual(now().metadata.finalizers, [FINALIZER], "kept while the record is");
  assert.ok(m.widgets.has("acme/w"));

  m.inUse.clear();
  await reconciler.reconcile(now());
  assert.equal(m.widgets.has("acme/w"), false);
  assert.deepEqual(now().metadata.finalizers, []);

  // Already gone at the manager (deleted there meanwhile): the finalizer goes all the same.
  kube.put("widgets", {
    ...deleting(),
    metadata: { ...deleting().metadata, finalizers: [FINALIZER] },
  });
  await reconciler.reconcile(now());
  assert.deepEqual(now().metadata.finalizers, []);
});

Deno.test("cr reconciler: a kind of another API group is patched in its group, and its status has no observedGeneration when its schema has none", async () => {
  const kube = new KubeFake();
  const m = new Manager();
  const kind: CrKind<Widget, { size: number }> = {
    ...widgetKind(m),
    api: { group: "k8s.cni.cncf.io", version: "v1alpha1" },
    observedGeneration: false,
  };
  const reconciler = new CrReconciler(
    kind,
    { kube: kube.asKube(), manager: m.client, log },
    new Tenants(m.client, log),
    RETRY_MS,
  );
  kube.put("widgets", widget(3));
  await reconciler.reconcile(kube.get("widgets", "acme", "w") as Widget);
  assert.deepEqual(kube.writes, [
    "finalizers widgets.k8s.cni.cncf.io acme/w",
    "status widgets.k8s.cni.cncf.io acme/w",
  ]);
  const status = (kube.get("widgets", "acme", "w") as Widget).status!;
  assert.equal(status.observedGeneration, undefined);
  assert.equal((status.conditions![0] as { status: string }).status, "True");
  // Nothing new: nothing written (a pruned field would make every status look new).
  await reconciler.reconcile(kube.get("widgets", "acme", "w") as Widget);
  assert.equal(kube.writes.length, 2);
});
