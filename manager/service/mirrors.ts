/**
 * Port mirrors: a tenant's choice to copy what some of its ports send and receive to a collector
 * port of its own (a tap interface in a collector pod), or an admin's, to an address over a tunnel. The
 * agents realise them as OVS Mirror rows (agent/dataplane/mirrors.ts); the manager keeps the
 * record, checks it and announces it on the change feed. Every port a mirror names is a port of the
 * mirror's tenant, whoever asks (an admin too): copies go to the collector port's interface only
 * (OVS outputs them to that port, they are never forwarded into its network), or, when an admin
 * says so, to an address over GRE, ERSPAN or VXLAN. A filter narrows what the sources send
 * ("out") to a collector port: the agents compile it into flows that match the source port itself
 * (agent/PIPELINE.md, "Filtered mirrors"), so a rule never reaches another port's packets.
 */
import type { z } from "zod";
import { formatCidr, parseCidr, parseIp } from "@knitter/common/address";
import {
  isRemoteCollector,
  type MirrorFilterRule,
  type MirrorPort,
  type MirrorRemote,
} from "@knitter/common";
import type { Principal } from "../auth.ts";
import { ApiError, invalid } from "../errors.ts";
import { keys, type MirrorRecord, type PortRecord } from "../model.ts";
import { MAX_MIRRORS_PER_TENANT, type MirrorCreate } from "../schemas.ts";
import type { Tx } from "../store/tx.ts";
import { type Ctx, listValues, now, retry } from "./context.ts";
import { resolveNetwork } from "./network_lookup.ts";
import { listNodes } from "./nodes.ts";
import { keyId } from "./ports/mod.ts";
import { getTenantEntry, missingInTenant } from "./tenants.ts";
import { claimName, countOneLess } from "./tenant_counts.ts";
import { checkedPorts } from "./security_groups.ts";

type Body = z.infer<typeof MirrorCreate>;
type PortRef = { network: string; port: string };

/** A port the body names, read in the transaction: its record and what the mirror keeps of it. */
interface Named {
  record: PortRecord;
  ref: MirrorPort;
  field: string;
}

export async function createMirror(
  ctx: Ctx,
  req: { principal: Principal; tenant: string; body: Body },
): Promise<MirrorRecord> {
  const { principal, tenant, body } = req;
  const wanted = builtCollector(principal, body);
  const filter = body.filter && checkedFilter(body);
  const mirror = await retry(ctx, async (tx) => {
    const t = await getTenantEntry(ctx, tenant);
    const e = await claimName(ctx, tx, {
      key: keys.mirror(tenant, body.name),
      count: keys.mirrorCount(tenant),
      most: MAX_MIRRORS_PER_TENANT,
      tenant,
      kind: "Mirror",
      name: body.name,
    });
    const others = await listValues<MirrorRecord>(ctx.store, keys.mirrors(tenant));
    const sources: Named[] = [];
    for (const [i, ref] of body.sources.entries()) {
      sources.push(await ownPort(ctx, tx, principal, tenant, ref, `sources[${i}]`));
    }
    if ("remote" in wanted) await checkNotANode(ctx, wanted);
    const collector = "remote" in wanted
      ? wanted
      : await ownPort(ctx, tx, principal, tenant, wanted, "collector");
    checkRoles(sources, collector, others);
    if (!("remote" in collector)) checkOneNode(sources, collector);
    const record: MirrorRecord = {
      name: body.name,
      tenant,
      sources: sources.map((s) => s.ref),
      direction: body.direction,
      ...(filter ? { filter } : {}),
      collector: "remote" in collector ? collector : collector.ref,
      createdAt: now(),
    };
    // The tenant's version: a mirror is not made while the tenant is being deleted.
    tx.check(t).set(e.key, record);
    return record;
  });
  ctx.feed.publish({ type: "mirror", op: "put", mirror });
  return mirror;
}

/**
 * A filter's rules, canonical. A filter copies what the sources send ("out") to a collector port:
 * what a pod receives, and copies over a tunnel, are not filtered by the dataplane yet.
 */
