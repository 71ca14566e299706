/**
 * Router resources into the manager's routers (agent/PIPELINE.md, "Routing"): created from the
 * spec, replaced when its networks or routes change, deleted with the resource. The status lists
 * the connected networks with their CIDRs, or what the manager refused (another tenant's network,
 * overlapping CIDRs, a network on another router) in the Ready condition.
 */
import type { RouterInfo } from "@knitter/common";
import { type CrKind, tenantRecord } from "./cr_reconciler.ts";
import { PLURAL, type RouterResource, type RouterStatus } from "./crd_types.ts";
import { tenantPath } from "./resources.ts";

/** The Router kind (cr_reconciler.ts). */
export const routerKind: CrKind<RouterResource, RouterInfo> = {
  plural: PLURAL.router,
  what: "router",
  ...tenantRecord<RouterResource, RouterInfo>("routers"),
  async create(cr, { manager, log }) {
    const { namespace, name } = cr.metadata;
    const router = await manager.request<RouterInfo>("POST", base(namespace), {
      name,
      ...body(cr),
    });
    log.info("router created", { router: `${namespace}/${name}` });
    return router;
  },
  async update(cr, router, { manager, log }) {
    const { namespace, name } = cr.metadata;
    const want = body(cr);
    if (JSON.stringify(body({ spec: view(router) })) === JSON.stringify(want)) {
      return { record: router };
    }
    router = await manager.request<RouterInfo>("PUT", path(namespace, name), want);
    log.info("router changed", { router: `${namespace}/${name}` });
    return { record: router };
  },
  fields: (cr, router) => ({ ...fields(cr, router) }),
  ready,
};

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

/** The connected networks with their CIDRs; none now: the last status's. */
function fields(cr: RouterResource, router: RouterInfo | undefined): RouterStatus {
  if (router) return { networks: router.networks.map((n) => ({ name: n.name, cidr: n.cidr })) };
  return cr.status?.networks ? { networks: cr.status.networks } : {};
}

function ready(router: RouterInfo): string {
  const nets = router.networks.map((n) => `${n.name} (${n.cidr})`).join(", ");
  const routes = router.routes.length > 0 ? ` with ${router.routes.length} static route(s)` : "";
  return `router ${router.tenant}/${router.name} connects ${nets}${routes}`;
}
