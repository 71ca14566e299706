/**
 * Migration and the consistency check through the manager's own commands: a state built on a
 * Deno KV file moves to etcd (export, import with its comparison), a manager on etcd serves it,
 * the way back compares equal, and `check` finds a planted orphan bit and a tampered value.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { must, testApp } from "../manager/test_support.ts";
import { openEtcdStore } from "../manager/store/etcd_store.ts";
import { startEtcd } from "./support/etcd.ts";

const ROOT = new URL("../", import.meta.url).pathname;

function manager(args: string[], env: Record<string, string> = {}) {
  return run([Deno.execPath(), "run", "-A", "--unstable-kv", `${ROOT}manager/main.ts`, ...args], {
    env: { NO_COLOR: "1", ...env },
    check: false,
  });
}

Deno.test("migration Deno KV -> etcd -> Deno KV, and the consistency check", async () => {
  await using etcd = await startEtcd();
  const dir = await Deno.makeTempDir({ prefix: "knitter-migrate-" });
  try {
    const kvFile = `${dir}/manager.kv`;
    // A state with every kind of record: tenants, VXLAN and VLAN networks, a physnet, ports, a group.
    {
      await using t = await testApp({ path: kvFile, tenants: ["acme"] });
      must(
        await t.call("POST", "physnets", { name: "p1", vlanRanges: [{ start: 100, end: 199 }] }),
        201,
      );
      must(
        await t.call("POST", "tenants/acme/networks", {
          name: "blue",
          cidr: "10.1.0.0/24",
          excludes: ["10.1.0.10-10.1.0.20"],
        }),
        201,
      );
      must(
        await t.call("POST", "tenants/acme/networks", {
          name: "red",
          cidr: "10.2.0.0/24",
          type: "vlan",
          physnet: "p1",
        }),
        201,
      );
      must(
        await t.call("POST", "tenants/acme/ipgroups", { name: "g", network: "blue", size: 3 }),
        201,
      );
      for (let i = 0; i < 20; i++) {
        must(
          await t.call("PUT", `tenants/acme/networks/${i % 2 ? "blue" : "red"}/ports/p${i}`, {
            node: "w1",
          }),
          201,
        );
      }
    }
    const kvEnv = { KNITTER_MANAGER_STORE: kvFile };
    const etcdEnv = {
      KNITTER_MANAGER_ETCD_ENDPOINTS: etcd.endpoints.join(","),
      KNITTER_MANAGER_ETCD_PREFIX: "migrated/",
    };
    const checked = await manager(["check"], kvEnv);
    assert.equal(checked.code, 0, checked.stderr);
    assert.match(checked.stdout, /consistent \(2 networks, 20 ports\)/);

    const out = await manager(["export", "--out", `${dir}/kv.jsonl`], kvEnv);
    assert.equal(out.code, 0, out.stderr);
    const imported = await manager(["import", "--in", `${dir}/kv.jsonl`], etcdEnv);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /compared: identical/);
    const again = await manager(["import", "--in", `${dir}/kv.jsonl`], etcdEnv);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /not empty/);
    assert.equal((await manager(["check"], etcdEnv)).code, 0);

    // The way back: etcd's export compares equal with the Deno KV file.
    assert.equal((await manager(["export", "--out", `${dir}/etcd.jsonl`], etcdEnv)).code, 0);
    const same = await manager(["compare", "--in", `${dir}/etcd.jsonl`], kvEnv);
    assert.equal(same.code, 0, same.stderr);

    // A manager on etcd serves the migrated state.
    {
      const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: "migrated/" });
      const ports = await Array.fromAsync(store.list(["port"]));
      assert.equal(ports.length, 20);
      // Plant trouble: an orphan bit in blue's pool, and a changed port record.
      const net = (await store.get<{ id: string }>(["network", "acme", "blue"])).value!;
      const chunkKey = ["ipam", net.id, "chunk", 0];
      const chunk = (await store.get<Uint8Array>(chunkKey)).value!.slice();
      chunk[25] |= 0xff;
      const port = ports.find((p) => (p.value as { network: string }).network === "red")!;
      assert.ok(
        (await store.commit([], [
          { type: "set", key: chunkKey, value: chunk },
          { type: "set", key: port.key, value: { ...(port.value as object), node: "w9" } },
        ])).ok,
      );
      store.close();
    }
    const broken = await manager(["check"], etcdEnv);
    assert.equal(broken.code, 1);
    assert.match(
      broken.stderr,
      /network "acme\/blue": index \d+ is set but no port or IP group holds it \(orphaned\)/,
    );
    assert.match(broken.stderr, /chunk 0 holds \d+ set bits, the pool head counts \d+/);
    const differs = await manager(["compare", "--in", `${dir}/kv.jsonl`], etcdEnv);
    assert.equal(differs.code, 1);
    assert.match(differs.stderr, /\["port",.*\]: the values differ/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