function checkedFilter(body: Body): MirrorFilterRule[] {
  if (body.direction !== "out") {
    throw invalid(
      "direction",
      `A filter copies what the pods send: give direction "out" (not "${body.direction}"), or leave out filter to copy both directions`,
    );
  }
  if ("remote" in body.collector) {
    throw invalid(
      "filter",
      "A filtered mirror copies to a collector port ({ network, port }) only; a remote collector takes unfiltered copies (filter there, e.g. with a capture filter)",
    );
  }
  return body.filter!.map((r, i) => {
    const rule: MirrorFilterRule = { protocol: r.protocol };
    if (r.ports !== undefined) rule.ports = checkedPorts(`filter[${i}].ports`, r.protocol, r.ports);
    if (r.remote !== undefined) rule.remote = checkedRemote(`filter[${i}].remote`, r.remote);
    return rule;
  });
}

/** A rule's remote: an IPv4 CIDR without host bits (the flows match IPv4). */
function checkedRemote(field: string, text: string): string {
  const cidr = parseCidr(text);
  if ("error" in cidr) throw invalid(field, `"${text}": ${cidr.error}`);
  if (cidr.family !== 4) {
    throw invalid(field, `"${text}" is IPv6: a filter matches IPv4 only, e.g. 10.1.0.0/24`);
  }
  return formatCidr(cidr);
}

/** The collector: a port, or an admin's remote address over GRE, ERSPAN or VXLAN. */
function builtCollector(principal: Principal, body: Body): PortRef | MirrorRemote {
  if (!("remote" in body.collector)) return body.collector;
  const { ip, protocol, session, vni } = body.collector.remote;
  if (principal.scope !== "admin") {
    // An address may be anyone's: copies sent there would leave the tenant's networks.
    throw new ApiError(
      "forbidden",
      "Only an admin may send a mirror's copies to a remote address; a tenant mirrors to a collector port of its own ({ network, port })",
      "collector.remote",
    );
  }
  if (parseIp(ip)?.family !== 4) {
    throw invalid("collector.remote.ip", `"${ip}" is not an IPv4 address, e.g. 192.0.2.250`);
  }
  checkTunnelKey(protocol, session, "session", "erspan", "an ERSPAN session ID");
  checkTunnelKey(protocol, vni, "vni", "vxlan", "a VXLAN network identifier");
  if (protocol === "vxlan" && vni === undefined) {
    throw invalid(
      "collector.remote.vni",
      "A VXLAN collector needs the VNI its copies carry (1 to 16777215): the collector tells its streams apart by it",
    );
  }
  return {
    remote: {
      ip,
      protocol,
      ...(session === undefined ? {} : { session }),
      ...(vni === undefined ? {} : { vni }),
    },
  };
}

/** A tunnel key (session, vni) belongs to its own protocol's collector only. */
function checkTunnelKey(
  protocol: string,
  value: number | undefined,
  field: string,
  owner: string,
  what: string,
): void {
  if (value === undefined || protocol === owner) return;
  throw invalid(
    `collector.remote.${field}`,
    `"${field}" is ${what}: it is given for protocol ${owner} only, not ${protocol}`,
  );
}

/**
 * A remote collector is never a node's underlay address: the node's tunnel port would take the
 * copies in (VXLAN by their VNI into the network of that VNI, another tenant's maybe) instead of a
 * collector reading them.
 */
async function checkNotANode(ctx: Ctx, collector: MirrorRemote): Promise<void> {
  const { ip } = collector.remote;
  const node = (await listNodes(ctx)).find((n) => sameIp(n.underlayIp, ip));
  if (node) {
    throw new ApiError(
      "conflict",
      `${ip} is node "${node.name}"'s underlay address: its tunnel port would take the mirror's copies into its networks; send them to a collector host that is not a node`,
      "collector.remote.ip",
    );
  }
}

function sameIp(a: string, b: string): boolean {
  const [x, y] = [parseIp(a), parseIp(b)];
  return x !== null && y !== null && x.family === y.family && x.value === y.value;
}

/**
 * The tenant's own port the reference names, its entry checked by the transaction. Another
 * tenant's port is answered as missing, as a port the tenant's token cannot read is.
 */
