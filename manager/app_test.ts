/** The REST API as a user sees it, through app.request() on an in-memory store. */
import assert from "node:assert/strict";
import { ROUTES } from "./routes.ts";
import { conventionProblems, metricValue } from "@knitter/common/metrics";
import { parseExposition, samplesOf } from "@knitter/common/metrics_text";
import { must, mustFail, net, testApp, TOKEN } from "./test_support.ts";

const BLUE = "tenants/acme/networks/blue";

// ---- tenants

Deno.test("tenants: create, list, get, delete", async () => {
  using t = await testApp();
  const created = must(await t.call("POST", "tenants", { name: "acme" }), 201);
  assert.equal(created.name, "acme");
  assert.equal(created.networks, 0);
  assert.equal(created.ipGroups, 0);
  mustFail(await t.call("POST", "tenants", { name: "acme" }), 409, "already_exists", {
    field: "name",
  });

  const names = must(await t.call("GET", "tenants"), 200).items.map((x: { name: string }) =>
    x.name
  );
  assert.deepEqual(names.sort(), ["acme", "admin"]);
  assert.deepEqual(must(await t.call("GET", "tenants/acme"), 200), created);

  must(await t.call("DELETE", "tenants/acme"), 204);
  mustFail(await t.call("GET", "tenants/acme"), 404, "not_found");
  mustFail(await t.call("DELETE", "tenants/acme"), 404, "not_found");
});

Deno.test("tenants: a duplicate create is refused without counting store conflicts", async () => {
  using t = await testApp({ tenants: ["acme"] });
  mustFail(await t.call("POST", "tenants", { name: "acme" }), 409, "already_exists");
  assert.equal(await metricValue(t.ctx.metrics.conflicts), 0);
});

Deno.test("tenants: delete is refused while the tenant owns networks, naming them", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/acme/networks", net("red", "10.2.0.0/24")), 201);
  assert.equal(must(await t.call("GET", "tenants/acme"), 200).networks, 2);

  mustFail(await t.call("DELETE", "tenants/acme"), 409, "in_use", { message: /"blue".*"red"/ });
  must(await t.call("DELETE", `${BLUE}`), 204);
  mustFail(await t.call("DELETE", "tenants/acme"), 409, "in_use", { message: /"red"/ });
  must(await t.call("DELETE", "tenants/acme/networks/red"), 204);
  must(await t.call("DELETE", "tenants/acme"), 204);
});

// ---- networks

Deno.test("networks: vxlan networks get VNIs from the configured range until it is used up", async () => {
  using t = await testApp({ tenants: ["acme"], vniRanges: ["7000-7001"] });
  const a = must(await t.call("POST", "tenants/acme/networks", net("a", "10.1.0.0/24")), 201);
  const b = must(await t.call("POST", "tenants/acme/networks", net("b", "10.2.0.0/24")), 201);
  assert.equal(a.type, "vxlan");
  assert.deepEqual([a.segmentId, b.segmentId], [7000, 7001]);
  assert.equal(a.mtu, 1450, "vxlan MTU is the underlay's less 50");
  mustFail(
    await t.call("POST", "tenants/acme/networks", net("c", "10.3.0.0/24")),
    409,
    "pool_exhausted",
    { field: "segmentId" },
  );
  // Deleting a network gives its VNI back.
  must(await t.call("DELETE", "tenants/acme/networks/a"), 204);
  const c = must(await t.call("POST", "tenants/acme/networks", net("c", "10.3.0.0/24")), 201);
  assert.equal(c.segmentId, 7000);
});

Deno.test("networks: an explicit segmentId must be free, else 409 naming the holder", async () => {
  using t = await testApp({ tenants: ["acme", "globex"] });
  must(
    await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24", { segmentId: 5500 })),
    201,
  );
  mustFail(
    await t.call(
      "POST",
      "tenants/globex/networks",
      net("green", "10.9.0.0/24", { segmentId: 5500 }),
    ),
    409,
    "address_taken",
    { field: "segmentId", message: /network "blue" of tenant "acme"/ },
  );
  // Automatic allocation skips the explicitly taken VNI's neighbours only as needed.
  const auto = must(
    await t.call("POST", "tenants/globex/networks", net("green", "10.9.0.0/24")),
    201,
  );
  assert.equal(auto.segmentId, 5000);
  // A tenant may not pick a VNI outside the ranges; an admin may.
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("x", "10.5.0.0/24", { segmentId: 10 }),
      TOKEN.acme,
    ),
    403,
    "forbidden",
    { field: "segmentId" },
  );
  const admin = must(
    await t.call("POST", "tenants/acme/networks", net("x", "10.5.0.0/24", { segmentId: 10 })),
    201,
  );
  assert.equal(admin.segmentId, 10);
});

