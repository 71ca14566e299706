/**
 * The Network, IPGroup and Router CRDs: names and columns as agreed, schemas structural, validation the
 * same as the manager's (so kubectl refuses what the manager would), and sample resources
 * accepted or refused the way the API server would: OpenAPI checks with ajv, rules with CEL.
 */
import assert from "node:assert/strict";
import { Ajv, type ValidateFunction } from "ajv";
import { evaluate } from "@marcbachmann/cel-js";
import { z } from "zod";
import { IpGroupCreate, NetworkCreate, RouterCreate } from "../manager/schemas.ts";
import { findObject, loadManifests, parseManifestFile } from "./manifests.ts";

// deno-lint-ignore no-explicit-any
type Obj = any;

const manifests = loadManifests();
const networkCrd = findObject(manifests, "CustomResourceDefinition", "networks.knitter.io").object;
const ipGroupCrd = findObject(manifests, "CustomResourceDefinition", "ipgroups.knitter.io").object;
const routerCrd = findObject(manifests, "CustomResourceDefinition", "routers.knitter.io").object;
const mirrorCrd = findObject(manifests, "CustomResourceDefinition", "mirrors.knitter.io").object;

function schemaOf(crd: Obj): Obj {
  assert.equal(crd.spec.versions.length, 1);
  return crd.spec.versions[0].schema.openAPIV3Schema;
}

/** Keywords the API server knows beyond JSON Schema; ajv must not call them typos. */
const KUBERNETES_KEYWORDS = [
  "x-kubernetes-validations",
  "x-kubernetes-list-type",
  "x-kubernetes-list-map-keys",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-int-or-string",
  "x-kubernetes-embedded-resource",
  "x-kubernetes-map-type",
];

function compile(crd: Obj): ValidateFunction {
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strictTypes: false });
  ajv.addVocabulary(KUBERNETES_KEYWORDS);
  ajv.addFormat("int64", { type: "number", validate: Number.isSafeInteger });
  ajv.addFormat("date-time", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i);
  return ajv.compile(schemaOf(crd));
}

/** CEL sees integers as int, not double: what the API server hands a rule. */
function celValue(value: unknown): unknown {
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  if (Array.isArray(value)) return value.map(celValue);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, celValue(v)]));
  }
  return value;
}

/** Every x-kubernetes-validations rule evaluated where it stands, for values that are there. */
function celErrors(schema: Obj, value: unknown, path: string): string[] {
  if (value === undefined || value === null) return [];
  const errors: string[] = [];
  for (const { rule, message } of schema["x-kubernetes-validations"] ?? []) {
    if (evaluate(rule, { self: celValue(value) }) !== true) errors.push(`${path}: ${message}`);
  }
  for (const [name, sub] of Object.entries(schema.properties ?? {})) {
    errors.push(...celErrors(sub, (value as Obj)[name], `${path}.${name}`));
  }
  if (schema.items && Array.isArray(value)) {
    value.forEach((v, i) => errors.push(...celErrors(schema.items, v, `${path}[${i}]`)));
  }
  return errors;
}

/** What the API server would say about a resource: nothing when it is accepted. */
function problems(crd: Obj, resource: Obj): string[] {
  const validate = compile(crd);
  const copy = structuredClone(resource);
  if (!validate(copy)) return validate.errors!.map((e) => `${e.instancePath} ${e.message}`);
  return celErrors(schemaOf(crd), copy, "");
}

function network(spec: Obj, status?: Obj): Obj {
  return {
    apiVersion: "knitter.io/v1alpha1",
    kind: "Network",
    metadata: { name: "blue", namespace: "acme" },
    spec,
    ...(status ? { status } : {}),
  };
}

function ipGroup(spec: Obj, status?: Obj): Obj {
  return {
    apiVersion: "knitter.io/v1alpha1",
    kind: "IPGroup",
    metadata: { name: "db", namespace: "acme" },
    spec,
    ...(status ? { status } : {}),
  };
}

const READY = {
  type: "Ready",
  status: "True",
  reason: "Created",
  message: "network acme/blue exists at the manager",
  lastTransitionTime: "2025-01-02T03:04:05Z",
  observedGeneration: 1,
};

