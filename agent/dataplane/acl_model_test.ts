import assert from "node:assert/strict";
import type { Port, SecurityGroup } from "@knitter/common";
import { aclsOf, effectiveGroups, type GroupSource } from "./acl_model.ts";
import { portKey } from "./port_key.ts";

function port(id: string, ip: string, more: Partial<Port> = {}): Port {
  return {
    id,
    tenant: "acme",
    network: "blue",
    networkTenant: "acme",
    networkId: "n1",
    type: "vxlan",
    ip,
    address: `${ip}/24`,
    family: 4,
    mac: "02:00:00:00:00:01",
    mtu: 1450,
    routes: [],
    dns: {},
    createdAt: "",
    ...more,
  };
}

function group(name: string, rules: SecurityGroup["rules"], tenant = "acme"): SecurityGroup {
  return { name, tenant, rules, createdAt: "", updatedAt: "" };
}

function source(ports: Port[], groups: SecurityGroup[]): GroupSource {
  return {
    securityGroup: (t, n) => groups.find((g) => g.tenant === t && g.name === n),
    ports: () => ports,
    port: (ref) => ports.find((p) => portKey(p) === portKey(ref)),
  };
}

Deno.test("acl model: a port's own groups win over its network's; a public network's defaults are not another tenant's", () => {
  assert.deepEqual(effectiveGroups(port("a", "10.0.0.2")), []);
  assert.deepEqual(
    effectiveGroups(port("a", "10.0.0.2", { networkSecurityGroups: ["d"] })),
    ["d"],
  );
  assert.deepEqual(
    effectiveGroups(port("a", "10.0.0.2", { securityGroups: ["s"], networkSecurityGroups: ["d"] })),
    ["s"],
  );
  const foreign = port("a", "10.0.0.2", { networkTenant: "admin", networkSecurityGroups: ["d"] });
  assert.deepEqual(effectiveGroups(foreign), []);
});

Deno.test("acl model: group peers become their members' addresses, of the same tenant only; unknown groups allow nothing", () => {
  const web = port("web", "10.0.0.2", { securityGroups: ["web"] });
  const db = port("db", "10.0.0.3", { securityGroups: ["db"] });
  const other = port("x", "10.0.0.9", { tenant: "globex", securityGroups: ["web"] });
  const lost = port("lost", "10.0.0.4", { securityGroups: ["gone"] });
  const view = source([web, db, other, lost], [
    group("web", [{ direction: "ingress", protocol: "tcp", ports: "80", peer: { group: "web" } }]),
    group("db", [
      { direction: "ingress", protocol: "tcp", ports: "5432-5433", peer: { group: "web" } },
      { direction: "egress", protocol: "any", peer: { network: "blue", cidr: "10.0.0.0/24" } },
      { direction: "egress", protocol: "udp", peer: { group: "empty" } },
    ]),
  ]);
  const acls = aclsOf([{ port: web, cookie: 1 }, { port: db, cookie: 2 }, {
    port: lost,
    cookie: 3,
  }, { port: port("plain", "10.0.0.5"), cookie: 4 }], view);
  assert.deepEqual(acls, [
    {
      cookie: 1,
      rules: [{
        direction: "ingress",
        protocol: "tcp",
        portMin: 80,
        portMax: 80,
        remote: ["10.0.0.2"],
      }],
    },
    {
      cookie: 2,
      rules: [
        {
          direction: "ingress",
          protocol: "tcp",
          portMin: 5432,
          portMax: 5433,
          remote: ["10.0.0.2"],
        },
        { direction: "egress", protocol: "any", remote: ["10.0.0.0/24"] },
        { direction: "egress", protocol: "udp", remote: [] },
      ],
    },
    { cookie: 3, rules: [] },
  ]);
});

Deno.test("acl model: a local port's groups come from the feed's view when it has one (changed through the API)", () => {
  const journal = port("a", "10.0.0.2");
  const now = port("a", "10.0.0.2", { securityGroups: ["web"] });
  const acls = aclsOf([{ port: journal, cookie: 7 }], source([now], [group("web", [])]));
  assert.deepEqual(acls, [{ cookie: 7, rules: [] }]);
  assert.deepEqual(aclsOf([{ port: journal, cookie: 7 }], source([], [])), []);
});

Deno.test("acl model: on a public network another tenant's port of the same ID does not hide a group member", () => {
  // acme's "web" and globex's "web" on acme's public network: two ports (IDs are per tenant).
  const web = port("web", "10.0.0.2", { securityGroups: ["web"] });
  const theirs = port("web", "10.0.0.9", { tenant: "globex", securityGroups: ["web"] });
  const db = port("db", "10.0.0.3", { securityGroups: ["db"] });
  const view = source([web, theirs, db], [
    group("db", [{ direction: "ingress", protocol: "tcp", ports: "5432", peer: { group: "web" } }]),
  ]);
  assert.deepEqual(aclsOf([{ port: db, cookie: 2 }], view), [{
    cookie: 2,
    rules: [{
      direction: "ingress",
      protocol: "tcp",
      portMin: 5432,
      portMax: 5432,
      remote: ["10.0.0.2"],
    }],
  }]);
});
