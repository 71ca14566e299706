import assert from "node:assert/strict";
import { parseCommandLine } from "./args.ts";
import { findResource, RESOURCES } from "./resources.ts";

Deno.test("findResource: plural, singular and short names; unknown ones list what there is", () => {
  for (const name of ["networks", "network", "net", "NET"]) {
    assert.equal(findResource(name, "get").plural, "networks");
  }
  assert.equal(findResource("ipg", "get").plural, "ipgroups");
  assert.throws(() => findResource("netwrks", "get"), /Unknown resource "netwrks": use one of/);
  assert.throws(() => findResource(undefined, "get"), /get needs a resource/);
});

Deno.test("create bodies: network flags become the API's fields, absent flags stay absent", () => {
  const net = findResource("network", "create");
  const f = parseCommandLine([
    ...["create", "network", "blue", "--cidr", "10.1.0.0/24", "--pool", "10.1.0.10-10.1.0.20"],
    ...["--exclude", "10.1.0.11,10.1.0.12", "--segment-id", "7", "--dns-server", "10.1.0.2"],
  ]).flags;
  assert.deepEqual(net.create.body("blue", f), {
    name: "blue",
    cidr: "10.1.0.0/24",
    allocationPools: [{ start: "10.1.0.10", end: "10.1.0.20" }],
    excludes: ["10.1.0.11", "10.1.0.12"],
    segmentId: 7,
    dns: { nameservers: ["10.1.0.2"] },
  });
  const dual = parseCommandLine([
    ...["create", "network", "dual", "--cidr", "10.2.0.0/24", "--gateway", "10.2.0.1"],
    ...["--cidr6", "fd00:2::/64", "--gateway6", "fd00:2::1"],
  ]).flags;
  assert.deepEqual(net.create.body("dual", dual), {
    name: "dual",
    cidr: "10.2.0.0/24",
    gateway: "10.2.0.1",
    cidr6: "fd00:2::/64",
    gateway6: "fd00:2::1",
  });
  const reach = parseCommandLine([
    ...["create", "network", "out", "--cidr", "10.3.0.0/24", "--gateway", "10.3.0.1"],
    ...["--egress", "--host-access"],
  ]).flags;
  assert.deepEqual(net.create.body("out", reach), {
    name: "out",
    cidr: "10.3.0.0/24",
    gateway: "10.3.0.1",
    egress: true,
    hostAccess: true,
  });
  const external = parseCommandLine([
    ...["create", "network", "data", "--cidr", "10.4.0.0/24", "--type", "vlan"],
    ...["--physnet", "fabric", "--data-plane", "external"],
  ]).flags;
  assert.deepEqual(net.create.body("data", external), {
    name: "data",
    cidr: "10.4.0.0/24",
    type: "vlan",
    dataPlane: "external",
    physnet: "fabric",
  });
  const group = findResource("ipgroup", "create");
  const both = parseCommandLine([
    "create",
    "ipg",
    "g",
    "--network",
    "n",
    "--size",
    "2",
    "--addresses",
    "a",
  ]);
  assert.throws(() => group.create.body("g", both.flags), /--size or --addresses, not both/);
});

Deno.test("create network --dscp: the DSCP of the pods' traffic, 0..63, as a number", () => {
  const net = findResource("network", "create");
  const body = (dscp: string) =>
    net.create.body(
      "data",
      parseCommandLine(["create", "network", "data", "--cidr", "10.3.0.0/24", "--dscp", dscp])
        .flags,
    );
  assert.deepEqual(body("46"), { name: "data", cidr: "10.3.0.0/24", dscp: 46 });
  assert.deepEqual(body("0"), { name: "data", cidr: "10.3.0.0/24", dscp: 0 });
  assert.throws(() => body("64"), /--dscp "64" is not a whole number from 0 to 63/);
  assert.throws(() => body("EF"), /--dscp "EF"/);
});

Deno.test("paths: tenant-scoped resources live under the tenant, ports under their network", () => {
  const ports = findResource("ports", "get");
  assert.equal(ports.list({ tenant: "acme" }, {}), "/api/v1/ports?tenant=acme");
  assert.equal(
    ports.list({ tenant: "acme", network: "blue" }, { node: "w1" }),
    "/api/v1/tenants/acme/networks/blue/ports?node=w1",
  );
  assert.throws(() => ports.item({ tenant: "acme" }, "p1"), /needs --network NAME/);
  assert.equal(findResource("node", "get").item({ tenant: "x" }, "w1"), "/api/v1/nodes/w1");
  assert.deepEqual(RESOURCES.filter((r) => r.usage).map((r) => r.plural), ["networks", "physnets"]);
});