Deno.test("the CRDs have the agreed group, names, scope and printer columns", () => {
  for (const crd of [networkCrd, ipGroupCrd, routerCrd, mirrorCrd]) {
    assert.equal(crd.spec.group, "knitter.io");
    assert.equal(crd.spec.scope, "Namespaced");
    const [version] = crd.spec.versions;
    assert.equal(version.name, "v1alpha1");
    assert.ok(version.served && version.storage);
    assert.deepEqual(version.subresources, { status: {} });
  }
  assert.deepEqual(networkCrd.spec.names, {
    kind: "Network",
    listKind: "NetworkList",
    plural: "networks",
    singular: "network",
    shortNames: ["knet"],
    categories: ["knitter"],
  });
  assert.equal(ipGroupCrd.spec.names.plural, "ipgroups");
  assert.equal(ipGroupCrd.spec.names.singular, "ipgroup");
  assert.deepEqual(ipGroupCrd.spec.names.shortNames, ["ipg"]);
  assert.deepEqual(routerCrd.spec.names, {
    kind: "Router",
    listKind: "RouterList",
    plural: "routers",
    singular: "router",
    shortNames: ["krt"],
    categories: ["knitter"],
  });
  const columns = (crd: Obj) =>
    crd.spec.versions[0].additionalPrinterColumns.map((c: Obj) => `${c.name}=${c.jsonPath}`);
  const ready = '.status.conditions[?(@.type=="Ready")].status';
  assert.deepEqual(columns(networkCrd), [
    "Type=.spec.type",
    "CIDR=.spec.cidr",
    "Segment=.status.segmentId",
    "Used=.status.usage.used",
    "Free=.status.usage.free",
    `Ready=${ready}`,
    "Age=.metadata.creationTimestamp",
  ]);
  assert.deepEqual(columns(ipGroupCrd), [
    "Network=.spec.network",
    "Size=.status.size",
    "Used=.status.used",
    `Ready=${ready}`,
    "Age=.metadata.creationTimestamp",
  ]);
  assert.deepEqual(columns(routerCrd), [
    "Networks=.spec.networks",
    `Ready=${ready}`,
    "Age=.metadata.creationTimestamp",
  ]);
});

/** The API server's structural-schema rules that a hand-written schema can break. */
function structuralProblems(schema: Obj, path: string): string[] {
  const found: string[] = [];
  if (!schema.type && !schema["x-kubernetes-int-or-string"]) found.push(`${path} has no type`);
  if (schema.properties && schema.type !== "object") found.push(`${path} has properties`);
  if (schema.properties && schema.additionalProperties !== undefined) {
    found.push(`${path} has both properties and additionalProperties`);
  }
  if (schema.type === "array" && !schema.items) found.push(`${path} is an array without items`);
  for (const [name, sub] of Object.entries(schema.properties ?? {})) {
    found.push(...structuralProblems(sub, `${path}.${name}`));
  }
  if (schema.items) found.push(...structuralProblems(schema.items, `${path}[]`));
  return found;
}

Deno.test("the CRD schemas are structural", () => {
  for (const crd of [networkCrd, ipGroupCrd, routerCrd, mirrorCrd]) {
    assert.deepEqual(structuralProblems(schemaOf(crd), crd.metadata.name), []);
  }
  assert.deepEqual(structuralProblems({ type: "object", properties: { a: {} } }, "x"), [
    "x.a has no type",
  ]);
});

const CHECKED = [
  "type",
  "enum",
  "default",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "pattern",
  "required",
];

/** Where a CRD schema and the manager's JSON Schema disagree on what is valid. */
function differences(crd: Obj, api: Obj, path: string): string[] {
  const found: string[] = [];
  for (const key of CHECKED) {
    if (JSON.stringify(crd[key]) !== JSON.stringify(api[key])) {
      found.push(
        `${path} ${key}: CRD ${JSON.stringify(crd[key])}, API ${JSON.stringify(api[key])}`,
      );
    }
  }
  const names = new Set([
    ...Object.keys(crd.properties ?? {}),
    ...Object.keys(api.properties ?? {}),
  ]);
  for (const name of names) {
    const [c, a] = [crd.properties?.[name], api.properties?.[name]];
    if (!c || !a) found.push(`${path}.${name} only in the ${c ? "CRD" : "API"}`);
    else found.push(...differences(c, a, `${path}.${name}`));
  }
  if (crd.items || api.items) {
    found.push(...differences(crd.items ?? {}, api.items ?? {}, `${path}[]`));
  }
  return found;
}

