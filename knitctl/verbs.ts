/**
 * The manager's verbs: get, create, update, delete, usage. Each is one request and one printout
 * (update of a router: a read, then the whole router sent back changed).
 */
import { ManagerClient } from "@knitter/common";
import { type CommandLine, requireFlagsOf, str } from "./args.ts";
import type { Settings } from "./config.ts";
import { UsageError } from "./errors.ts";
import { explainManagerError } from "./failures.ts";
import { json, objectTable, table } from "./output.ts";
import { findResource, type Resource, RESOURCES, type Scope } from "./resources.ts";

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

export interface VerbContext {
  line: CommandLine;
  settings: Settings;
  io: Io;
}

// deno-lint-ignore no-explicit-any
type Obj = any;

export async function get(c: VerbContext): Promise<void> {
  const r = findResource(c.line.args[0], "get");
  const name = nameArg(c, r, "get", false);
  const flags = r.plural === "ports"
    ? ["network", "node", "pod"]
    : r.needsNetwork
    ? ["network"]
    : [];
  requireFlagsOf(c.line, flags, `get ${r.plural}`);
  const scope = scopeOf(c, r);
  if (name !== undefined) {
    const obj = await call(c, "GET", r.item(scope, name), undefined, listHint(c, r));
    c.io.out(c.settings.output === "json" ? json(obj) : render(c, r, [obj]));
    return;
  }
  const list = await call<{ items: Obj[] }>(c, "GET", r.list(scope, c.line.flags));
  if (c.settings.output === "json") return c.io.out(json(list));
  if (list.items.length === 0) return c.io.err(`No ${r.plural} found${where(c, r)}\n`);
  c.io.out(render(c, r, list.items));
}

export async function create(c: VerbContext): Promise<void> {
  const r = findResource(c.line.args[0], "create");
  const name = nameArg(c, r, "create", !r.create.nameOptional) ?? "";
  requireFlagsOf(c.line, r.create.flags, `create ${r.kind}`);
  for (const [flag, example] of Object.entries(r.create.required)) {
    // A repeatable flag's value is a list: given is what counts, not its type.
    if (c.line.flags[flag] === undefined) {
      throw new UsageError(`create ${r.kind} needs --${flag} (e.g. --${flag} ${example})`);
    }
  }
  const scope = scopeOf(c, r);
  const body = r.create.body(name, c.line.flags);
  const path = r.create.method === "PUT" ? r.item(scope, name) : r.list(scope, {});
  const obj = await call<Obj>(c, r.create.method, path, body);
  // A name the manager picked (a floating address) is told.
  const made = name || obj.address;
  c.io.out(c.settings.output === "json" ? json(obj) : `${r.kind}/${made} created\n`);
}

/**
 * `update network|router NAME --advertise=true|false`: a network is PATCHed; a router, which the
 * API replaces whole, is read and sent back with the change.
 */
export async function update(c: VerbContext): Promise<void> {
  const r = findResource(c.line.args[0], "update");
  if (!r.update) {
    const can = RESOURCES.filter((x) => x.update).map((x) => x.kind).join(", ");
    throw new UsageError(`update is for ${can}, not ${r.plural}`);
  }
  const name = nameArg(c, r, "update", true)!;
  requireFlagsOf(c.line, r.update.flags, `update ${r.kind}`);
  const changes = r.update.changes(c.line.flags);
  const path = r.item(scopeOf(c, r), name);
  const keep = r.update.keep;
  const obj = keep
    ? await call<Obj>(c, "PUT", path, {
      ...keep(await call<Obj>(c, "GET", path, undefined, listHint(c, r))),
      ...changes,
    }, listHint(c, r))
    : await call<Obj>(c, "PATCH", path, changes, listHint(c, r));
  c.io.out(c.settings.output === "json" ? json(obj) : `${r.kind}/${name} updated\n`);
}

export async function remove(c: VerbContext): Promise<void> {
  const r = findResource(c.line.args[0], "delete");
  const name = nameArg(c, r, "delete", true)!;
  requireFlagsOf(c.line, r.needsNetwork ? ["network"] : [], `delete ${r.kind}`);
  await call(c, "DELETE", r.item(scopeOf(c, r), name), undefined, listHint(c, r));
  const done = `${r.kind}/${name}`;
  c.io.out(c.settings.output === "json" ? json({ deleted: done }) : `${done} deleted\n`);
}

