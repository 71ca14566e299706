/**
 * The ports' unit tests: a manager context on a Deno KV file in a temp dir of the test's own
 * (manager/test_support.ts testApp), tenant "acme" with a vxlan network "blue", and the calls the
 * tests make of it, as the handlers make them.
 */
import { type TestApp, testApp, type TestAppOptions } from "../../test_support.ts";
import type { Principal } from "../../auth.ts";
import type { Ctx } from "../context.ts";
import { createContext } from "../../server.ts";
import { createNetwork } from "../networks.ts";
import { withReach } from "../cluster_view.ts";
import type { PortBody, PortTarget } from "./records.ts";

export const ADMIN: Principal = { scope: "admin" };
export const ACME: Principal = { scope: "tenant", tenant: "acme" };

export interface PortsTest {
  t: TestApp;
  ctx: Ctx;
  dir: string;
  /** Port `id` of acme's "blue", asked by `principal` (the admin by default). */
  port(id: string, principal?: Principal): PortTarget;
  /** The same, with a body: a PUT's request. */
  put(id: string, body?: PortBody, principal?: Principal): PortTarget & { body: PortBody };
  /** A node token of the default cluster, with its reach as the app resolves it per request. */
  node(name: string): Promise<Principal>;
  /** Another manager on the same store (a replica): its own caches and pools. */
  replica(): Ctx;
  [Symbol.asyncDispose](): Promise<void>;
}

/** `cidr` is blue's; more options go to the test app (quarantine, clock). */
export async function portsTest(
  cidr = "10.1.0.0/24",
  options: TestAppOptions = {},
): Promise<PortsTest> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-ports-test-" });
  const t = await testApp({ path: `${dir}/manager.kv`, tenants: ["acme"], ...options });
  await createNetwork(t.ctx, {
    principal: ADMIN,
    tenant: "acme",
    body: { name: "blue", type: "vxlan", cidr, public: false },
  });
  const replicas: Ctx[] = [];
  const port = (id: string, principal = ADMIN) => ({
    principal,
    tenant: "acme",
    network: "blue",
    id,
  });
  return {
    t,
    ctx: t.ctx,
    dir,
    port,
    put: (id, body = {}, principal = ADMIN) => ({ ...port(id, principal), body }),
    node: (name) => withReach(t.ctx, { scope: "node", node: name, cluster: "default" }),
    replica: () => {
      const other = createContext(t.ctx.store, {
        vniRanges: ["5000-5999"],
        underlayMtu: 1500,
        quarantineSeconds: t.ctx.settings.quarantineMs / 1000,
      });
      if (t.ctx.clock) other.clock = t.ctx.clock;
      replicas.push(other);
      return other;
    },
    async [Symbol.asyncDispose]() {
      for (const r of replicas) r.feed.close();
      t.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}
