/**
 * The resources knitctl manages, as data: names, where they live in the API, their table columns
 * and how a create command line becomes a request body.
 */
import { type FlagValues, str, strs } from "./args.ts";
import { UsageError } from "./errors.ts";
import { delegateFlag } from "./delegate_flag.ts";
import * as V from "./values.ts";

// deno-lint-ignore no-explicit-any
type Obj = any;

export interface Column {
  header: string;
  value(o: Obj): string;
  /** Only with -o wide. */
  wide?: boolean;
}

/** What a path depends on besides the name: the tenant, and for ports the network. */
export interface Scope {
  tenant: string;
  network?: string;
}

export interface CreateSpec {
  flags: string[];
  /** Flags without which the request cannot be made, with an example value. */
  required: Record<string, string>;
  /** PUT to the item's path (idempotent IDs), or POST to the collection. */
  method: "POST" | "PUT";
  /** The name may be left out (the manager picks it: a floating address); body gets "". */
  nameOptional?: boolean;
  body(name: string, flags: FlagValues): unknown;
}

/** `update`: the fields a command line changes in an existing object. */
export interface UpdateSpec {
  flags: string[];
  /** The fields the command line changes (checked before any request). */
  changes(flags: FlagValues): Record<string, unknown>;
  /**
   * The API replaces the object whole (PUT): what is sent back of it as it was read (GET) beside
   * the changes; absent: the changes alone are PATCHed.
   */
  keep?(current: Obj): Record<string, unknown>;
}

export interface Resource {
  /** Plural, as printed in messages. */
  plural: string;
  /** Singular, as in "network/blue deleted". */
  kind: string;
  names: string[];
  tenantScoped: boolean;
  /** Ports live in a network: get by name and delete need --network. */
  needsNetwork?: boolean;
  list(scope: Scope, flags: FlagValues): string;
  item(scope: Scope, name: string): string;
  columns: Column[];
  create: CreateSpec;
  /** What `update` may change; absent: nothing (update says so). */
  update?: UpdateSpec;
  /** Has a usage figure (total/used/free). */
  usage?: boolean;
}

const V1 = "/api/v1";
const enc = encodeURIComponent;

function tenantPath(scope: Scope, rest: string): string {
  return `${V1}/tenants/${enc(scope.tenant)}/${rest}`;
}

function networkOf(scope: Scope, what: string): string {
  if (!scope.network) {
    throw new UsageError(`${what} needs --network NAME: it belongs to a network`);
  }
  return scope.network;
}

/** A port's claim, and "(inactive)" while the other port of its claim has its traffic. */
function claimText(o: Obj): string {
  if (!o.claim) return "";
  return o.active === false ? `${o.claim} (inactive)` : o.claim;
}

const age = (o: Obj, key = "createdAt") => ago(o[key]);
const usageText = (u: Obj) => u ? `${u.used}/${u.total}` : "";