Deno.test("networks: vlan networks get VLAN IDs from their physnet's ranges", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call("POST", "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 101 }] }),
    201,
  );
  const vlan = (name: string, cidr: string, more = {}) =>
    net(name, cidr, { type: "vlan", physnet: "phys1", ...more });
  const a = must(await t.call("POST", "tenants/acme/networks", vlan("a", "10.1.0.0/24")), 201);
  const b = must(await t.call("POST", "tenants/acme/networks", vlan("b", "10.2.0.0/24")), 201);
  assert.deepEqual([a.segmentId, b.segmentId], [100, 101]);
  assert.equal(a.physnet, "phys1");
  assert.equal(a.mtu, 1500);
  mustFail(
    await t.call("POST", "tenants/acme/networks", vlan("c", "10.3.0.0/24")),
    409,
    "pool_exhausted",
  );
  mustFail(
    await t.call("POST", "tenants/acme/networks", vlan("c", "10.3.0.0/24", { segmentId: 101 })),
    409,
    "address_taken",
    { message: /VLAN ID on physnet "phys1" 101 .*network "b"/ },
  );
  const p = must(await t.call("GET", "physnets/phys1"), 200);
  assert.deepEqual(p.usage, { total: 2, used: 2, free: 0 });
  assert.equal(p.networks, 2);
  // vlan and flat networks need an existing physnet.
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("d", "10.4.0.0/24", { type: "vlan", physnet: "nope" }),
    ),
    400,
    "invalid_request",
    { field: "physnet", message: /"nope" does not exist/ },
  );
});

Deno.test("networks: a physnet carries one flat network", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "physnets", { name: "phys1" }), 201);
  must(await t.call("POST", "physnets", { name: "phys2" }), 201);
  const flat = (name: string, cidr: string, physnet = "phys1") =>
    net(name, cidr, { type: "flat", physnet });
  const a = must(await t.call("POST", "tenants/acme/networks", flat("a", "10.1.0.0/24")), 201);
  assert.equal(a.segmentId, undefined);
  mustFail(
    await t.call("POST", "tenants/acme/networks", flat("b", "10.2.0.0/24")),
    409,
    "already_exists",
    { field: "physnet", message: /acme\/a/ },
  );
  must(await t.call("POST", "tenants/acme/networks", flat("b", "10.2.0.0/24", "phys2")), 201);
  // Once the flat network is gone the physnet's untagged segment is free again.
  must(await t.call("DELETE", "tenants/acme/networks/a"), 204);
  must(await t.call("POST", "tenants/acme/networks", flat("c", "10.3.0.0/24")), 201);
});

Deno.test("networks: GET shows usage; list shows own and public networks", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const blue = must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" }),
    ),
    201,
  );
  assert.deepEqual(blue.usage, { total: 253, used: 0, free: 253 });
  must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  must(await t.call("PUT", `${BLUE}/ports/p2`, {}), 201);
  const got = must(await t.call("GET", BLUE), 200);
  assert.deepEqual(got.usage, { total: 253, used: 2, free: 251 });
  assert.equal(got.id, blue.id);
  assert.equal(got.poolSize, undefined, "internal fields stay inside");

  must(
    await t.call(
      "POST",
      "tenants/admin/networks",
      net("shared", "10.200.0.0/24", { public: true }),
    ),
    201,
  );
  const listed = must(await t.call("GET", "tenants/acme/networks"), 200).items;
  assert.deepEqual(listed.map((n: { name: string }) => n.name).sort(), ["blue", "shared"]);
  assert.deepEqual(listed.find((n: { name: string }) => n.name === "blue").usage.used, 2);
});

Deno.test("networks: delete is refused while ports or IP groups hold addresses", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  mustFail(await t.call("DELETE", BLUE), 409, "in_use", { message: /ports "p1"/ });
  must(await t.call("DELETE", `${BLUE}/ports/p1`), 204);
  must(
    await t.call("POST", "tenants/acme/ipgroups", { name: "g1", network: "blue", size: 2 }),
    201,
  );
  mustFail(await t.call("DELETE", BLUE), 409, "in_use", { message: /IP groups "acme\/g1"/ });
  must(await t.call("DELETE", "tenants/acme/ipgroups/g1"), 204);
  must(await t.call("DELETE", BLUE), 204);
  mustFail(await t.call("GET", BLUE), 404, "not_found");
  assert.equal(must(await t.call("GET", "tenants/acme"), 200).networks, 0);
});

