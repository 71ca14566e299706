/** knitctl usage quota against a real manager: a tenant sees its quota, use and what is left. */
import assert from "node:assert/strict";
import { ConfigSchema } from "../manager/config.ts";
import { startManager } from "../manager/mod.ts";
import { expectExit, knitctl } from "../knitctl/test_support.ts";
import { Cleanup } from "../devstack/cleanup.ts";

const ADMIN = `admin-${crypto.randomUUID()}`;
const ACME = `acme-${crypto.randomUUID()}`;

Deno.test("knitctl: usage quota shows a tenant's limits, use and what is left", async () => {
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
  try {
    const as = (token: string) => ({ KNITCTL_SERVER: manager.url, KNITCTL_TOKEN: token });
    const api = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${manager.url}/api/v1/${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      await r.body?.cancel();
      assert.ok(r.ok, `${method} ${path}: ${r.status}`);
    };
    await api("POST", "tenants", { name: "acme" });
    await api("POST", "tenants/acme/networks", { name: "blue", cidr: "10.1.0.0/24" });
    await api("PUT", "tenants/acme/quota", { ports: 5, networks: 2 });
    await api("PUT", "tenants/acme/networks/blue/ports/p1", {});
    const table = expectExit(await knitctl(["-t", "acme", "usage", "quota"], as(ACME)), 0, "usage");
    assert.match(table.stdout, /^QUOTA\s+USED\s+LIMIT\s+LEFT\n/);
    assert.match(table.stdout, /\nports\s+1\s+5\s+4\n/);
    assert.match(table.stdout, /\nnetworks\s+1\s+2\s+1\n/);
    assert.match(table.stdout, /\nvnis\s+1\s+-\s+-\n/);
    const json = expectExit(
      await knitctl(["-t", "acme", "usage", "quota", "-o", "json"], as(ACME)),
      0,
      "usage -o json",
    ).json();
    assert.deepEqual(json.limits, { ports: 5, networks: 2 });
    assert.equal(json.used.addresses, 1);
  } finally {
    await manager.shutdown();
  }
});