export const RESOURCES: Resource[] = [
  {
    plural: "tenants",
    kind: "tenant",
    names: ["tenants", "tenant"],
    tenantScoped: false,
    list: () => `${V1}/tenants`,
    item: (_s, name) => `${V1}/tenants/${enc(name)}`,
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "NETWORKS", value: (o) => String(o.networks) },
      { header: "IPGROUPS", value: (o) => String(o.ipGroups) },
      { header: "AGE", value: age },
    ],
    create: { flags: [], required: {}, method: "POST", body: (name) => ({ name }) },
  },
  {
    plural: "networks",
    kind: "network",
    names: ["networks", "network", "net", "nets"],
    tenantScoped: true,
    usage: true,
    list: (s) => tenantPath(s, "networks"),
    item: (s, name) => tenantPath(s, `networks/${enc(name)}`),
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "TENANT", value: (o) => o.tenant },
      { header: "TYPE", value: (o) => o.type },
      { header: "CIDR", value: (o) => o.cidr },
      { header: "GATEWAY", value: (o) => o.gateway ?? "" },
      { header: "CIDR6", value: (o) => o.cidr6 ?? "", wide: true },
      { header: "GATEWAY6", value: (o) => o.gateway6 ?? "", wide: true },
      { header: "SEGMENT", value: (o) => o.segmentId === undefined ? "" : String(o.segmentId) },
      { header: "USED", value: (o) => usageText(o.usage) },
      { header: "PHYSNET", value: (o) => o.physnet ?? "", wide: true },
      { header: "MTU", value: (o) => String(o.mtu), wide: true },
      { header: "PUBLIC", value: (o) => String(o.public), wide: true },
      { header: "ID", value: (o) => o.id, wide: true },
      { header: "EGRESS", value: (o) => String(o.egress === true), wide: true },
      { header: "HOSTACCESS", value: (o) => String(o.hostAccess === true), wide: true },
      { header: "ADVERTISE", value: advertiseText, wide: true },
      { header: "DSCP", value: (o) => o.dscp === undefined ? "" : String(o.dscp), wide: true },
      { header: "DATAPLANE", value: (o) => o.dataPlane ?? "ovs", wide: true },
      { header: "DELEGATE", value: (o) => delegateText(o.delegate), wide: true },
      { header: "AGE", value: age },
    ],
    create: {
      flags: [
        "cidr",
        "type",
        "gateway",
        "cidr6",
        "gateway6",
        "pool",
        "exclude",
        "public",
        "egress",
        "host-access",
        "data-plane",
        "delegate",
        "physnet",
        "segment-id",
        "mtu",
        "dscp",
        "route",
        "dns-server",
        "dns-domain",
        "dns-search",
        "description",
        "security-group",
      ],
      required: { cidr: "10.1.0.0/24" },
      method: "POST",
      body: networkBody,
    },
    update: { flags: ["advertise"], changes: advertiseFlag },
  },
  {
    plural: "physnets",
    kind: "physnet",
    names: ["physnets", "physnet"],
    tenantScoped: false,
    usage: true,
    list: () => `${V1}/physnets`,
    item: (_s, name) => `${V1}/physnets/${enc(name)}`,
    columns: [
      { header: "NAME", value: (o) => o.name },
      {
        header: "VLANS",
        value: (o) => o.vlanRanges.map((r: Obj) => `${r.start}-${r.end}`).join(","),
      },
      { header: "NETWORKS", value: (o) => String(o.networks) },
      { header: "USED", value: (o) => usageText(o.usage) },
      { header: "DESCRIPTION", value: (o) => o.description ?? "", wide: true },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["vlan-range", "description"],
      required: {},
      method: "POST",
      body: (name, f) => ({
        name,
        vlanRanges: (strs(f, "vlan-range") ?? []).map((r) => V.vlanRange("vlan-range", r)),
        ...optional("description", str(f, "description")),
      }),
    },
  },
  {
    plural: "ipgroups",
    kind: "ipgroup",
    names: ["ipgroups", "ipgroup", "ipg"],
    tenantScoped: true,
    list: (s) => tenantPath(s, "ipgroups"),
    item: (s, name) => tenantPath(s, `ipgroups/${enc(name)}`),
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "NETWORK", value: (o) => o.network },
      { header: "SIZE", value: (o) => String(o.size) },
      { header: "USED", value: (o) => String(o.used) },
      {
        header: "ADDRESSES",
        value: (o) => o.addresses.map((a: Obj) => a.ip).join(","),
        wide: true,
      },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["network", "size", "addresses"],
      required: { network: "blue" },
      method: "POST",
      body: ipGroupBody,
    },
  },
  {
    plural: "routers",
    kind: "router",
    names: ["routers", "router", "rt"],
    tenantScoped: true,
    list: (s) => tenantPath(s, "routers"),
    item: (s, name) => tenantPath(s, `routers/${enc(name)}`),
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "NETWORKS", value: (o) => o.networks.map((n: Obj) => n.name).join(",") },
      {
        header: "ROUTES",
        value: (o) => o.routes.map((r: Obj) => `${r.dst} via ${r.via}`).join(","),
      },
      { header: "ADVERTISE", value: (o) => String(o.advertise === true) },
      { header: "CIDRS", value: (o) => o.networks.map((n: Obj) => n.cidr).join(","), wide: true },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["networks", "route", "description"],
      required: { networks: "red,blue" },
      method: "POST",
      body: (name, f) => ({
        name,
        networks: V.list(strs(f, "networks")),
        ...listed("routes", strs(f, "route")?.map((r) => V.gatewayRoute("route", r))),
        ...optional("description", str(f, "description")),
      }),
    },
    // The API replaces a router whole: what it connects and routes is sent back as it was read.
    update: {
      flags: ["advertise"],
      changes: advertiseFlag,
      keep: (r) => ({
        networks: r.networks.map((n: Obj) => n.name),
        routes: r.routes,
        ...optional("description", r.description),
      }),
    },
  },
  {
    plural: "securitygroups",
    kind: "securitygroup",
    names: ["securitygroups", "securitygroup", "sg"],
    tenantScoped: true,
    list: (s) => tenantPath(s, "security-groups"),
    item: (s, name) => tenantPath(s, `security-groups/${enc(name)}`),
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "RULES", value: (o) => String(o.rules.length) },
      { header: "RULE-LIST", value: (o) => o.rules.map(V.formatRule).join(" "), wide: true },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["rule", "description"],
      required: {},
      method: "POST",
      body: (name, f) => ({
        name,
        rules: (strs(f, "rule") ?? []).map((r) => V.securityRule("rule", r)),
        ...optional("description", str(f, "description")),
      }),
    },
  },
  {
    plural: "mirrors",
    kind: "mirror",
    names: ["mirrors", "mirror"],
    tenantScoped: true,
    list: (s) => tenantPath(s, "mirrors"),
    item: (s, name) => tenantPath(s, `mirrors/${enc(name)}`),
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "SOURCES", value: (o) => o.sources.map(portText).join(",") },
      { header: "DIRECTION", value: (o) => o.direction },
      { header: "COLLECTOR", value: (o) => portText(o.collector) },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["source", "collector", "direction", "match"],
      required: { source: "blue/web-0-eth1", collector: "taps/tap-0-eth1" },
      method: "POST",
      body: (name, f) => ({
        name,
        sources: V.list(strs(f, "source")).map((s) => V.portRef("source", s)),
        collector: V.collector("collector", str(f, "collector") ?? ""),
        ...optional("direction", str(f, "direction")),
        ...(strs(f, "match")
          ? { filter: strs(f, "match")!.map((m) => V.mirrorMatch("match", m)) }
          : {}),
      }),
    },
  },
  {
    plural: "services",
    kind: "service",
    names: ["services", "service", "svc"],
    tenantScoped: true,
    list: (s) => tenantPath(s, "services"),
    item: (s, name) => tenantPath(s, `services/${enc(name)}`),
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "NETWORK", value: (o) => o.network },
      { header: "VIP", value: (o) => (o.vips ?? [o.vip]).join(",") },
      { header: "PORTS", value: (o) => o.ports.map(servicePortText).join(",") },
      {
        header: "ENDPOINTS",
        value: (o) => `${o.status?.endpoints.length ?? 0}/${o.backends.length}`,
      },
      { header: "AFFINITY", value: (o) => o.sessionAffinity, wide: true },
      { header: "STATUS", value: (o) => o.status?.message ?? "", wide: true },
      { header: "AGE", value: age },
    ],
    create: {
      flags: [
        "network",
        "vip",
        "service-port",
        "backend",
        "selector",
        "affinity",
        "ip-families",
        "ip-family-policy",
      ],
      required: { network: "blue", "service-port": "tcp:80:8080" },
      method: "POST",
      body: (name, f) => ({
        name,
        network: str(f, "network"),
        ports: (strs(f, "service-port") ?? []).map((p) => V.servicePort("service-port", p)),
        backends: V.list(strs(f, "backend")),
        ...(strs(f, "selector") ? { selector: V.labels("selector", strs(f, "selector")!) } : {}),
        ...optional("vip", str(f, "vip")),
        ...optional("sessionAffinity", str(f, "affinity")),
        ...(str(f, "ip-families") ? { ipFamilies: V.list([str(f, "ip-families")!]) } : {}),
        ...optional("ipFamilyPolicy", str(f, "ip-family-policy")),
      }),
    },
  },
  {
    plural: "ports",
    kind: "port",
    names: ["ports", "port"],
    tenantScoped: true,
    needsNetwork: true,
    list: (s, f) => {
      if (s.network) return tenantPath(s, `networks/${enc(s.network)}/ports${portQuery(f)}`);
      return `${V1}/ports${portQuery(f, s.tenant)}`;
    },
    item: (s, name) =>
      tenantPath(s, `networks/${enc(networkOf(s, "A port by name"))}/ports/${enc(name)}`),
    columns: [
      { header: "ID", value: (o) => o.id },
      { header: "NETWORK", value: (o) => o.network },
      { header: "IP", value: (o) => o.ip },
      { header: "IP6", value: (o) => o.ip6 ?? "", wide: true },
      { header: "MAC", value: (o) => o.mac },
      { header: "NODE", value: (o) => o.node ?? "" },
      { header: "POD", value: (o) => o.pod ? `${o.pod.namespace}/${o.pod.name}` : "" },
      { header: "INTERFACE", value: (o) => o.interface ?? "", wide: true },
      { header: "IPGROUP", value: (o) => o.ipGroup ?? "", wide: true },
      { header: "CLAIM", value: (o) => claimText(o), wide: true },
      {
        header: "SECURITY-GROUPS",
        value: (o) => (o.securityGroups ?? o.networkSecurityGroups ?? []).join(","),
        wide: true,
      },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["network", "ip", "ip-group", "mac", "node", "security-group", "claim"],
      required: { network: "blue" },
      method: "PUT",
      body: (_name, f) => ({
        ...optional("ip", str(f, "ip")),
        ...optional("ipGroup", str(f, "ip-group")),
        ...optional("claim", str(f, "claim")),
        ...optional("mac", str(f, "mac")?.toLowerCase()),
        ...optional("node", str(f, "node")),
        ...listed("securityGroups", V.list(strs(f, "security-group"))),
      }),
    },
  },
  {
    plural: "claims",
    kind: "claim",
    names: ["claims", "claim"],
    tenantScoped: true,
    needsNetwork: true,
    list: (s) =>
      s.network ? tenantPath(s, `networks/${enc(s.network)}/claims`) : tenantPath(s, "claims"),
    item: (s, name) =>
      tenantPath(s, `networks/${enc(networkOf(s, "A claim by name"))}/claims/${enc(name)}`),
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "NETWORK", value: (o) => o.network },
      { header: "IP", value: (o) => o.ip },
      { header: "IP6", value: (o) => o.ip6 ?? "", wide: true },
      { header: "MAC", value: (o) => o.mac },
      {
        header: "PORTS",
        value: (o) =>
          o.ports.map((p: Obj) =>
            `${p.id}${p.node ? `@${p.node}` : ""}${p.active ? "" : " (inactive)"}`
          )
            .join(","),
      },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["network"],
      required: { network: "blue" },
      method: "POST",
      body: (name) => ({ name }),
    },
  },
  {
    plural: "floatingpools",
    kind: "floatingpool",
    names: ["floatingpools", "floatingpool"],
    tenantScoped: false,
    list: () => `${V1}/floating-pools`,
    item: (_s, name) => `${V1}/floating-pools/${enc(name)}`,
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "CIDRS", value: (o) => o.cidrs.join(",") },
      { header: "DESCRIPTION", value: (o) => o.description ?? "", wide: true },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["cidr", "description"],
      required: { cidr: "203.0.113.0/28" },
      method: "POST",
      body: (name, f) => ({
        name,
        cidrs: [str(f, "cidr")],
        ...optional("description", str(f, "description")),
      }),
    },
  },
  {
    plural: "floatingips",
    kind: "floatingip",
    names: ["floatingips", "floatingip", "fip"],
    tenantScoped: true,
    list: (s) => tenantPath(s, "floating-ips"),
    item: (s, address) => tenantPath(s, `floating-ips/${enc(address)}`),
    columns: [
      { header: "ADDRESS", value: (o) => o.address },
      { header: "POOL", value: (o) => o.pool },
      { header: "NETWORK", value: (o) => (o.port ?? o.claim)?.network ?? "" },
      {
        header: "PORT",
        value: (o) => o.port?.id ?? (o.claim ? `claim ${o.claim.name}` : ""),
      },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["floating-pool"],
      required: { "floating-pool": "ext" },
      method: "POST",
      nameOptional: true,
      body: (address, f) => ({
        pool: str(f, "floating-pool"),
        ...optional("address", address || undefined),
      }),
    },
  },
  {
    plural: "nodes",
    kind: "node",
    names: ["nodes", "node", "no"],
    tenantScoped: false,
    list: () => `${V1}/nodes`,
    item: (_s, name) => `${V1}/nodes/${enc(name)}`,
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "UNDERLAY-IP", value: (o) => o.underlayIp },
      {
        header: "LABELS",
        value: (o) => Object.entries(o.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(",") || "",
        wide: true,
      },
      { header: "AGE", value: (o) => ago(o.registeredAt) },
    ],
    create: {
      flags: ["underlay-ip", "label"],
      required: { "underlay-ip": "192.0.2.10" },
      method: "PUT",
      body: (_name, f) => {
        const l = strs(f, "label");
        return {
          underlayIp: str(f, "underlay-ip"),
          ...(l ? { labels: V.labels("label", l) } : {}),
        };
      },
    },
  },
  {
    plural: "clusters",
    kind: "cluster",
    names: ["clusters", "cluster"],
    tenantScoped: false,
    list: () => `${V1}/clusters`,
    item: (_s, name) => `${V1}/clusters/${enc(name)}`,
    columns: [
      { header: "NAME", value: (o) => o.name },
      { header: "TENANTS", value: (o) => o.tenants.join(",") },
      { header: "NETWORKS", value: (o) => o.networks.join(","), wide: true },
      { header: "PHYSNETS", value: (o) => o.physnets.join(",") },
      { header: "NODES", value: (o) => o.nodes?.join(",") ?? "", wide: true },
      { header: "DESCRIPTION", value: (o) => o.description ?? "", wide: true },
      { header: "AGE", value: age },
    ],
    create: {
      flags: ["allow-tenant", "allow-network", "allow-physnet", "description"],
      required: {},
      method: "POST",
      body: (name, f) => ({
        name,
        ...listed("tenants", V.list(strs(f, "allow-tenant"))),
        ...listed("networks", V.list(strs(f, "allow-network"))),
        ...listed("physnets", V.list(strs(f, "allow-physnet"))),
        ...optional("description", str(f, "description")),
      }),
    },
  },
];