Deno.test("networks: a network re-created under the same name starts with an empty pool", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  assert.equal(must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201).ip, "10.1.0.1");
  must(await t.call("DELETE", `${BLUE}/ports/p1`), 204);
  must(await t.call("DELETE", BLUE), 204);
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  const again = must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  assert.equal(again.ip, "10.1.0.1");
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 1);
});

// ---- physnets

Deno.test("physnets: create, list, get, delete only when unused", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const p = must(
    await t.call("POST", "physnets", {
      name: "phys1",
      vlanRanges: [{ start: 200, end: 209 }, { start: 100, end: 104 }],
    }),
    201,
  );
  assert.deepEqual(p.vlanRanges, [{ start: 100, end: 104 }, { start: 200, end: 209 }]);
  assert.deepEqual(p.usage, { total: 15, used: 0, free: 15 });
  mustFail(await t.call("POST", "physnets", { name: "phys1" }), 409, "already_exists");
  assert.deepEqual(
    must(await t.call("GET", "physnets"), 200).items.map((x: { name: string }) => x.name),
    ["phys1"],
  );

  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("v", "10.1.0.0/24", { type: "vlan", physnet: "phys1" }),
    ),
    201,
  );
  mustFail(await t.call("DELETE", "physnets/phys1"), 409, "in_use");
  must(await t.call("DELETE", "tenants/acme/networks/v"), 204);
  assert.deepEqual(must(await t.call("GET", "physnets/phys1"), 200).usage, {
    total: 15,
    used: 0,
    free: 15,
  });
  must(await t.call("DELETE", "physnets/phys1"), 204);
  mustFail(await t.call("GET", "physnets/phys1"), 404, "not_found");
});

// ---- IPv6

Deno.test("ipv6: a network with pools hands out canonical addresses", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const v6 = must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("v6", "fd00:1::/64", {
        gateway: "fd00:1::1",
        allocationPools: [{ start: "fd00:1::10", end: "fd00:1::1f" }],
      }),
    ),
    201,
  );
  assert.equal(v6.family, 6);
  assert.deepEqual(v6.usage, { total: 16, used: 0, free: 16 });
  const p1 = must(await t.call("PUT", "tenants/acme/networks/v6/ports/p1", {}), 201);
  assert.equal(p1.ip, "fd00:1::10");
  assert.equal(p1.address, "fd00:1::10/64");
  assert.equal(p1.gateway, "fd00:1::1");
  assert.equal(p1.family, 6);
  const p2 = must(
    await t.call("PUT", "tenants/acme/networks/v6/ports/p2", { ip: "FD00:1:0:0:0:0:0:1F" }),
    201,
  );
  assert.equal(p2.ip, "fd00:1::1f");
  mustFail(
    await t.call("PUT", "tenants/acme/networks/v6/ports/p3", { ip: "fd00:1::1f" }),
    409,
    "address_taken",
    { message: /"p2"/ },
  );
});

Deno.test("ipv6: a network with pools too large is refused clearly (without pools: dual_stack_test.ts)", async () => {
  using t = await testApp({ tenants: ["acme"] });
  mustFail(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("v6", "fd00:1::/64", {
        allocationPools: [{ start: "fd00:1::1", end: "fd00:1::ffff:ffff" }],
      }),
    ),
    400,
    "invalid_request",
    { field: "allocationPools", message: /more than the 16777216/ },
  );
  assert.equal(must(await t.call("GET", "tenants/acme"), 200).networks, 0);
});

// ---- IP groups

async function blueWithGroups() {
  const t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("blue", "10.1.0.0/24", { gateway: "10.1.0.1" }),
    ),
    201,
  );
  return t;
}