async function ownPort(
  ctx: Ctx,
  tx: Tx,
  principal: Principal,
  tenant: string,
  ref: PortRef,
  field: string,
): Promise<Named> {
  const net = await resolveNetwork(ctx, { principal, tenant, network: ref.network, fresh: true });
  const e = await ctx.store.get<PortRecord>(keys.port(net.id, keyId(net.tenant, tenant, ref.port)));
  if (!e.value || e.value.tenant !== tenant) {
    throw new ApiError(
      "not_found",
      `Port "${ref.port}" of tenant "${tenant}" does not exist on network "${ref.network}": a mirror names only its own tenant's ports`,
      field,
    );
  }
  tx.check(e);
  return {
    record: e.value,
    ref: { network: net.name, networkId: net.id, id: e.value.id },
    field,
  };
}

const same = (a: MirrorPort, b: MirrorPort) => a.networkId === b.networkId && a.id === b.id;

const collectsTo = (m: MirrorRecord, p: MirrorPort) =>
  !isRemoteCollector(m.collector) && same(m.collector, p);

/**
 * A port is a source or a collector, never both: OVS gives a mirror's output port to the mirror
 * alone (it forwards nothing else to it and drops what it sends), so a collector's own traffic
 * cannot be mirrored, and a port mirrored twice is listed once.
 */
function checkRoles(
  sources: Named[],
  collector: Named | MirrorRemote,
  others: MirrorRecord[],
): void {
  const port = "remote" in collector ? undefined : collector.ref;
  for (const [i, s] of sources.entries()) {
    if (sources.slice(0, i).some((t) => same(t.ref, s.ref))) {
      throw invalid(s.field, `port "${s.ref.id}" is listed twice`);
    }
    if (port && same(s.ref, port)) {
      throw invalid(
        "collector",
        `port "${s.ref.id}" cannot be both a source and the collector of a mirror`,
      );
    }
    const collecting = others.find((m) => collectsTo(m, s.ref));
    if (collecting) {
      throw new ApiError(
        "conflict",
        `Port "${s.ref.id}" is the collector of mirror "${collecting.name}": a collector port carries only copies; mirror another port`,
        s.field,
      );
    }
  }
  const mirrored = port && others.find((m) => m.sources.some((s) => same(s, port)));
  if (mirrored) {
    throw new ApiError(
      "conflict",
      `Port "${port.id}" is a source of mirror "${mirrored.name}"; a collector port carries only copies: use a port of its own (a collector pod's)`,
      "collector",
    );
  }
}

/**
 * The copies are made on the node of the sources: a bound source on another node than a bound
 * collector is refused (the agents also skip such a source when a pod moves: agent/README.md).
 */
function checkOneNode(sources: Named[], collector: Named): void {
  const node = collector.record.node;
  if (node === undefined) return;
  const away = sources.find((s) => s.record.node !== undefined && s.record.node !== node);
  if (away) {
    throw new ApiError(
      "conflict",
      `Port "${away.ref.id}" is on node "${away.record.node}" and the collector "${collector.ref.id}" on node "${node}": a mirror copies on one node; run the collector pod on the sources' node`,
      away.field,
    );
  }
}

export async function getMirror(ctx: Ctx, tenant: string, name: string): Promise<MirrorRecord> {
  const m = (await ctx.store.get<MirrorRecord>(keys.mirror(tenant, name))).value;
  if (!m) {
    return await missingInTenant(ctx, tenant, `Mirror "${name}"`);
  }
  return m;
}

/** A tenant's mirrors, or every tenant's (the agents' list). */
export async function listMirrors(ctx: Ctx, tenant?: string): Promise<MirrorRecord[]> {
  if (tenant !== undefined) await getTenantEntry(ctx, tenant);
  return await listValues<MirrorRecord>(ctx.store, keys.mirrors(tenant));
}

export async function deleteMirror(ctx: Ctx, tenant: string, name: string): Promise<void> {
  const mirror = await retry(ctx, async (tx) => {
    const e = await ctx.store.get<MirrorRecord>(keys.mirror(tenant, name));
    if (!e.value) {
      return await missingInTenant(ctx, tenant, `Mirror "${name}"`);
    }
    tx.check(e).delete(e.key);
    await countOneLess(ctx, tx, keys.mirrorCount(tenant));
    return e.value;
  });
  ctx.feed.publish({ type: "mirror", op: "delete", mirror });
}