Deno.test("create router: --networks as a list, --route CIDR,VIA as static routes", () => {
  const router = findResource("rt", "create");
  const f = parseCommandLine([
    ...["create", "router", "planes", "--networks", "red,blue", "--networks", "green"],
    ...["--route", "10.7.0.0/24,10.2.0.9"],
  ]).flags;
  assert.deepEqual(router.create.body("planes", f), {
    name: "planes",
    networks: ["red", "blue", "green"],
    routes: [{ dst: "10.7.0.0/24", via: "10.2.0.9" }],
  });
  const bad = parseCommandLine([
    "create",
    "router",
    "r",
    "--networks",
    "a",
    "--route",
    "10.7.0.0/24",
  ]);
  assert.throws(() => router.create.body("r", bad.flags), /needs CIDR,GW/);
});

Deno.test("create bodies: security group rules from --rule, groups of ports and networks from --security-group", () => {
  const sg = findResource("sg", "create");
  const f = parseCommandLine([
    ...["create", "sg", "web", "--rule", "ingress:tcp:80:group=web"],
    ...["--rule", "egress:udp:53", "--rule", "egress:any::network=blue"],
  ]).flags;
  const body = sg.create.body("web", f) as { rules: unknown[] };
  assert.deepEqual(body.rules, [
    { direction: "ingress", protocol: "tcp", ports: "80", peer: { group: "web" } },
    { direction: "egress", protocol: "udp", ports: "53" },
    { direction: "egress", protocol: "any", peer: { network: "blue" } },
  ]);
  const bad = parseCommandLine(["create", "sg", "x", "--rule", "ingress:tcp:80:host=a"]).flags;
  assert.throws(() => sg.create.body("x", bad), /is not a rule: use DIR:PROTO/);
  const port = findResource("port", "create");
  const pf = parseCommandLine([
    ...["create", "port", "p1", "--network", "blue", "--security-group", "web,db"],
  ]).flags;
  assert.deepEqual(port.create.body("p1", pf), { securityGroups: ["web", "db"] });
});

Deno.test("create network --delegate: each plugin's shape, the VF's PCI address whole; a bad one says the forms", () => {
  const net = findResource("network", "create");
  const body = (d: string) =>
    net.create.body(
      "data",
      parseCommandLine(["create", "network", "data", "--cidr", "10.4.0.0/24", "--delegate", d])
        .flags,
    ) as { delegate: unknown };
  assert.deepEqual(body("macvlan:eth1:bridge").delegate, {
    plugin: "macvlan",
    master: "eth1",
    mode: "bridge",
  });
  assert.deepEqual(body("ipvlan:eth1").delegate, { plugin: "ipvlan", master: "eth1" });
  assert.deepEqual(body("host-device:hd0").delegate, { plugin: "host-device", device: "hd0" });
  assert.deepEqual(body("sriov:0000:03:02.0").delegate, {
    plugin: "sriov",
    deviceID: "0000:03:02.0",
  });
  for (const bad of ["macvlan", "bridge:br0", "host-device:hd0:x", "macvlan:eth1:bridge:x"]) {
    assert.throws(() => body(bad), /--delegate takes macvlan:MASTER\[:MODE\]/);
  }
});

Deno.test("README's create flags table: one row per resource that takes flags, naming each of its flags", async () => {
  const readme = await Deno.readTextFile(new URL("./README.md", import.meta.url));
  const section = readme.slice(readme.indexOf("\n## Create flags\n") + 1);
  const table = section.slice(0, section.indexOf("\n## "));
  const rows = [...table.matchAll(/^\| ([a-z]+) +\| (.*) \|$/gm)]
    .map((m) => ({ kind: m[1], flags: [...m[2].matchAll(/`--([a-z0-9-]+)/g)].map((f) => f[1]) }))
    .filter((r) => r.kind !== "resource");
  const kinds = rows.map((r) => r.kind);
  assert.deepEqual(kinds, [...new Set(kinds)], "no resource has two rows");
  const documented = Object.fromEntries(rows.map((r) => [r.kind, [...new Set(r.flags)].sort()]));
  const taken = Object.fromEntries(
    RESOURCES.filter((r) => r.create.flags.length > 0).map((r) => [
      r.kind,
      [...r.create.flags].sort(),
    ]),
  );
  assert.deepEqual(documented, taken);
});

Deno.test("create service: --ip-families and --ip-family-policy become ipFamilies and ipFamilyPolicy", () => {
  const service = findResource("svc", "create");
  const f = parseCommandLine([
    ...["create", "service", "front", "--network", "dual", "--service-port", "tcp:80"],
    ...["--ip-families", "IPv6,IPv4", "--ip-family-policy", "RequireDualStack"],
  ]).flags;
  assert.deepEqual(service.create.body("front", f), {
    name: "front",
    network: "dual",
    ports: [{ protocol: "TCP", port: 80 }],
    backends: [],
    ipFamilies: ["IPv6", "IPv4"],
    ipFamilyPolicy: "RequireDualStack",
  });
  const plain = parseCommandLine([
    "create",
    "service",
    "s",
    "--network",
    "n",
    "--service-port",
    "80",
  ]);
  const body = service.create.body("s", plain.flags) as Record<string, unknown>;
  assert.equal("ipFamilies" in body || "ipFamilyPolicy" in body, false);
});