Deno.test("ipgroups: create by list and by size; ports from a group get group addresses", async () => {
  using t = await blueWithGroups();
  const listed = ["10.1.0.10", "10.1.0.11", "10.1.0.12"];
  const g1 = must(
    await t.call("POST", "tenants/acme/ipgroups", {
      name: "g1",
      network: "blue",
      addresses: listed,
    }),
    201,
  );
  assert.deepEqual(g1.addresses, listed.map((ip) => ({ ip })));
  assert.equal(g1.size, 3);
  assert.equal(g1.used, 0);
  const g2 = must(
    await t.call("POST", "tenants/acme/ipgroups", { name: "g2", network: "blue", size: 2 }),
    201,
  );
  assert.equal(g2.size, 2);
  const g2ips: string[] = g2.addresses.map((a: { ip: string }) => a.ip);
  assert.ok(g2ips.every((ip) => !listed.includes(ip) && ip !== "10.1.0.1"), g2ips.join());
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 5);
  assert.equal(must(await t.call("GET", "tenants/acme"), 200).ipGroups, 2);

  const got = [];
  for (const id of ["a", "b", "c"]) {
    const p = must(await t.call("PUT", `${BLUE}/ports/${id}`, { ipGroup: "g1" }), 201);
    assert.equal(p.ipGroup, "g1");
    got.push(p.ip);
  }
  assert.deepEqual(got.sort(), listed);
  mustFail(await t.call("PUT", `${BLUE}/ports/d`, { ipGroup: "g1" }), 409, "pool_exhausted", {
    field: "ipGroup",
  });
  // Group addresses in use count once in the network's usage.
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 5);
  // A group's address is not for ports outside the group.
  mustFail(
    await t.call("PUT", `${BLUE}/ports/e`, { ip: g2ips[0] }),
    409,
    "address_taken",
    { message: /IP group "g2"/ },
  );
  const g1now = must(await t.call("GET", "tenants/acme/ipgroups/g1"), 200);
  assert.equal(g1now.used, 3);
  assert.deepEqual(
    must(await t.call("GET", "tenants/acme/ipgroups"), 200).items.map((g: { name: string }) =>
      g.name
    ),
    [
      "g1",
      "g2",
    ],
  );
});

Deno.test("ipgroups: releasing a port returns its address to the group, not the network", async () => {
  using t = await blueWithGroups();
  must(
    await t.call("POST", "tenants/acme/ipgroups", {
      name: "g1",
      network: "blue",
      addresses: ["10.1.0.10"],
    }),
    201,
  );
  const p = must(await t.call("PUT", `${BLUE}/ports/a`, { ipGroup: "g1" }), 201);
  assert.equal(p.ip, "10.1.0.10");
  must(await t.call("DELETE", `${BLUE}/ports/a`), 204);
  const g = must(await t.call("GET", "tenants/acme/ipgroups/g1"), 200);
  assert.deepEqual(g.addresses, [{ ip: "10.1.0.10" }]);
  assert.equal(g.used, 0);
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 1, "the group still holds it");
  // The next port of the group gets it again; a port without the group does not.
  must(await t.call("PUT", `${BLUE}/ports/plain`, { ip: "10.1.0.9" }), 201);
  assert.equal(
    must(await t.call("PUT", `${BLUE}/ports/b`, { ipGroup: "g1" }), 201).ip,
    "10.1.0.10",
  );
});

Deno.test("ipgroups: grow and shrink by size and by addresses; addresses in use stay", async () => {
  using t = await blueWithGroups();
  const ips = (g: { addresses: { ip: string }[] }) => g.addresses.map((a) => a.ip);
  const g = must(
    await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "blue", size: 2 }),
    201,
  );
  const grown = must(await t.call("PUT", "tenants/acme/ipgroups/g", { size: 4 }), 200);
  assert.equal(grown.size, 4);
  assert.deepEqual(ips(grown).slice(0, 2), ips(g));
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 4);

  const shrunk = must(await t.call("PUT", "tenants/acme/ipgroups/g", { size: 1 }), 200);
  assert.deepEqual(ips(shrunk), ips(g).slice(0, 1));
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 1);

  const set = ["10.1.0.100", "10.1.0.101"];
  const byList = must(await t.call("PUT", "tenants/acme/ipgroups/g", { addresses: set }), 200);
  assert.deepEqual(ips(byList), set);
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 2);

  const p = must(await t.call("PUT", `${BLUE}/ports/a`, { ipGroup: "g", ip: "10.1.0.101" }), 201);
  assert.equal(p.ip, "10.1.0.101");
  mustFail(
    await t.call("PUT", "tenants/acme/ipgroups/g", { addresses: ["10.1.0.100"] }),
    409,
    "in_use",
    { message: /10\.1\.0\.101 \(port "a"\)/ },
  );
  mustFail(await t.call("PUT", "tenants/acme/ipgroups/g", { size: 0 }), 400, "invalid_request");
  const keep = must(await t.call("PUT", "tenants/acme/ipgroups/g", { size: 1 }), 200);
  assert.deepEqual(keep.addresses, [{ ip: "10.1.0.101", port: "a" }], "the unused address goes");
  // The dropped addresses are free for anyone again.
  must(await t.call("PUT", `${BLUE}/ports/b`, { ip: "10.1.0.100" }), 201);
});