/** The resource a name means, or a usage error listing the names there are. */
export function findResource(name: string | undefined, verb: string): Resource {
  const all = RESOURCES.map((r) => r.plural).join(", ");
  if (!name) throw new UsageError(`${verb} needs a resource: one of ${all}`);
  const r = RESOURCES.find((x) => x.names.includes(name.toLowerCase()));
  if (!r) throw new UsageError(`Unknown resource "${name}": use one of ${all}`);
  return r;
}

function networkBody(name: string, f: FlagValues): unknown {
  const servers = V.list(strs(f, "dns-server"));
  const search = V.list(strs(f, "dns-search"));
  const domain = str(f, "dns-domain");
  const dns = servers.length || search.length || domain
    ? {
      ...(servers.length ? { nameservers: servers } : {}),
      ...(search.length ? { search } : {}),
      ...optional("domain", domain),
    }
    : undefined;
  const segment = str(f, "segment-id");
  const mtu = str(f, "mtu");
  const dscp = str(f, "dscp");
  return {
    name,
    cidr: str(f, "cidr"),
    ...optional("type", str(f, "type")),
    ...optional("gateway", str(f, "gateway")),
    ...optional("cidr6", str(f, "cidr6")),
    ...optional("gateway6", str(f, "gateway6")),
    ...listed("allocationPools", strs(f, "pool")?.map((p) => V.addressRange("pool", p))),
    ...listed("excludes", V.list(strs(f, "exclude"))),
    ...(f.public ? { public: true } : {}),
    ...(f.egress ? { egress: true } : {}),
    ...(f["host-access"] ? { hostAccess: true } : {}),
    ...optional("dataPlane", str(f, "data-plane")),
    ...(str(f, "delegate") ? { delegate: delegateFlag(str(f, "delegate")!) } : {}),
    ...optional("physnet", str(f, "physnet")),
    ...(segment ? { segmentId: V.integer("segment-id", segment, 1, 16777215) } : {}),
    ...(mtu ? { mtu: V.integer("mtu", mtu, 576, 9216) } : {}),
    ...(dscp ? { dscp: V.integer("dscp", dscp, 0, 63) } : {}),
    ...listed("routes", strs(f, "route")?.map((r) => V.route("route", r))),
    ...(dns ? { dns } : {}),
    ...optional("description", str(f, "description")),
    ...listed("securityGroups", V.list(strs(f, "security-group"))),
  };
}

