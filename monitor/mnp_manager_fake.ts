/**
 * For the reconciler's unit tests: an in-memory manager that answers the requests the policy
 * reconciler makes (tenants, networks by name, security groups, a port's PATCH) as the real one
 * does for them, with its refusals (a group in use, an absent group naming its field, an absent
 * port, another network than the one named), and the monitor's memory (pods, namespaces, ports)
 * beside it. Control-plane logic only: the real manager is tested in manager/, the whole path in
 * tests/k8s_multinetworkpolicy_test.ts.
 */
import { type ManagerClient, ManagerError, type Port, type SecurityGroup } from "@knitter/common";
import type { Kube, PodLike } from "./kube.ts";
import type { PolicySources } from "./mnp_reconciler.ts";
import type { MultiNetworkPolicy } from "./mnp_types.ts";

export interface NetworkFake {
  id: string;
  tenant: string;
  name: string;
  public?: boolean;
  defaults?: string[];
}

export class ManagerFake {
  readonly tenants = new Set<string>();
  readonly networks: NetworkFake[] = [];
  readonly groups = new Map<string, SecurityGroup>();
  ports: Port[] = [];
  readonly policies: MultiNetworkPolicy[] = [];
  readonly pods: PodLike[] = [];
  readonly namespaces: PodLike[] = [];
  readonly events: { name: string; message: string }[] = [];
  /** Group writes (POST, PUT) refused for these names, as a quota or a limit would. */
  readonly refuse = new Set<string>();
  /** Groups whose POST is answered but not kept (deleted by someone at once). */
  readonly vanish = new Set<string>();
  /** The next event fails (the API server away). */
  failEvents = 0;

  readonly client = { request: (m: string, p: string, b?: unknown) => this.request(m, p, b) };

  asManager(): ManagerClient {
    return this.client as unknown as ManagerClient;
  }

  asKube(): Kube {
    return {
      objectEvent: (o: { name: string }, _t: string, _r: string, message: string) => {
        if (this.failEvents > 0) {
          this.failEvents--;
          return Promise.reject(new Error("events unavailable"));
        }
        this.events.push({ name: o.name, message });
        return Promise.resolve();
      },
    } as unknown as Kube;
  }

  sources(): PolicySources {
    return {
      policies: (ns) =>
        this.policies.filter((p) => ns === undefined || p.metadata.namespace === ns),
      pods: () => this.pods,
      namespaces: () => this.namespaces,
      ports: () => this.ports.map((p) => this.view(p)),
      forPod: (uid) => this.ports.filter((p) => p.pod?.uid === uid).map((p) => this.view(p)),
    };
  }

  port(tenant: string, id: string): Port | undefined {
    const p = this.ports.find((x) => x.tenant === tenant && x.id === id);
    return p && this.view(p);
  }

  /** A port as the feed shows it: with its network's defaults. */
  private view(p: Port): Port {
    const n = this.networks.find((x) => x.id === p.networkId)!;
    return { ...p, networkSecurityGroups: n.defaults };
  }

  private request(method: string, path: string, body?: unknown): Promise<unknown> {
    try {
      return Promise.resolve(this.answer(method, path.split("/").map(decodeURIComponent), body));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private answer(method: string, at: string[], body: unknown): unknown {
    // at: ["", "api", "v1", ...]
    const [kind, tenant, what, name, sub, id] = at.slice(3);
    if (kind === "security-groups" && method === "GET") return { items: [...this.groups.values()] };
    if (kind !== "tenants") throw new Error(`unexpected ${method} ${at.join("/")}`);
    if (what === undefined && method === "PUT") return void this.tenants.add(tenant);
    if (!this.tenants.has(tenant)) throw new ManagerError(404, "not_found", "no tenant");
    if (what === "security-groups") return this.groupRequest(method, tenant, name, body);
    if (what === "networks" && sub === undefined && method === "GET") {
      return this.resolve(tenant, name);
    }
    if (what === "networks" && sub === "ports" && method === "PATCH") {
      return this.patchPort(
        tenant,
        name,
        id,
        body as { networkId: string; securityGroups: string[] },
      );
    }
    throw new Error(`unexpected ${method} ${at.join("/")}`);
  }

  private resolve(tenant: string, name: string): NetworkFake {
    const n = this.networks.find((x) => x.tenant === tenant && x.name === name) ??
      this.networks.find((x) => x.public && x.name === name);
    if (!n) throw new ManagerError(404, "not_found", `Network "${name}" does not exist`);
    return n;
  }

  private groupRequest(method: string, tenant: string, name: string | undefined, body: unknown) {
    const key = `${tenant}/${name}`;
    const b = body as { name?: string; description?: string; rules?: [] };
    if (method === "GET") {
      return { items: [...this.groups.values()].filter((g) => g.tenant === tenant) };
    }
    if (method === "POST" || method === "PUT") {
      const n = name ?? b.name!;
      if (this.refuse.has(n)) throw new ManagerError(403, "quota_exceeded", `refused "${n}"`);
      if (this.vanish.has(n)) return {};
      this.groups.set(`${tenant}/${n}`, {
        tenant,
        name: n,
        description: b.description,
        rules: b.rules ?? [],
        createdAt: "",
        updatedAt: "",
      });
      return {};
    }
    if (method === "DELETE") {
      if (this.ports.some((p) => p.tenant === tenant && p.securityGroups?.includes(name!))) {
        throw new ManagerError(409, "in_use", `"${name}" is in use`);
      }
      this.groups.delete(key);
      return {};
    }
    throw new Error(`unexpected ${method} group`);
  }

  private patchPort(
    tenant: string,
    network: string,
    id: string,
    body: { networkId: string; securityGroups: string[] },
  ): unknown {
    const net = this.resolve(tenant, network);
    if (net.id !== body.networkId) {
      throw new ManagerError(409, "conflict", "another network", "networkId");
    }
    const i = this.ports.findIndex((p) =>
      p.tenant === tenant && p.id === id && p.networkId === net.id
    );
    if (i < 0) throw new ManagerError(404, "not_found", `Port "${id}" does not exist`);
    for (const [k, g] of body.securityGroups.entries()) {
      if (!this.groups.has(`${tenant}/${g}`)) {
        throw new ManagerError(404, "not_found", `"${g}" does not exist`, `securityGroups[${k}]`);
      }
    }
    const next = { ...this.ports[i] };
    if (body.securityGroups.length > 0) next.securityGroups = body.securityGroups;
    else delete next.securityGroups;
    this.ports[i] = next;
    return next;
  }
}
