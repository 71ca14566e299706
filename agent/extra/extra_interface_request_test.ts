import assert from "node:assert/strict";
import { MALFORMED_CIDRS, MALFORMED_IPS, MALFORMED_MACS } from "../../common/address_cases.ts";
import { AttachSchema, DetachSchema, firstIssue } from "./extra_interface_request.ts";

function issue(body: unknown): string {
  const r = AttachSchema.safeParse(body);
  assert.ok(!r.success, `accepted ${JSON.stringify(body)}`);
  return firstIssue(r.error);
}

Deno.test("AttachSchema: a network or a bridge request passes, routes default to none", () => {
  const net = AttachSchema.parse({ netns: "x", ifName: "eth1", network: "blue", ip: "10.1.0.9" });
  assert.deepEqual(net.routes, []);
  AttachSchema.parse({
    pid: 7,
    ifName: "d0",
    bridge: "br-data",
    vlan: 120,
    ip: "192.168.5.2/24",
    routes: [{ dst: "10.9.0.0/16", via: "192.168.5.1" }, { dst: "10.8.0.0/24" }],
  });
});

Deno.test("AttachSchema: bad requests name the field and what is wrong", () => {
  assert.match(issue({ ifName: "e", network: "n" }), /^netns: name the netns with exactly one of/);
  assert.match(issue({ netns: "x", pid: 1, ifName: "e", network: "n" }), /exactly one of/);
  assert.match(issue({ netns: "x", ifName: "e" }), /^network: give exactly one of network/);
  assert.match(
    issue({ netns: "x", ifName: "e", network: "n", vlan: 3 }),
    /^vlan: vlan goes with bridge/,
  );
  assert.match(
    issue({ netns: "x", ifName: "e", bridge: "b", ip: "1.2.3.4" }),
    /^ip: must be an address with prefix/,
  );
  assert.match(
    issue({ netns: "x", ifName: "much-too-long-name", bridge: "b" }),
    /^ifName: must be a Linux/,
  );
  assert.match(
    issue({ netns: "a b", ifName: "e", bridge: "b" }),
    /^netns: must be a netns name or path/,
  );
  assert.match(
    issue({ netns: "x", ifName: "e", bridge: "b", routes: [{ dst: "10.0.0.0/8; reboot" }] }),
    /^routes\.0\.dst: must be a CIDR/,
  );
  assert.match(issue({ netns: "x", ifName: "e", bridge: "b", extra: 1 }), /extra/);
});

Deno.test("DetachSchema: one target and an interface name", () => {
  DetachSchema.parse({ pod: "acme/web", ifName: "eth1" });
  assert.ok(!DetachSchema.safeParse({ ifName: "eth1" }).success);
});

Deno.test("AttachSchema: malformed addresses, CIDRs and MACs (the shared attack table, ':::' first) are refused, naming the field", () => {
  const net = { netns: "x", ifName: "eth1", network: "blue" };
  const bridge = { netns: "x", ifName: "d0", bridge: "br-data" };
  const prefixed = MALFORMED_CIDRS.filter((c) => c.includes("/"));
  for (const bad of MALFORMED_IPS) {
    assert.match(issue({ ...net, ip: bad }), /^ip: /, bad);
    assert.match(issue({ ...bridge, ip: `${bad}/24` }), /^ip: /, bad);
    assert.match(
      issue({ ...net, routes: [{ dst: "10.9.0.0/16", via: bad }] }),
      /^routes\.0\.via: /,
    );
  }
  for (const bad of MALFORMED_CIDRS) {
    assert.match(issue({ ...bridge, ip: bad }), /^ip: /, bad);
    assert.match(issue({ ...net, routes: [{ dst: bad }] }), /^routes\.0\.dst: /, bad);
  }
  for (const bad of prefixed) assert.match(issue({ ...net, ip: bad }), /^ip: /, bad);
  for (const bad of MALFORMED_MACS) assert.match(issue({ ...net, mac: bad }), /^mac: /, bad);
});