function ipGroupBody(name: string, f: FlagValues): unknown {
  const size = str(f, "size");
  const addresses = V.list(strs(f, "addresses"));
  if (!size && addresses.length === 0) {
    throw new UsageError("create ipgroup needs --size N or --addresses IP,IP,...");
  }
  if (size && addresses.length) {
    throw new UsageError("create ipgroup takes --size or --addresses, not both");
  }
  return {
    name,
    network: str(f, "network"),
    ...(size ? { size: V.integer("size", size, 1, 512) } : { addresses }),
  };
}

const servicePortText = (p: Obj) =>
  `${p.protocol.toLowerCase()}:${p.port}${p.targetPort === p.port ? "" : `:${p.targetPort}`}`;

const portText = (p: Obj) =>
  p.remote
    ? [p.remote.protocol, p.remote.ip, p.remote.session ?? p.remote.vni].filter((x) =>
      x !== undefined
    ).join(":")
    : `${p.network}/${p.id}`;

function portQuery(f: FlagValues, tenant?: string): string {
  const q = new URLSearchParams();
  if (tenant) q.set("tenant", tenant);
  const node = str(f, "node");
  const pod = str(f, "pod");
  if (node) q.set("node", node);
  if (pod) q.set("pod", pod);
  const text = q.toString();
  return text ? `?${text}` : "";
}