/** The manager's create body as JSON Schema, less `name` (the resource's metadata.name). */
function apiSpec(schema: z.ZodType): Obj {
  const json: Obj = z.toJSONSchema(schema, { io: "input" });
  // The name is the resource's; the labels are the monitor's (its ownership mark), not the spec's.
  delete json.properties.name;
  delete json.properties.labels;
  // Security groups have no resource of their own yet (MultiNetworkPolicy is to be the Kubernetes
  // way): a network's default groups are set through the API only, so the spec does not take them.
  delete json.properties.securityGroups;
  // Advertising to the fabric is the admin's alone (manager/service/advertise.ts refuses a cluster's
  // monitor too: the fabric is wider than one cluster), so no Network resource can ask for it.
  delete json.properties.advertise;
  // A delegate is a union of per-plugin shapes in the API; the CRD holds them flattened into one
  // object (RE2 has no look-ahead for the API's name pattern, and a CRD takes no oneOf of
  // objects). Compared apart: see delegateFields below; the manager refuses what the CRD lets by.
  delete json.properties.delegate;
  json.required = json.required.filter((r: string) => r !== "name");
  return json;
}

/** The Network CRD's spec, less its delegate (compared apart, as apiSpec leaves it out). */
function networkSpec(): Obj {
  const spec = structuredClone(schemaOf(networkCrd).properties.spec);
  delete spec.properties.delegate;
  return spec;
}

/** Each delegate variant's fields with their types, as `plugin: field type`. */
function delegateFields(delegate: Obj): string[] {
  const variants: Obj[] = delegate.oneOf ?? [delegate];
  return variants.flatMap((v) =>
    Object.entries(v.properties as Record<string, Obj>)
      .filter(([name]) => name !== "plugin")
      .map(([name, f]) => `${name} ${f.type}`)
  ).filter((f, i, all) => all.indexOf(f) === i).sort();
}

Deno.test("the specs validate exactly as the manager's NetworkCreate and IpGroupCreate", () => {
  assert.deepEqual(differences(networkSpec(), apiSpec(NetworkCreate), "spec"), []);
  assert.deepEqual(
    differences(schemaOf(ipGroupCrd).properties.spec, apiSpec(IpGroupCreate), "spec"),
    [],
  );
  assert.deepEqual(
    differences(schemaOf(routerCrd).properties.spec, apiSpec(RouterCreate), "spec"),
    [],
  );
  // The delegate: the CRD's flattened object has every field of every plugin's shape, and its
  // plugin and mode lists are the union of the API's.
  const crdDelegate = schemaOf(networkCrd).properties.spec.properties.delegate;
  const apiDelegate = z.toJSONSchema(NetworkCreate, { io: "input" }).properties!.delegate as Obj;
  assert.deepEqual(delegateFields(crdDelegate), delegateFields(apiDelegate));
  const union = (key: string) =>
    [
      ...new Set(
        (apiDelegate.oneOf as Obj[]).flatMap((v) => {
          const f = v.properties[key];
          return f ? (f.const !== undefined ? [f.const] : f.enum ?? []) : [];
        }),
      ),
    ].sort();
  assert.deepEqual([...crdDelegate.properties.plugin.enum].sort(), union("plugin"));
  assert.deepEqual([...crdDelegate.properties.mode.enum].sort(), union("mode"));
  // The comparison is real: a bound off by one is found.
  const changed = networkSpec();
  changed.properties.mtu.maximum = 9000;
  assert.deepEqual(differences(changed, apiSpec(NetworkCreate), "spec"), [
    "spec.mtu maximum: CRD 9000, API 9216",
  ]);
});

Deno.test("Network: good resources are accepted, with the manager's defaults", () => {
  const minimal = network({ cidr: "10.1.0.0/24" });
  assert.deepEqual(problems(networkCrd, minimal), []);
  const validate = compile(networkCrd);
  validate(minimal);
  assert.equal(minimal.spec.type, "vxlan");
  assert.equal(minimal.spec.public, false);
  const full = network({
    type: "vlan",
    cidr: "192.0.2.0/24",
    gateway: "192.0.2.1",
    allocationPools: [{ start: "192.0.2.10", end: "192.0.2.200" }],
    excludes: ["192.0.2.50", "192.0.2.60-192.0.2.70"],
    public: true,
    physnet: "phys1",
    segmentId: 100,
    mtu: 1500,
    routes: [{ dst: "198.51.100.0/24", via: "192.0.2.1" }, { dst: "203.0.113.0/24" }],
    dns: { nameservers: ["192.0.2.53"], domain: "acme.example", search: ["acme.example"] },
    description: "the data plane",
  }, {
    networkId: "n-1",
    segmentId: 100,
    usage: { total: 191, used: 3, free: 188 },
    heldAddresses: [{
      address: "192.0.2.12",
      port: "stable:acme:db-0-eth1",
      pod: "acme/db-0",
      interface: "eth1",
      since: "2026-11-25T10:00:00.000Z",
      until: "2026-11-25T11:00:00.000Z",
      reason: "StatefulSet pod acme/db-0 was deleted; its address 192.0.2.12 (eth1) is kept ...",
    }],
    observedGeneration: 1,
    conditions: [READY],
  });
  assert.deepEqual(problems(networkCrd, full), []);
  assert.deepEqual(
    problems(networkCrd, network({ type: "flat", cidr: "10.2.0.0/24", physnet: "phys1" })),
    [],
  );
});

