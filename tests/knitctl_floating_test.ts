/**
 * knitctl and floating addresses against a real manager: the admin makes a pool, a tenant takes an
 * address, binds it to its port, unbinds and releases it; what it cannot do, knitctl says why.
 */
import assert from "node:assert/strict";
import { ConfigSchema } from "../manager/config.ts";
import { startManager } from "../manager/mod.ts";
import { expectExit, knitctl } from "../knitctl/test_support.ts";
import { Cleanup } from "../devstack/cleanup.ts";

const ADMIN = `admin-${crypto.randomUUID()}`;
const ACME = `acme-${crypto.randomUUID()}`;

Deno.test("knitctl: create floatingpool, create floatingip, bind, unbind, delete", async () => {
  await using cleanup = new Cleanup();
  const dir = await cleanup.tempDir();
  const manager = await startManager(ConfigSchema.parse({
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: [
      { token: ADMIN, scope: "admin" },
      { token: ACME, scope: "tenant", tenant: "acme" },
    ],
    vniRanges: ["5000-5999"],
    logLevel: "error",
  }));
  cleanup.defer(() => manager.shutdown());
  const as = (token: string) => ({ KNITCTL_SERVER: manager.url, KNITCTL_TOKEN: token });
  const ok = async (args: string[], token = ACME) =>
    expectExit(await knitctl(["-t", "acme", ...args], as(token)), 0, args.join(" ")).stdout;
  await ok(["create", "tenant", "acme"], ADMIN);
  await ok(["create", "network", "blue", "--cidr", "10.1.0.0/24"], ADMIN);
  await ok(["create", "port", "p1", "--network", "blue"], ADMIN);
  assert.equal(
    await ok(["create", "floatingpool", "ext", "--cidr", "203.0.113.0/29"], ADMIN),
    "floatingpool/ext created\n",
  );
  const refused = await knitctl(
    ["create", "floatingpool", "mine", "--cidr", "198.51.100.0/29"],
    as(ACME),
  );
  assert.equal(refused.code, 1, refused.stderr);
  assert.equal(
    await ok(["create", "floatingip", "--floating-pool", "ext"]),
    "floatingip/203.0.113.1 created\n",
  );
  assert.equal(
    await ok(["bind", "floatingip", "203.0.113.1", "--network", "blue", "--port", "p1"]),
    "floatingip/203.0.113.1 bound to port p1 of network blue\n",
  );
  const table = await ok(["get", "floatingips"]);
  assert.match(table, /^ADDRESS\s+POOL\s+NETWORK\s+PORT\s+AGE\n203\.0\.113\.1\s+ext\s+blue\s+p1\s/);
  const port = JSON.parse(await ok(["get", "port", "p1", "--network", "blue", "-o", "json"]));
  assert.equal(port.floating, "203.0.113.1");
  const other = await knitctl([
    "-t",
    "acme",
    "bind",
    "floatingip",
    "203.0.113.2",
    "--network",
    "blue",
    "--port",
    "p1",
  ], as(ACME));
  assert.equal(other.code, 1);
  assert.match(other.stderr, /holds no floating address 203\.0\.113\.2/);
  assert.equal(
    await ok(["unbind", "floatingip", "203.0.113.1"]),
    "floatingip/203.0.113.1 unbound (still the tenant's)\n",
  );
  assert.match(await ok(["usage", "quota"]), /\nfloatingIps\s+1\s+-\s+-\n/);
  assert.equal(
    await ok(["delete", "floatingip", "203.0.113.1"]),
    "floatingip/203.0.113.1 deleted\n",
  );
  const usage = await knitctl(["bind", "floatingip", "203.0.113.1"], as(ACME));
  assert.equal(usage.code, 2, usage.stderr);
});