function optional(key: string, value: string | undefined): Record<string, string> {
  return value === undefined ? {} : { [key]: value };
}

function listed<T>(key: string, values: T[] | undefined): Record<string, T[]> {
  return values && values.length ? { [key]: values } : {};
}

/** `--advertise=true|false`, the only field update changes (absent: update asks for it). */
function advertiseFlag(f: FlagValues): { advertise: boolean } {
  const text = str(f, "advertise");
  if (text === undefined) {
    throw new UsageError("update needs --advertise=true or --advertise=false");
  }
  return { advertise: V.boolean("advertise", text) };
}

/** A network's advertise: true, false, or "router/NAME" when its router advertises it. */
function advertiseText(o: Obj): string {
  return o.advertisedBy ? `router/${o.advertisedBy}` : String(o.advertise === true);
}

/** "5m", "3h", "2d": how long ago, as kubectl shows ages. */
export function ago(iso: string | undefined, now = Date.now()): string {
  if (!iso) return "";
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (Number.isNaN(s)) return "";
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** A delegate as `--delegate` takes it: "macvlan:eth1:bridge"; "" for none. */
function delegateText(d: Record<string, string> | undefined): string {
  if (!d) return "";
  const { plugin, mode, ...where } = d;
  return [plugin, ...Object.values(where), ...(mode ? [mode] : [])].join(":");
}