Deno.test("ipgroups: the largest group (512 addresses) fits", async () => {
  using t = await blueWithGroups();
  must(await t.call("POST", "tenants/acme/networks", net("wide", "10.8.0.0/16")), 201);
  const g = must(
    await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "wide", size: 512 }),
    201,
  );
  assert.equal(new Set(g.addresses.map((a: { ip: string }) => a.ip)).size, 512);
  assert.equal(must(await t.call("GET", "tenants/acme/networks/wide"), 200).usage.used, 512);
  must(await t.call("DELETE", "tenants/acme/ipgroups/g"), 204);
  assert.equal(must(await t.call("GET", "tenants/acme/networks/wide"), 200).usage.used, 0);
});

Deno.test("ipgroups: delete is refused while an address is in use", async () => {
  using t = await blueWithGroups();
  must(await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "blue", size: 3 }), 201);
  must(await t.call("PUT", `${BLUE}/ports/a`, { ipGroup: "g" }), 201);
  mustFail(await t.call("DELETE", "tenants/acme/ipgroups/g"), 409, "in_use", {
    message: /port "a"/,
  });
  must(await t.call("DELETE", `${BLUE}/ports/a`), 204);
  must(await t.call("DELETE", "tenants/acme/ipgroups/g"), 204);
  mustFail(await t.call("GET", "tenants/acme/ipgroups/g"), 404, "not_found");
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 0);
  assert.equal(must(await t.call("GET", "tenants/acme"), 200).ipGroups, 0);
});

// ---- ports

async function blueNetwork() {
  const t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("blue", "10.1.0.0/24", {
        gateway: "10.1.0.1",
        mtu: 1400,
        routes: [{ dst: "10.50.0.0/16", via: "10.1.0.254" }],
        dns: { nameservers: ["10.1.0.53"], search: ["acme.local"] },
      }),
    ),
    201,
  );
  return t;
}

Deno.test("ports: PUT answers 201 then 200 with the same body; the answer has all the agent needs", async () => {
  using t = await blueNetwork();
  const body = { node: "worker1", pod: { namespace: "ns1", name: "pod-a" }, interface: "eth1" };
  const first = must(await t.call("PUT", `${BLUE}/ports/p1`, body), 201);
  const again = must(await t.call("PUT", `${BLUE}/ports/p1`, body), 200);
  assert.deepEqual(again, first);
  assert.deepEqual(must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 200), first);
  assert.deepEqual(must(await t.call("GET", `${BLUE}/ports/p1`), 200), first);

  const blue = must(await t.call("GET", BLUE), 200);
  assert.equal(first.ip, "10.1.0.2");
  assert.equal(first.address, "10.1.0.2/24");
  assert.equal(first.gateway, "10.1.0.1");
  assert.match(first.mac, /^02(:[0-9a-f]{2}){5}$/);
  assert.equal(first.type, "vxlan");
  assert.equal(first.segmentId, blue.segmentId);
  assert.equal(first.mtu, 1400);
  assert.deepEqual(first.routes, [{ dst: "10.50.0.0/16", via: "10.1.0.254" }]);
  assert.deepEqual(first.dns, { nameservers: ["10.1.0.53"], search: ["acme.local"] });
  assert.equal(first.networkId, blue.id);
  assert.equal(first.index, undefined, "internal fields stay inside");
  assert.deepEqual([first.node, first.interface, first.pod], ["worker1", "eth1", body.pod]);
});

Deno.test("ports: MACs differ between ports; a requested MAC is kept", async () => {
  using t = await blueNetwork();
  const macs = new Set();
  for (let i = 0; i < 20; i++) {
    macs.add(must(await t.call("PUT", `${BLUE}/ports/p${i}`, {}), 201).mac);
  }
  assert.equal(macs.size, 20);
  const p = must(await t.call("PUT", `${BLUE}/ports/m`, { mac: "02:aa:bb:cc:dd:ee" }), 201);
  assert.equal(p.mac, "02:aa:bb:cc:dd:ee");
});

