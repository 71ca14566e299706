/**
 * A network's IPv6 router advertisements at the manager: set at creation, they reach its ports as
 * `networkRouterAdvertisements` (what the agents compile); a network without an IPv6 gateway, or
 * SLAAC on a prefix other than /64, is refused saying why and what to do.
 */
import assert from "node:assert/strict";
import { must, mustFail, net, testApp } from "./test_support.ts";

Deno.test("router advertisements: set at creation, on the network and its ports, defaults filled in", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const six = net("six", "fd00:5::/64", {
    gateway: "fd00:5::1",
    ipv6RouterAdvertisements: { otherConfig: true },
  });
  const created = must(await t.call("POST", "tenants/acme/networks", six), 201);
  const ra = { slaac: true, managed: false, otherConfig: true };
  assert.deepEqual(created.ipv6RouterAdvertisements, ra);
  const port = must(await t.call("PUT", "tenants/acme/networks/six/ports/p1", {}), 201);
  assert.deepEqual(port.networkRouterAdvertisements, ra);
  // Dual stack: the IPv6 subnet is cidr6, its gateway gateway6.
  const dual = net("dual", "10.5.0.0/24", {
    gateway: "10.5.0.1",
    cidr6: "fd00:6::/64",
    gateway6: "fd00:6::1",
    ipv6RouterAdvertisements: {},
  });
  must(await t.call("POST", "tenants/acme/networks", dual), 201);
  const plain = must(await t.call("POST", "tenants/acme/networks", net("v", "fd00:7::/64")), 201);
  assert.equal(plain.ipv6RouterAdvertisements, undefined, "none unless asked for");
});

Deno.test("router advertisements: no IPv6 gateway, or SLAAC off a /64, is refused saying why", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const cases: [Record<string, unknown>, RegExp][] = [
    [
      net("a", "10.1.0.0/24", { gateway: "10.1.0.1", ipv6RouterAdvertisements: {} }),
      /IPv6 gateway/,
    ],
    [net("b", "fd00:1::/64", { ipv6RouterAdvertisements: {} }), /IPv6 gateway/],
    [
      net("c", "fd00:2::/80", { gateway: "fd00:2::1", ipv6RouterAdvertisements: {} }),
      /\/64 prefix.*use a \/64, or set slaac to false/,
    ],
    [
      net("d", "fd00:3::/64", { gateway: "fd00:3::1", ipv6RouterAdvertisements: { slac: true } }),
      /slac/,
    ],
  ];
  for (const [body, message] of cases) {
    mustFail(await t.call("POST", "tenants/acme/networks", body), 400, "invalid_request", {
      message,
    });
  }
  // Without SLAAC any prefix goes: the flags only.
  const managed = net("e", "fd00:4::/80", {
    gateway: "fd00:4::1",
    ipv6RouterAdvertisements: { slaac: false, managed: true },
  });
  must(await t.call("POST", "tenants/acme/networks", managed), 201);
});
