/**
 * Manager replicas on one etcd: three processes serve the same API at once and allocation stays
 * exact (20,000 addresses from 16 clients, no address twice, every success recorded, every failure
 * an API error); a replica SIGKILLed mid-allocation leaves no orphaned bit, and a feed follower
 * carries on from its cursor on another replica.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { ADMIN_TOKEN, api, type Replica, startEtcd, startReplica } from "./support/etcd.ts";

const ROOT = new URL("../", import.meta.url).pathname;

interface Tally {
  ok: Map<string, string>;
  failures: string[];
}

/**
 * `clients` workers PUT ports p0..p(total-1) between them, each request to the next replica in
 * turn. A connection error (a killed replica) sends the same PUT to the next one, as a client
 * with several manager URLs does; any other failure must be an API error body.
 */
async function allocate(
  urls: () => string[],
  network: string,
  total: number,
  clients: number,
  onProgress?: (done: number) => void,
): Promise<Tally> {
  const tally: Tally = { ok: new Map(), failures: [] };
  let next = 0;
  let turn = 0;
  const worker = async () => {
    for (let i = next++; i < total; i = next++) {
      const id = `p${i}`;
      for (let attempt = 0;; attempt++) {
        const list = urls();
        const url = list[turn++ % list.length];
        let r;
        try {
          r = await api(url, "PUT", `tenants/acme/networks/${network}/ports/${id}`, { node: "w1" });
        } catch (err) {
          if (attempt < 10) continue;
          throw err;
        }
        if (r.status === 201 || r.status === 200) {
          tally.ok.set(id, r.body.ip);
        } else {
          assert.ok(
            typeof r.body?.error?.code === "string" && r.body.error.message.length > 0,
            `a failure is an API error: ${r.status} ${JSON.stringify(r.body)}`,
          );
          tally.failures.push(`${r.status} ${r.body.error.code}: ${r.body.error.message}`);
        }
        break;
      }
      onProgress?.(tally.ok.size);
    }
  };
  await Promise.all(Array.from({ length: clients }, worker));
  return tally;
}

function assertExact(tally: Tally, listed: { id: string; ip: string }[]) {
  const ips = [...tally.ok.values()];
  assert.equal(new Set(ips).size, ips.length, "no address was handed out twice");
  const stored = new Map(listed.map((p) => [p.id, p.ip]));
  assert.equal(new Set(listed.map((p) => p.ip)).size, listed.length, "no address stored twice");
  for (const [id, ip] of tally.ok) assert.equal(stored.get(id), ip, `port ${id} is recorded`);
}

async function check(endpoints: string[], prefix: string) {
  const r = await run([Deno.execPath(), "run", "-A", `${ROOT}manager/main.ts`, "check"], {
    env: {
      KNITTER_MANAGER_ETCD_ENDPOINTS: endpoints.join(","),
      KNITTER_MANAGER_ETCD_PREFIX: prefix,
    },
    check: false,
  });
  assert.equal(r.code, 0, `check found problems:\n${r.stderr}`);
  return r.stdout;
}

async function setup(url: string, cidr: string) {
  assert.equal((await api(url, "POST", "tenants", { name: "acme" })).status, 201);
  const r = await api(url, "POST", "tenants/acme/networks", { name: "blue", cidr });
  assert.equal(r.status, 201, JSON.stringify(r.body));
}

Deno.test("three replicas, 16 clients, 20,000 addresses: exact", async () => {
  await using etcd = await startEtcd();
  const dir = await Deno.makeTempDir({ prefix: "knitter-replicas-" });
  const replicas: Replica[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      replicas.push(await startReplica({ endpoints: etcd.endpoints, prefix: "r3/", dir }));
    }
    const urls = replicas.map((r) => r.url);
    await setup(urls[0], "10.8.0.0/16");
    const tally = await allocate(() => urls, "blue", 20_000, 16);
    assert.deepEqual(tally.failures, [], "a /16 holds 20,000 ports: nothing fails");
    assert.equal(tally.ok.size, 20_000);
    const listed = await api(urls[2], "GET", "tenants/acme/networks/blue/ports");
    assertExact(tally, listed.body.items);
    const net = await api(urls[1], "GET", "tenants/acme/networks/blue");
    assert.equal(net.body.usage?.used ?? net.body.used, 20_000);
    assert.match(await check(etcd.endpoints, "r3/"), /consistent \(1 networks, 20000 ports\)/);
  } finally {
    for (const r of replicas) await r.kill("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a replica SIGKILLed mid-allocation: no orphaned bit; the feed goes on elsewhere", async () => {
  await using etcd = await startEtcd();
  const dir = await Deno.makeTempDir({ prefix: "knitter-replicas-" });
  const replicas: Replica[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      replicas.push(await startReplica({ endpoints: etcd.endpoints, prefix: "kill/", dir }));
    }
    await setup(replicas[0].url, "10.9.0.0/20");
    // A follower takes its cursor from the replica that will die.
    const start = await fetch(`${replicas[0].url}/api/v1/feed`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    }).then((r) => r.json());
    let alive = replicas.map((r) => r.url);
    let killed: Promise<void> | undefined;
    const tally = await allocate(() => alive, "blue", 3000, 8, (done) => {
      if (done >= 1000 && !killed) {
        alive = [replicas[1].url];
        killed = replicas[0].kill("SIGKILL");
      }
    });
    await killed;
    assert.deepEqual(tally.failures, []);
    assert.equal(tally.ok.size, 3000);
    const listed = await api(replicas[1].url, "GET", "tenants/acme/networks/blue/ports");
    assertExact(tally, listed.body.items);
    assert.equal(listed.body.items.length, 3000, "no port beyond those answered");
    assert.match(await check(etcd.endpoints, "kill/"), /consistent/);

    // The follower continues on the surviving replica from its old cursor: every port arrives.
    const seen = new Set<string>();
    let cursor = start.cursor;
    while (seen.size < 3000) {
      const page = await fetch(`${replicas[1].url}/api/v1/feed?after=${cursor}&timeout=0`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      }).then((r) => r.json());
      assert.ok(page.events, JSON.stringify(page));
      if (page.events.length === 0) break;
      for (const e of page.events) if (e.type === "port" && e.op === "put") seen.add(e.port.id);
      cursor = page.cursor;
    }
    assert.equal(seen.size, 3000);
  } finally {
    for (const r of replicas) await r.kill("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});