/**
 * `activate port ID --network NET`: the port of a claim takes the claim's traffic, and the claim's
 * other port (a live migration's source) none, in one step at the manager.
 */
export async function activate(c: VerbContext): Promise<void> {
  const r = findResource(c.line.args[0], "activate");
  if (r.plural !== "ports") {
    throw new UsageError(`activate is for a port of a claim (activate port ID), not ${r.plural}`);
  }
  const name = nameArg(c, r, "activate", true)!;
  requireFlagsOf(c.line, ["network"], "activate port");
  const path = `${r.item(scopeOf(c, r), name)}/activate`;
  const port = await call(c, "POST", path, undefined, listHint(c, r));
  if (c.settings.output === "json") return c.io.out(json(port));
  const where = port.node ? ` on node ${port.node}` : "";
  c.io.out(`port/${name} active: it has claim ${port.claim} (${port.ip})${where}\n`);
}

/**
 * `bind floatingip ADDRESS --network NET --port ID` (or `--claim NAME`: its active port): 1:1 NAT
 * to one of the tenant's ports.
 */
export async function bind(c: VerbContext): Promise<void> {
  const { r, address } = floatingArg(c, "bind");
  requireFlagsOf(c.line, ["network", "port", "claim"], "bind floatingip");
  const network = str(c.line.flags, "network");
  const port = str(c.line.flags, "port");
  const claim = str(c.line.flags, "claim");
  if (!network || (port === undefined) === (claim === undefined)) {
    throw new UsageError(
      "bind floatingip ADDRESS needs --network NET and either --port ID or --claim NAME",
    );
  }
  const path = `${r.item(scopeOf(c, r), address)}/bind`;
  const body = port !== undefined ? { network, port } : { network, claim };
  const obj = await call<Obj>(c, "POST", path, body, listHint(c, r));
  if (c.settings.output === "json") return c.io.out(json(obj));
  const to = port !== undefined ? `port ${port}` : `claim ${claim}`;
  c.io.out(`floatingip/${address} bound to ${to} of network ${network}\n`);
}

/** `unbind floatingip ADDRESS`: off its port, still the tenant's. */
export async function unbind(c: VerbContext): Promise<void> {
  const { r, address } = floatingArg(c, "unbind");
  requireFlagsOf(c.line, [], "unbind floatingip");
  const path = `${r.item(scopeOf(c, r), address)}/unbind`;
  const obj = await call<Obj>(c, "POST", path, undefined, listHint(c, r));
  if (c.settings.output === "json") return c.io.out(json(obj));
  c.io.out(`floatingip/${address} unbound (still the tenant's)\n`);
}

function floatingArg(c: VerbContext, verb: string): { r: Resource; address: string } {
  const r = findResource(c.line.args[0], verb);
  if (r.plural !== "floatingips") {
    throw new UsageError(`${verb} is for floating addresses (${verb} floatingip ADDRESS)`);
  }
  return { r, address: nameArg(c, r, verb, true)! };
}

export async function usage(c: VerbContext): Promise<void> {
  if (c.line.args[0] === "quota" || c.line.args[0] === "quotas") return await quotaUsage(c);
  const r = findResource(c.line.args[0], "usage");
  if (!r.usage) {
    throw new UsageError(
      `usage is for networks (addresses) and physnets (VLAN IDs), not ${r.plural}`,
    );
  }
  const name = nameArg(c, r, "usage", false);
  requireFlagsOf(c.line, [], `usage ${r.plural}`);
  const scope = scopeOf(c, r);
  const objects: Obj[] = name !== undefined
    ? [await call(c, "GET", r.item(scope, name), undefined, listHint(c, r))]
    : (await call<{ items: Obj[] }>(c, "GET", r.list(scope, {}))).items;
  const rows = objects.map((o) => ({
    name: o.name,
    ...(r.tenantScoped ? { tenant: o.tenant } : {}),
    ...o.usage,
  }));
  if (c.settings.output === "json") {
    return c.io.out(json(name !== undefined ? rows[0] : { items: rows }));
  }
  if (rows.length === 0) return c.io.err(`No ${r.plural} found${where(c, r)}\n`);
  const headers = ["NAME", ...(r.tenantScoped ? ["TENANT"] : []), "TOTAL", "USED", "FREE"];
  c.io.out(table(
    headers,
    rows.map((u) => [
      u.name,
      ...(r.tenantScoped ? [u.tenant] : []),
      String(u.total),
      String(u.used),
      String(u.free),
    ]),
  ));
}