Deno.test("Network: bad resources are refused, saying why", () => {
  const cases: [Obj, RegExp][] = [
    [{}, /must have required property 'cidr'/],
    [
      { cidr: "10.1.0.0/24", type: "gre" },
      /\/spec\/type must be equal to one of the allowed values/,
    ],
    [{ cidr: "10.1.0.0/24", segmentId: 0 }, /\/spec\/segmentId must be >= 1/],
    [{ cidr: "10.1.0.0/24", segmentId: 16777216 }, /\/spec\/segmentId must be <= 16777215/],
    [{ cidr: "10.1.0.0/24", mtu: 100 }, /\/spec\/mtu must be >= 576/],
    [{ cidr: "10.1.0.0/24", mtu: 1500.5 }, /\/spec\/mtu must be integer/],
    [{ cidr: "" }, /\/spec\/cidr must NOT have fewer than 1 characters/],
    [
      { cidr: "10.1.0.0/24", type: "vlan", physnet: "Phys_1" },
      /\/spec\/physnet must match pattern/,
    ],
    [
      { cidr: "10.1.0.0/24", routes: [{ via: "10.1.0.1" }] },
      /routes\/0 must have required property 'dst'/,
    ],
    [{ cidr: "10.1.0.0/24", type: "vlan" }, /a vlan or flat network needs the physnet/],
    [
      { cidr: "10.1.0.0/24", physnet: "phys1" },
      /a vxlan network is an overlay and takes no physnet/,
    ],
    [{ cidr: "10.1.0.0/24", type: "flat", physnet: "p", segmentId: 7 }, /flat network is untagged/],
    [
      { cidr: "10.1.0.0/24", type: "vlan", physnet: "p", segmentId: 5000 },
      /VLAN ID must lie within/,
    ],
    [{ cidr: "10.1.0.0/24", dataPlane: "sriov" }, /\/spec\/dataPlane must be equal to one/],
    [{ cidr: "10.1.0.0/24", dataPlane: "external", dscp: 46 }, /never passes Knitter's flows/],
    [{ cidr: "10.1.0.0/24", dataPlane: "external", egress: true }, /never passes Knitter's flows/],
  ];
  for (const [spec, expected] of cases) {
    assert.match(problems(networkCrd, network(spec)).join("; "), expected, JSON.stringify(spec));
  }
  const badStatus = network({ cidr: "10.1.0.0/24" }, {
    conditions: [{ ...READY, status: "Maybe" }],
  });
  assert.match(
    problems(networkCrd, badStatus).join(),
    /conditions\/0\/status must be equal to one/,
  );
});

Deno.test("IPGroup: a size or an address list is accepted, both or neither is refused", () => {
  const status = {
    addresses: [{ ip: "10.1.0.5", port: "stable:web-0-eth0" }, { ip: "10.1.0.6" }],
    size: 2,
    used: 1,
    observedGeneration: 2,
    conditions: [READY],
  };
  assert.deepEqual(problems(ipGroupCrd, ipGroup({ network: "blue", size: 4 }, status)), []);
  assert.deepEqual(problems(ipGroupCrd, ipGroup({ network: "blue", addresses: ["10.1.0.5"] })), []);
  const cases: [Obj, RegExp][] = [
    [{ network: "blue" }, /set either addresses .* or size/],
    [{ network: "blue", size: 2, addresses: ["10.1.0.5"] }, /set either addresses .* or size/],
    [{ size: 2 }, /must have required property 'network'/],
    [{ network: "blue", size: 0 }, /\/spec\/size must be >= 1/],
    [{ network: "blue", size: 513 }, /\/spec\/size must be <= 512/],
    [{ network: "blue", addresses: [] }, /\/spec\/addresses must NOT have fewer than 1 items/],
    [{ network: "Blue", size: 1 }, /\/spec\/network must match pattern/],
  ];
  for (const [spec, expected] of cases) {
    assert.match(problems(ipGroupCrd, ipGroup(spec)).join("; "), expected, JSON.stringify(spec));
  }
});

Deno.test("the shipped default network (default-network/network.yaml, and the monitor's defaultNetwork) is a valid Network", () => {
  const dir = new URL("./default-network", import.meta.url).pathname;
  const [net] = parseManifestFile("network.yaml", dir);
  assert.deepEqual(
    problems(networkCrd, {
      ...net.object,
      metadata: { ...net.object.metadata, namespace: "knitter-system" },
    }),
    [],
  );
  // The monitor makes it from its config: that spec passes the resource's validation too.
  const monitorJson = JSON.parse(
    Deno.readTextFileSync(new URL("./monitor/monitor.json", import.meta.url).pathname),
  );
  const def = monitorJson.defaultNetwork;
  assert.deepEqual(
    problems(networkCrd, {
      apiVersion: "knitter.io/v1alpha1",
      kind: "Network",
      metadata: { name: def.name, namespace: def.namespace },
      spec: def.spec,
    }),
    [],
  );
});

function mirror(spec: Obj): Obj {
  return {
    apiVersion: "knitter.io/v1alpha1",
    kind: "Mirror",
    metadata: { name: "tap-web", namespace: "acme" },
    spec,
  };
}

Deno.test("Mirror: pods of the namespace or ports by ID are accepted; an endpoint naming both, neither, or a namespace is refused", () => {
  assert.deepEqual(mirrorCrd.spec.names.shortNames, ["kmir"]);
  const good = mirror({
    sources: [{ pod: "web-0", interface: "net1" }, {
      network: "blue",
      port: "stable:acme:db-0-net1",
    }],
    collector: { pod: "tap", network: "blue" },
  });
  assert.deepEqual(problems(mirrorCrd, good), []);
  const defaulted = structuredClone(good);
  compile(mirrorCrd)(defaulted);
  assert.equal(defaulted.spec.direction, "both");
  const remote = { remote: { ip: "192.0.2.250", protocol: "gre" } };
  for (
    const collector of [
      remote,
      { remote: { ip: "192.0.2.250", protocol: "erspan" } },
      { remote: { ip: "192.0.2.250", protocol: "erspan", session: 7 } },
      { remote: { ip: "192.0.2.250", protocol: "vxlan", vni: 5001 } },
    ]
  ) {
    assert.deepEqual(problems(mirrorCrd, mirror({ sources: [{ pod: "web" }], collector })), []);
  }
  const far = (r: Obj) => ({ sources: [{ pod: "web" }], collector: { remote: r } });
  const refused: [Obj, RegExp][] = [
    [{ sources: [], collector: { pod: "tap" } }, /must NOT have fewer than 1 items/],
    [{ sources: [{ pod: "globex/secret" }], collector: { pod: "tap" } }, /must match pattern/],
    [{ sources: [{ pod: "web", port: "p1" }], collector: { pod: "tap" } }, /not both/],
    [{ sources: [{ port: "p1" }], collector: { pod: "tap" } }, /with its network/],
    [{ sources: [{ pod: "web" }], collector: {} }, /name one of a pod/],
    [{ sources: [{ pod: "web" }], collector: { pod: "tap", ...remote } }, /name one of a pod/],
    [{ sources: [{ pod: "web" }], collector: { ...remote, network: "blue" } }, /no network/],
    [far({ ip: "192.0.2.1", protocol: "geneve" }), /must be equal to one of the allowed values/],
    [far({ ip: "192.0.2.1", protocol: "vxlan" }), /a vxlan collector needs its vni/],
    [far({ ip: "192.0.2.1", protocol: "gre", vni: 5 }), /vni is for a vxlan collector only/],
    [far({ ip: "192.0.2.1", protocol: "vxlan", vni: 0 }), /must be >= 1/],
    [far({ ip: "192.0.2.1", protocol: "gre", session: 1 }), /session is for an erspan/],
    [far({ ip: "192.0.2.1", protocol: "erspan", session: 1024 }), /must be <= 1023/],
    [
      { sources: [{ pod: "web" }], direction: "sideways", collector: { pod: "tap" } },
      /allowed values/,
    ],
  ];
  for (const [spec, why] of refused) {
    const found = problems(mirrorCrd, mirror(spec));
    assert.ok(found.some((p) => why.test(p)), `${JSON.stringify(spec)}: ${found.join("; ")}`);
  }
});