Deno.test("ports: fixed IPs, taken or outside, and contradicting requests", async () => {
  using t = await blueNetwork();
  const fixed = must(await t.call("PUT", `${BLUE}/ports/p1`, { ip: "10.1.0.50" }), 201);
  assert.equal(fixed.ip, "10.1.0.50");
  must(await t.call("PUT", `${BLUE}/ports/p1`, { ip: "10.1.0.50" }), 200);
  mustFail(await t.call("PUT", `${BLUE}/ports/p2`, { ip: "10.1.0.50" }), 409, "address_taken", {
    field: "ip",
    message: /used by port "p1"/,
  });
  mustFail(await t.call("PUT", `${BLUE}/ports/p2`, { ip: "10.2.0.5" }), 400, "invalid_request", {
    field: "ip",
    message: /outside 10\.1\.0\.0\/24/,
  });
  mustFail(await t.call("PUT", `${BLUE}/ports/p2`, { ip: "10.1.0.1" }), 409, "address_taken", {
    message: /gateway/,
  });
  mustFail(await t.call("PUT", `${BLUE}/ports/p2`, { ip: "10.1.0.255" }), 400, "invalid_request", {
    field: "ip",
  });
  mustFail(await t.call("PUT", `${BLUE}/ports/p1`, { ip: "10.1.0.51" }), 409, "conflict", {
    field: "ip",
  });
  mustFail(await t.call("PUT", `${BLUE}/ports/p1`, { mac: "02:00:00:00:00:01" }), 409, "conflict", {
    field: "mac",
  });
  // Unbound fields may be bound later, once.
  assert.equal(
    must(await t.call("PUT", `${BLUE}/ports/p1`, { node: "worker1" }), 200).node,
    "worker1",
  );
  mustFail(await t.call("PUT", `${BLUE}/ports/p1`, { node: "worker2" }), 409, "conflict", {
    field: "node",
  });
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 1);
});

Deno.test("ports: DELETE releases, a second DELETE is 404", async () => {
  using t = await blueNetwork();
  must(await t.call("PUT", `${BLUE}/ports/p1`, { node: "worker1" }), 201);
  must(await t.call("DELETE", `${BLUE}/ports/p1`), 204);
  mustFail(await t.call("DELETE", `${BLUE}/ports/p1`), 404, "not_found");
  mustFail(await t.call("GET", `${BLUE}/ports/p1`), 404, "not_found");
  assert.equal(must(await t.call("GET", BLUE), 200).usage.used, 0);
  assert.deepEqual(must(await t.call("GET", "ports?node=worker1"), 200).items, []);
});

Deno.test("ports: the same port ID always gets the same address; a freed address waits a round", async () => {
  using t = await blueNetwork();
  const a = must(await t.call("PUT", `${BLUE}/ports/a`, {}), 201);
  const b = must(await t.call("PUT", `${BLUE}/ports/b`, {}), 201);
  assert.equal(must(await t.call("PUT", `${BLUE}/ports/a`, {}), 200).ip, a.ip);
  must(await t.call("DELETE", `${BLUE}/ports/a`), 204);
  const c = must(await t.call("PUT", `${BLUE}/ports/c`, {}), 201);
  assert.notEqual(c.ip, a.ip, "the freed address is not handed out again at once");
  assert.deepEqual([a.ip, b.ip, c.ip], ["10.1.0.2", "10.1.0.3", "10.1.0.4"]);
  // A re-created port is a new allocation, also past the cursor.
  assert.equal(must(await t.call("PUT", `${BLUE}/ports/a`, {}), 201).ip, "10.1.0.5");
});

Deno.test("ports: list by node, by pod, and per network", async () => {
  using t = await blueNetwork();
  must(await t.call("POST", "tenants/acme/networks", net("red", "10.2.0.0/24")), 201);
  const pod = (name: string) => ({ namespace: "ns1", name });
  must(await t.call("PUT", `${BLUE}/ports/a`, { node: "worker1", pod: pod("pod-a") }), 201);
  must(
    await t.call("PUT", "tenants/acme/networks/red/ports/a2", {
      node: "worker1",
      pod: pod("pod-a"),
    }),
    201,
  );
  must(await t.call("PUT", `${BLUE}/ports/b`, { node: "worker2", pod: pod("pod-b") }), 201);
  must(await t.call("PUT", `${BLUE}/ports/c`, {}), 201);
  const ids = (r: { items: { id: string }[] }) => r.items.map((p) => p.id).sort();
  assert.deepEqual(ids(must(await t.call("GET", "ports?node=worker1"), 200)), ["a", "a2"]);
  assert.deepEqual(ids(must(await t.call("GET", "ports?node=worker2"), 200)), ["b"]);
  assert.deepEqual(ids(must(await t.call("GET", "ports?pod=ns1/pod-a"), 200)), ["a", "a2"]);
  assert.deepEqual(ids(must(await t.call("GET", "ports?pod=ns1/pod"), 200)), []);
  assert.deepEqual(ids(must(await t.call("GET", "ports"), 200)), ["a", "a2", "b", "c"]);
  assert.deepEqual(ids(must(await t.call("GET", `${BLUE}/ports`), 200)), ["a", "b", "c"]);
  assert.deepEqual(ids(must(await t.call("GET", `${BLUE}/ports?node=worker1`), 200)), ["a"]);
  const listed = must(await t.call("GET", "ports?node=worker1"), 200).items.find((
    p: { id: string },
  ) => p.id === "a");
  assert.deepEqual(listed, must(await t.call("GET", `${BLUE}/ports/a`), 200));
});

