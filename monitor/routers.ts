/**
 * Router resources into the manager's routers (agent/PIPELINE.md, "Routing"): created from the
 * spec, replaced when its networks or routes change, deleted with the resource. The status lists
 * the connected networks with their CIDRs, or what the manager refused (another tenant's network,
 * overlapping CIDRs, a network on another router) in the Ready condition.
 */
import type { Logger, ManagerClient, RouterInfo } from "@knitter/common";
import { readyCondition } from "./conditions.ts";
import { PLURAL, type RouterResource, type RouterStatus } from "./crd_types.ts";
import type { Kube } from "./kube.ts";
import type { Tenants } from "./namespaces.ts";
import {
  ensureFinalizer,
  managerRecord,
  type Problem,
  problemOf,
  releaseAtManager,
  tenantPath,
  writeStatus,
} from "./resources.ts";
import { Requeue } from "./work_queue.ts";

export class RouterReconciler {
  constructor(
    private readonly kube: Kube,
    private readonly manager: ManagerClient,
    private readonly tenants: Tenants,
    private readonly retryMs: number,
    private readonly log: Logger,
  ) {}

  async reconcile(cr: RouterResource | undefined): Promise<void> {
    if (!cr) return;
    if (cr.metadata.deletionTimestamp) return await this.finalize(cr);
    await ensureFinalizer(this.kube, PLURAL.router, cr);
    const { namespace, name } = cr.metadata;
    const want = body(cr);
    let router: RouterInfo | undefined;
    let problem: Problem | undefined;
    try {
      await this.tenants.ensure(namespace);
      router = await managerRecord<RouterInfo>(this.manager, path(namespace, name));
      if (!router) {
        router = await this.manager.request<RouterInfo>("POST", base(namespace), { name, ...want });
        this.log.info("router created", { router: `${namespace}/${name}` });
      } else if (JSON.stringify(body({ spec: view(router) })) !== JSON.stringify(want)) {
        router = await this.manager.request<RouterInfo>("PUT", path(namespace, name), want);
        this.log.info("router changed", { router: `${namespace}/${name}` });
      }
    } catch (err) {
      problem = problemOf(err);
    }
    await writeStatus(this.kube, PLURAL.router, cr, statusOf(cr, router, problem));
    if (problem) throw new Requeue(this.retryMs, problem.message);
  }

  private async finalize(cr: RouterResource): Promise<void> {
    const { namespace, name } = cr.metadata;
    await releaseAtManager({
      kube: this.kube,
      manager: this.manager,
      plural: PLURAL.router,
      path: path(namespace, name),
      refused: (problem) => statusOf(cr, undefined, problem),
      retryMs: this.retryMs,
      log: this.log,
      what: "router",
    }, cr);
  }
}

/** The spec a manager router stands for (to compare with the resource's). */
function view(r: RouterInfo): RouterResource["spec"] {
  return {
    networks: r.networks.map((n) => n.name),
    routes: r.routes,
    ...(r.description !== undefined ? { description: r.description } : {}),
  };
}

/** The manager's request body of a resource's spec, with absent fields as the manager has them. */
function body(cr: Pick<RouterResource, "spec">): Record<string, unknown> {
  const { networks, routes, description } = cr.spec;
  return { networks, routes: routes ?? [], ...(description !== undefined ? { description } : {}) };
}

const base = (namespace: string) => tenantPath("routers", namespace);
const path = (namespace: string, name: string) => tenantPath("routers", namespace, name);

function statusOf(
  cr: RouterResource,
  router: RouterInfo | undefined,
  problem: Problem | undefined,
): RouterStatus {
  const generation = cr.metadata.generation;
  const status: RouterStatus = router
    ? { networks: router.networks.map((n) => ({ name: n.name, cidr: n.cidr })) }
    : cr.status?.networks
    ? { networks: cr.status.networks }
    : {};
  if (generation !== undefined) status.observedGeneration = generation;
  status.conditions = readyCondition(
    cr.status?.conditions,
    !problem,
    problem?.reason ?? "Reconciled",
    problem?.message ??
      `router ${router!.tenant}/${router!.name} connects ${
        router!.networks.map((n) => `${n.name} (${n.cidr})`).join(", ")
      }${router!.routes.length > 0 ? ` with ${router!.routes.length} static route(s)` : ""}`,
    generation,
  );
  return status;
}