/** `usage quota`: the tenant's quota, what it holds of each kind, and what is left. */
async function quotaUsage(c: VerbContext): Promise<void> {
  if (c.line.args.length > 1) throw new UsageError("usage quota takes no name: it is the tenant's");
  requireFlagsOf(c.line, [], "usage quota");
  const tenant = c.settings.tenant;
  const q = await call<Obj>(c, "GET", `/api/v1/tenants/${encodeURIComponent(tenant)}/quota`);
  if (c.settings.output === "json") return c.io.out(json(q));
  const kinds = ["networks", "ports", "addresses", "vlanIds", "vnis", "floatingIps"];
  c.io.out(table(
    ["QUOTA", "USED", "LIMIT", "LEFT"],
    kinds.map((k) => {
      const limit = q.limits?.[k];
      const used = q.used?.[k] ?? 0;
      return [
        k,
        String(used),
        limit === undefined ? "-" : String(limit),
        limit === undefined ? "-" : String(Math.max(0, limit - used)),
      ];
    }),
  ));
}

function render(c: VerbContext, r: Resource, objects: Obj[]): string {
  return objectTable(r.columns, objects, c.settings.output === "wide");
}

function nameArg(c: VerbContext, r: Resource, verb: string, required: boolean): string | undefined {
  const [, name, ...extra] = c.line.args;
  if (extra.length) {
    throw new UsageError(`${verb} takes one name, got also "${extra.join(" ")}"`);
  }
  if (required && !name) {
    throw new UsageError(`${verb} ${r.kind} needs a name: knitctl ${verb} ${r.kind} NAME`);
  }
  return name;
}

function scopeOf(c: VerbContext, r: Resource): Scope {
  const network = str(c.line.flags, "network");
  return { tenant: c.settings.tenant, ...(r.needsNetwork && network ? { network } : {}) };
}

function where(c: VerbContext, r: Resource): string {
  return r.tenantScoped ? ` in tenant "${c.settings.tenant}"` : "";
}

function listHint(c: VerbContext, r: Resource): string {
  const t = r.tenantScoped ? ` -t ${c.settings.tenant}` : "";
  const n = r.needsNetwork ? ` --network ${str(c.line.flags, "network")}` : "";
  return `knitctl${t} get ${r.plural}${n}`;
}

/** One API call with the settings' server and token; errors come back explained. */
async function call<T = Obj>(
  c: VerbContext,
  method: string,
  path: string,
  body?: unknown,
  hint?: string,
): Promise<T> {
  const client = await managerClient(c.settings);
  try {
    return await client.request<T>(method, path, body);
  } catch (err) {
    throw explainManagerError(err, hint);
  } finally {
    client.close();
  }
}

export async function managerClient(s: Settings): Promise<ManagerClient> {
  if (!s.server) {
    throw new UsageError(
      'No manager given: pass --server URL, set KNITCTL_SERVER, use --stack DIR, or put "server" in ~/.config/knitter/knitctl.json',
    );
  }
  let url: URL;
  try {
    url = new URL(s.server);
  } catch {
    throw new UsageError(`--server "${s.server}" is not a URL: use e.g. http://127.0.0.1:9090`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`--server "${s.server}" must be an http:// or https:// URL`);
  }
  if (!s.token) {
    throw new UsageError(
      'No token given: pass --token TOKEN, set KNITCTL_TOKEN, use --stack DIR, or put "token" in the config file',
    );
  }
  let caPem: string | undefined;
  if (s.caFile) {
    try {
      caPem = await Deno.readTextFile(s.caFile);
    } catch (err) {
      throw new UsageError(`Cannot read caFile ${s.caFile}: ${(err as Error).message}`);
    }
  }
  return new ManagerClient(s.server.replace(/\/$/, ""), s.token, caPem ? { caPem } : {});
}