Deno.test("ports: network, broadcast, gateway and excludes are never handed out", async () => {
  using t = await testApp({ tenants: ["acme"] });
  const small = must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("small", "10.9.0.0/28", {
        gateway: "10.9.0.1",
        excludes: ["10.9.0.4", "10.9.0.8/30", "10.9.0.13-10.9.0.14"],
      }),
    ),
    201,
  );
  assert.deepEqual(small.usage, { total: 6, used: 0, free: 6 });
  const got = [];
  for (let i = 0; i < 6; i++) {
    got.push(must(await t.call("PUT", `tenants/acme/networks/small/ports/p${i}`, {}), 201).ip);
  }
  assert.deepEqual(got, ["10.9.0.2", "10.9.0.3", "10.9.0.5", "10.9.0.6", "10.9.0.7", "10.9.0.12"]);
  mustFail(await t.call("PUT", "tenants/acme/networks/small/ports/p6", {}), 409, "pool_exhausted");
  mustFail(
    await t.call("PUT", "tenants/acme/networks/small/ports/p6", { ip: "10.9.0.9" }),
    409,
    "address_taken",
    {
      message: /excluded/,
    },
  );
});

Deno.test("ports: allocation pools limit what is handed out", async () => {
  using t = await testApp({ tenants: ["acme"] });
  must(
    await t.call(
      "POST",
      "tenants/acme/networks",
      net("p", "10.9.0.0/29", {
        allocationPools: [{ start: "10.9.0.5", end: "10.9.0.6" }, {
          start: "10.9.0.2",
          end: "10.9.0.2",
        }],
      }),
    ),
    201,
  );
  const got = [];
  for (let i = 0; i < 3; i++) {
    got.push(must(await t.call("PUT", `tenants/acme/networks/p/ports/p${i}`, {}), 201).ip);
  }
  assert.deepEqual(got, ["10.9.0.2", "10.9.0.5", "10.9.0.6"]);
  mustFail(await t.call("PUT", "tenants/acme/networks/p/ports/p9", {}), 409, "pool_exhausted");
});

// ---- nodes

Deno.test("nodes: register, refresh, list, get, delete", async () => {
  using t = await testApp();
  const first = must(
    await t.call(
      "PUT",
      "nodes/worker1",
      { underlayIp: "192.168.1.11", labels: { zone: "a" } },
      TOKEN.worker1,
    ),
    201,
  );
  assert.equal(first.underlayIp, "192.168.1.11");
  assert.deepEqual(first.labels, { zone: "a" });
  const again = must(await t.call("PUT", "nodes/worker1", { underlayIp: "192.168.1.12" }), 200);
  assert.equal(again.underlayIp, "192.168.1.12");
  assert.deepEqual(again.labels, { zone: "a" }, "labels stay when not given");
  assert.equal(again.registeredAt, first.registeredAt);
  must(await t.call("PUT", "nodes/worker2", { underlayIp: "192.168.1.13" }), 201);

  assert.deepEqual(
    must(await t.call("GET", "nodes"), 200).items.map((n: { name: string }) => n.name),
    [
      "worker1",
      "worker2",
    ],
  );
  assert.deepEqual(must(await t.call("GET", "nodes/worker1"), 200), again);
  mustFail(await t.call("GET", "nodes/worker9"), 404, "not_found");
  must(await t.call("DELETE", "nodes/worker2"), 204);
  mustFail(await t.call("GET", "nodes/worker2"), 404, "not_found");
  mustFail(
    await t.call("PUT", "nodes/worker1", { underlayIp: "not-an-ip" }),
    400,
    "invalid_request",
    {
      field: "underlayIp",
    },
  );
});

// ---- operations

