/** Bearer tokens and their scopes, and the one function that decides what a scope may reach. */
import { ApiError } from "./errors.ts";

export type Principal =
  | { scope: "admin" }
  | { scope: "tenant"; tenant: string }
  | { scope: "node"; node: string }
  /** Reads /metrics (Prometheus) and nothing else. */
  | { scope: "metrics" };

export interface TokenConfig {
  token: string;
  scope: "admin" | "tenant" | "node" | "metrics";
  tenant?: string;
  node?: string;
}

/**
 * Who may call a route, before the handler looks at the resource:
 * - admin: admin only;
 * - any: every valid token;
 * - tenant: admin, or a tenant token for the path's tenant;
 * - shared: admin, node, or any tenant token; the handler lets a tenant reach another tenant's
 *   path only for public networks (and answers 404 for private ones);
 * - node: admin, or a node token for the path's node;
 * - infra: admin or any node token (what only the system's own components read).
 */
export type Access = "admin" | "any" | "tenant" | "shared" | "node" | "infra";

export class TokenTable {
  private readonly byToken = new Map<string, Principal>();

  constructor(tokens: TokenConfig[]) {
    for (const t of tokens) this.byToken.set(t.token, principalOf(t));
  }

  get size(): number {
    return this.byToken.size;
  }

  /** The principal of an Authorization header; 401 when it is missing or unknown. */
  authenticate(header: string | undefined): Principal {
    const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
    if (!match) {
      throw new ApiError(
        "unauthorized",
        "Missing bearer token: send 'Authorization: Bearer <token>' with a token from the manager's configuration",
      );
    }
    const principal = this.byToken.get(match[1]);
    if (!principal) throw new ApiError("unauthorized", "Unknown bearer token");
    return principal;
  }
}

function principalOf(t: TokenConfig): Principal {
  switch (t.scope) {
    case "admin":
      return { scope: "admin" };
    case "metrics":
      return { scope: "metrics" };
    case "tenant":
      if (!t.tenant) throw new Error("a tenant-scoped token needs a tenant");
      return { scope: "tenant", tenant: t.tenant };
    case "node":
      if (!t.node) throw new Error("a node-scoped token needs a node");
      return { scope: "node", node: t.node };
  }
}

export function describe(p: Principal): string {
  switch (p.scope) {
    case "admin":
      return "an admin token";
    case "tenant":
      return `a token of tenant "${p.tenant}"`;
    case "node":
      return `a token of node "${p.node}"`;
    case "metrics":
      return "a metrics token";
  }
}

export function authorize(p: Principal, access: Access, params: Record<string, string>): void {
  if (p.scope === "admin") return;
  const deny = (what: string) => {
    throw new ApiError("forbidden", `${describe(p)} may not ${what}`);
  };
  if (p.scope === "metrics") return deny("use the API: it reads /metrics only");
  if (access === "any") return;
  switch (access) {
    case "admin":
      return deny("use this admin-only route");
    case "tenant":
      if (p.scope === "tenant" && params.tenant === p.tenant) return;
      return deny(`act on tenant "${params.tenant}"`);
    case "shared":
      return;
    case "node":
      if (p.scope === "node" && params.node === p.node) return;
      return deny(`act on node "${params.node}"`);
    case "infra":
      if (p.scope === "node") return;
      return deny("read what only nodes and admins read");
  }
}
