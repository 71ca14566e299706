/**
 * For the Mirror kind's unit tests: an in-memory manager that answers the requests the kind makes
 * (a tenant's PUT, a mirror's GET, POST and DELETE) as the real one does for them, with its
 * refusal of another tenant's port, and its ports as the monitor's port feed has them. Control-plane
 * logic only: the real manager is tested in manager/mirrors_test.ts, the whole path in
 * tests/k8s_mirror_crd_test.ts.
 */
import { type ManagerClient, ManagerError, type MirrorInfo, type Port } from "@knitter/common";
import type { MirrorPorts } from "./mirrors.ts";

type Ref = { network: string; port: string };
type Body = {
  name: string;
  sources: Ref[];
  direction: MirrorInfo["direction"];
  filter?: MirrorInfo["filter"];
  collector: Ref;
};

export class MirrorManagerFake implements MirrorPorts {
  readonly mirrors = new Map<string, MirrorInfo>();
  /** Every request, "METHOD path", in order. */
  readonly requests: string[] = [];
  ports: Port[] = [];
  /** Why the port feed is behind; undefined: it is current. */
  behind?: string;

  asManager(): ManagerClient {
    return {
      request: (m: string, p: string, b?: unknown) => this.request(m, p, b),
    } as unknown as ManagerClient;
  }

  /** A port of `tenant`'s pod on a network of its own. */
  addPort(tenant: string, pod: string, iface: string, network: string, id: string): Port {
    const port = {
      id,
      tenant,
      network,
      networkTenant: tenant,
      networkId: `net-${network}`,
      pod: { namespace: tenant, name: pod, uid: `uid-${pod}` },
      interface: iface,
    } as Port;
    this.ports.push(port);
    return port;
  }

  notReady(): string | undefined {
    return this.behind;
  }

  forPodName(namespace: string, name: string): Port[] {
    return this.ports.filter((p) => p.pod?.namespace === namespace && p.pod.name === name);
  }

  get(networkId: string, id: string): Port | undefined {
    return this.ports.find((p) => p.networkId === networkId && p.id === id);
  }

  private request(method: string, path: string, body?: unknown): Promise<unknown> {
    this.requests.push(`${method} ${path}`);
    try {
      return Promise.resolve(this.answer(method, path, body as Body));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private answer(method: string, path: string, body: Body): unknown {
    if (/^\/api\/v1\/tenants\/[^/]+$/.test(path)) return undefined;
    const [, tenant, name] = path.match(/^\/api\/v1\/tenants\/([^/]+)\/mirrors(?:\/([^/]+))?$/)!;
    const key = `${tenant}/${name ?? body?.name}`;
    const have = this.mirrors.get(key);
    if (method === "POST") return this.create(tenant, key, body);
    if (!have) throw new ManagerError(404, "not_found", `Mirror "${name}" does not exist`);
    if (method === "DELETE") return void this.mirrors.delete(key);
    return have;
  }

  private create(tenant: string, key: string, body: Body): MirrorInfo {
    const own = (r: Ref, field: string) => {
      const p = this.ports.find((p) => p.id === r.port && p.network === r.network);
      if (!p || p.tenant !== tenant) {
        throw new ManagerError(
          404,
          "not_found",
          `Port "${r.port}" of tenant "${tenant}" does not exist on network "${r.network}": a mirror names only its own tenant's ports`,
          field,
        );
      }
      return { network: p.network, networkId: p.networkId, id: p.id };
    };
    const mirror: MirrorInfo = {
      name: body.name,
      tenant,
      sources: body.sources.map((s, i) => own(s, `sources[${i}]`)),
      direction: body.direction,
      // Kept canonical, as the manager does: a range of one port is that port.
      ...(body.filter
        ? {
          filter: body.filter.map((r) => ({
            ...r,
            ...(r.ports ? { ports: r.ports.replace(/^(\d+)-\1$/, "$1") } : {}),
          })),
        }
        : {}),
      collector: "remote" in body.collector
        ? body.collector as unknown as MirrorInfo["collector"]
        : own(body.collector, "collector"),
      createdAt: "2026-11-28T00:00:00Z",
    };
    this.mirrors.set(key, mirror);
    return mirror;
  }
}
