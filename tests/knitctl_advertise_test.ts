/**
 * knitctl and BGP advertisement against a real manager (HTTP on loopback, Deno KV): `get networks
 * -o wide` and `get routers` show advertise (a network's router as `router/NAME`), and `update
 * router|network NAME --advertise=true|false` sets it with an admin token; a tenant's try gets the
 * manager's 403 explained, and changes nothing.
 */
import assert from "node:assert/strict";
import { expectExit, knitctl } from "../knitctl/test_support.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { startLoopbackManager } from "./support/loopback_manager.ts";

const ADMIN = `admin-${crypto.randomUUID()}`;
const ACME = `acme-${crypto.randomUUID()}`;

Deno.test("knitctl: update router --advertise as the admin, shown by get routers and get networks -o wide; attack: a tenant's update is refused with the 403 explained, nothing changes", async () => {
  await using cleanup = new Cleanup();
  const manager = await startLoopbackManager(cleanup, [
    { token: ADMIN, scope: "admin" },
    { token: ACME, scope: "tenant", tenant: "acme" },
  ], { bgp: { advertisableRanges: ["10.80.0.0/12"] } });
  const admin = { KNITCTL_SERVER: manager.url, KNITCTL_TOKEN: ADMIN };
  const acme = { KNITCTL_SERVER: manager.url, KNITCTL_TOKEN: ACME };
  const run = async (args: string[], as: Record<string, string>, code = 0) =>
    expectExit(await knitctl(["-t", "acme", ...args], as), code, args.join(" "));
  await expectExit(await knitctl(["create", "tenant", "acme"], admin), 0, "create tenant");
  for (const [name, cidr] of [["a", "10.84.0.0/24"], ["b", "10.85.0.0/24"]]) {
    await run(
      ["create", "network", name, "--cidr", cidr, "--gateway", cidr.replace("0/24", "1")],
      admin,
    );
  }
  await run(
    ["create", "router", "edge", "--networks", "a,b", "--route", "10.99.0.0/16,10.84.0.9"],
    acme,
  );

  // The attack first: the tenant turns its own router's advertise on.
  const refused = await run(["update", "router", "edge", "--advertise=true"], acme, 1);
  assert.match(refused.stderr, /advertise: only an admin may turn it on.*\(403 forbidden\)/s);
  assert.match(refused.stderr, /ask the admin|admin token/);
  assert.equal((await run(["get", "router", "edge", "-o", "json"], admin)).json().advertise, false);

  assert.equal(
    (await run(["update", "router", "edge", "--advertise=true"], admin)).stdout,
    "router/edge updated\n",
  );
  const edge = (await run(["get", "router", "edge", "-o", "json"], admin)).json();
  assert.equal(edge.advertise, true);
  assert.deepEqual(edge.networks.map((n: { name: string }) => n.name), ["a", "b"], "kept");
  assert.deepEqual(edge.routes, [{ dst: "10.99.0.0/16", via: "10.84.0.9" }], "kept");
  const routers = (await run(["get", "routers"], acme)).stdout;
  assert.match(routers, /^NAME\s+NETWORKS\s+ROUTES\s+ADVERTISE\s+AGE\n/);
  assert.match(routers, /\nedge\s+a,b\s+10\.99\.0\.0\/16 via 10\.84\.0\.9\s+true\s/);
  const nets = (await run(["get", "networks", "-o", "wide"], acme)).stdout;
  assert.match(nets, /\sADVERTISE\s/);
  assert.match(nets, /\na\s.*\srouter\/edge\s/);

  // A tenant may turn it off; a network of its own is the admin's to advertise too.
  await run(["update", "router", "edge", "--advertise=false"], acme);
  assert.match((await run(["get", "routers"], acme)).stdout, /\nedge\s.*\sfalse\s/);
  const net = await run(["update", "network", "b", "--advertise=true"], acme, 1);
  assert.match(net.stderr, /only an admin.*403/s);
  await run(["update", "network", "b", "--advertise=true"], admin);
  assert.match((await run(["get", "networks", "-o", "wide"], acme)).stdout, /\nb\s.*\strue\s/);
});

Deno.test("knitctl: update's usage errors say what to write", async () => {
  const env = { KNITCTL_SERVER: "http://127.0.0.1:9", KNITCTL_TOKEN: ADMIN };
  const cases: [string[], RegExp][] = [
    [["update", "router", "edge"], /update needs --advertise=true or --advertise=false/],
    [["update", "router", "edge", "--advertise=maybe"], /--advertise "maybe" is not true or false/],
    [
      ["update", "tenant", "acme", "--advertise=true"],
      /update is for network, router, not tenants/,
    ],
    [["update", "router", "--advertise=true"], /update router needs a name/],
    [["update", "router", "edge", "--cidr", "10.0.0.0/8"], /update router does not take --cidr/],
  ];
  for (const [args, message] of cases) {
    const r = expectExit(await knitctl(args, env), 2, args.join(" "));
    assert.match(r.stderr, message);
  }
});