Deno.test("ops: /healthz and /readyz answer without a token; /readyz reports a closed store", async () => {
  const t = await testApp();
  assert.deepEqual(must(await t.call("GET", "/healthz", undefined, null), 200), { status: "ok" });
  assert.deepEqual(must(await t.call("GET", "/readyz", undefined, null), 200), { status: "ready" });
  t.close();
  const r = must(await t.call("GET", "/readyz", undefined, null), 503);
  assert.equal(r.status, "not ready");
  assert.match(r.reason, /^store: /);
});

Deno.test("ops: /metrics counts requests and allocations and shows pool capacity and usage per network", async () => {
  using t = await blueNetwork();
  must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  must(await t.call("PUT", `${BLUE}/ports/p2`, {}), 201);
  must(await t.call("PUT", `${BLUE}/ports/p2`, {}), 200);
  const res = await t.call("GET", "/metrics", undefined, TOKEN.metrics);
  assert.equal(res.status, 200);
  const f = parseExposition(res.body);
  const value = (name: string, labels: Record<string, string>) => {
    const found = samplesOf(f, name, labels);
    assert.equal(found.length, 1, `${name} ${JSON.stringify(labels)}: ${JSON.stringify(found)}`);
    return found[0].value;
  };
  const port = {
    method: "PUT",
    route: "/api/v1/tenants/:tenant/networks/:network/ports/:port",
  };
  assert.equal(value("knitter_manager_http_requests_total", { ...port, status: "201" }), 2);
  assert.equal(value("knitter_manager_http_requests_total", { ...port, status: "200" }), 1);
  assert.equal(value("knitter_manager_http_request_duration_seconds_count", port), 3);
  assert.equal(value("knitter_manager_allocations_total", { kind: "ip" }), 2);
  assert.equal(value("knitter_manager_allocations_total", { kind: "vni" }), 1);
  const blue = { tenant: "acme", network: "blue" };
  assert.equal(value("knitter_manager_pool_capacity_addresses", blue), 253);
  assert.equal(value("knitter_manager_pool_used_addresses", blue), 2);
  assert.equal(value("knitter_manager_pool_quarantined_addresses", blue), 0);
  assert.equal(f.get("knitter_manager_pool_used_addresses")?.type, "gauge");
  assert.deepEqual(await conventionProblems(t.ctx.metrics.registry), []);
});

Deno.test("ops: /metrics counts a released address in quarantine, neither used nor in capacity's free part", async () => {
  using t = await testApp({ tenants: ["acme"], quarantineSeconds: 60 });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("PUT", `${BLUE}/ports/p1`, {}), 201);
  must(await t.call("DELETE", `${BLUE}/ports/p1`), 204);
  const f = parseExposition((await t.call("GET", "/metrics", undefined, TOKEN.metrics)).body);
  const blue = { tenant: "acme", network: "blue" };
  assert.equal(samplesOf(f, "knitter_manager_pool_used_addresses", blue)[0].value, 0);
  assert.equal(samplesOf(f, "knitter_manager_pool_quarantined_addresses", blue)[0].value, 1);
  assert.equal(samplesOf(f, "knitter_manager_releases_total", { kind: "ip" })[0].value, 1);
});

Deno.test("ops: /openapi.json documents every route with its request body", async () => {
  using t = await testApp();
  const res = await t.app.request("/openapi.json");
  assert.equal(res.status, 200);
  const doc = JSON.parse(await res.text());
  assert.equal(doc.openapi, "3.1.0");
  for (const r of ROUTES) {
    const op = doc.paths[r.path]?.[r.method.toLowerCase()];
    assert.ok(op, `${r.method} ${r.path} is documented`);
    assert.ok(op.responses[r.ok.status], `${r.method} ${r.path} documents ${r.ok.status}`);
    const params = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    assert.deepEqual(
      op.parameters.filter((p: { in: string }) => p.in === "path").map((p: { name: string }) =>
        p.name
      ),
      params,
    );
    if (r.body) {
      const schema = op.requestBody?.content?.["application/json"]?.schema;
      assert.equal(schema?.type, "object", `${r.method} ${r.path} has a request body schema`);
      assert.ok(Object.keys(schema.properties).length > 0);
    } else {
      assert.equal(op.requestBody, undefined);
    }
  }
  const create =
    doc.paths["/api/v1/tenants/{tenant}/networks"].post.requestBody.content["application/json"]
      .schema;
  assert.ok(create.required.includes("cidr"));
  assert.equal(create.additionalProperties, false, "unknown fields are refused, and documented so");
});

Deno.test("ops: an unknown route answers 404 in the error shape", async () => {
  using t = await testApp();
  mustFail(await t.call("GET", "nothing-here"), 404, "not_found", { message: /openapi\.json/ });
});
