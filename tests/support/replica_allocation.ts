/**
 * Allocation through manager replicas on one etcd, for tests/etcd_replica*_test.ts: clients that
 * PUT ports in turn to the replicas, and checks that what they were answered is what is stored.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { api } from "./etcd.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

export interface Tally {
  ok: Map<string, string>;
  failures: string[];
}

/**
 * `clients` workers PUT ports p0..p(total-1) between them, each request to the next replica in
 * turn. A connection error (a killed replica) sends the same PUT to the next one, as a client
 * with several manager URLs does; any other failure must be an API error body.
 */
export async function allocate(
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

export function assertExact(tally: Tally, listed: { id: string; ip: string }[]) {
  const ips = [...tally.ok.values()];
  assert.equal(new Set(ips).size, ips.length, "no address was handed out twice");
  const stored = new Map(listed.map((p) => [p.id, p.ip]));
  assert.equal(new Set(listed.map((p) => p.ip)).size, listed.length, "no address stored twice");
  for (const [id, ip] of tally.ok) assert.equal(stored.get(id), ip, `port ${id} is recorded`);
}

/** `manager check` on the store under `prefix`: it must find it consistent; its report. */
export async function check(endpoints: string[], prefix: string) {
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

/** Tenant acme and its network blue of `cidr`, through the replica at `url`. */
export async function setup(url: string, cidr: string) {
  assert.equal((await api(url, "POST", "tenants", { name: "acme" })).status, 201);
  const r = await api(url, "POST", "tenants/acme/networks", { name: "blue", cidr });
  assert.equal(r.status, 201, JSON.stringify(r.body));
}
