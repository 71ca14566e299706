// The manager's API as the console uses it: the token from this tab's session storage, sent as the
// Authorization header and never in a URL.

const KEY = "knitter-console-token";

export function savedToken() {
  return sessionStorage.getItem(KEY);
}

export function saveToken(token) {
  sessionStorage.setItem(KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(KEY);
}

/** An answer of the manager that is not a success: its status, code and message. */
export class ApiFailure extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** GET a path of the manager (absolute, e.g. /api/v1/nodes) as JSON. */
export function get(path, { signal } = {}) {
  return call("GET", path, undefined, signal);
}

/** POST a JSON body to a path of the manager; its answer as JSON. */
export function post(path, body) {
  return call("POST", path, body);
}

async function call(method, path, json, signal) {
  const res = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${savedToken() ?? ""}`,
      ...(json === undefined ? {} : { "content-type": "application/json" }),
    },
    body: json === undefined ? undefined : JSON.stringify(json),
    signal,
    cache: "no-store",
  });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const err = body?.error ?? {};
    throw new ApiFailure(res.status, err.code ?? "unknown", err.message ?? res.statusText);
  }
  return body;
}

const seg = encodeURIComponent;

/** Each tenant's list at `/api/v1/tenants/{tenant}/<what>`, flattened. */
async function perTenant(tenants, what) {
  const lists = await Promise.all(
    tenants.map((t) => get(`/api/v1/tenants/${seg(t.name)}/${what}`).then((r) => r.items)),
  );
  return lists.flat();
}

/**
 * What only an admin reads: the clusters, and for each node how many ports its agent last reported
 * leaving out of its flows (a tenant token is refused both).
 */
async function loadInfra(nodes) {
  const [clusters, reports] = await Promise.all([
    get("/api/v1/clusters").then((r) => r.items),
    Promise.all(nodes.map((n) => get(`/api/v1/nodes/${seg(n.name)}/conflicts`))),
  ]);
  const conflicts = Object.fromEntries(nodes.map((n, i) => [n.name, reports[i].items.length]));
  return { clusters, conflicts };
}

/** The charts over time (console/metrics_proxy.ts); a failure is shown in their place. */
async function loadCharts(minutes) {
  try {
    const [pools, cni] = await Promise.all(
      ["pools", "cni-add"].map((chart) =>
        get(`/console/metrics?chart=${chart}&minutes=${minutes}`)
      ),
    );
    return { minutes, pools, cni };
  } catch (err) {
    return { error: err.message };
  }
}

/**
 * Everything the console shows, as the token may see it (`session` from /console/session), the
 * charts over the last `minutes`.
 */
export async function loadAll(session, minutes = 60) {
  const [tenants, ports, nodes] = await Promise.all([
    get("/api/v1/tenants").then((r) => r.items),
    get("/api/v1/ports").then((r) => r.items),
    get("/api/v1/nodes").then((r) => r.items),
  ]);
  const [lists, routers, securityGroups, infra, charts, floatingIps, floatingPools] = await Promise
    .all([
      perTenant(tenants, "networks"),
      perTenant(tenants, "routers"),
      perTenant(tenants, "security-groups"),
      session.scope === "admin" ? loadInfra(nodes) : null,
      loadCharts(minutes),
      perTenant(tenants, "floating-ips"),
      // An admin's list has each pool's usage; a tenant sees its own addresses only.
      session.scope === "admin" ? get("/api/v1/floating-pools").then((r) => r.items) : null,
    ]);
  // A public network is listed under every tenant: keep one of each.
  const networks = new Map();
  for (const n of lists) networks.set(`${n.tenant}/${n.name}`, n);
  return {
    tenants,
    networks: [...networks.values()],
    ports,
    nodes,
    routers,
    securityGroups,
    infra,
    charts,
    floatingIps,
    floatingPools,
  };
}
