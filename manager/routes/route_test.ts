/**
 * A typed route (route.ts): what its handler gets, in which order a request is read, and (checked
 * by the type checker when this file is) what its handler may not do.
 */
import assert from "node:assert/strict";
import { ApiError } from "../errors.ts";
import * as S from "../schemas.ts";
import * as quotas from "../service/quotas.ts";
import { testApp } from "../test_support.ts";
import { TokenTable } from "../auth.ts";
import { type Arrival, noContent, ok, route } from "./route.ts";

const META = {
  summary: "a route of this test",
  access: "tenant",
  ok: { status: 200, description: "what it saw" },
} as const;

/** An arrival as app.ts makes it, recording the bodies read and the requests scoped. */
async function arrival(
  given: { params?: Record<string, string>; query?: Record<string, string>; body?: unknown },
) {
  const t = await testApp();
  const log: { reads: number; scoped: unknown[] } = { reads: 0, scoped: [] };
  const a: Arrival = {
    ctx: t.ctx,
    principal: { scope: "admin" },
    tokens: new TokenTable([]),
    params: given.params ?? {},
    query: given.query ?? {},
    readBody: () => {
      log.reads++;
      return Promise.resolve(given.body);
    },
    scope: (request) => log.scoped.push(structuredClone(request)),
  };
  return { a, log, [Symbol.dispose]: () => t.close() };
}

const networkCreate = route({ ...META, method: "POST", path: "/tenants/{tenant}/networks" })
  .query(S.FeedQuery)
  .body(S.NetworkCreate)
  .handle(({ params, query, body }) => Promise.resolve(ok({ params, query, body })));

Deno.test("route: the handler gets the path's parameters, and the query and body as their schemas output them", async () => {
  using r = await arrival({
    params: { tenant: "acme" },
    query: { timeout: "7" },
    body: { name: "blue", cidr: "10.1.0.0/24" },
  });
  const reply = await networkCreate.run(r.a);
  const expected = {
    params: { tenant: "acme" },
    query: { timeout: 7 },
    body: {
      name: "blue",
      cidr: "10.1.0.0/24",
      type: "vxlan",
      public: false,
      egress: false,
      hostAccess: false,
      advertise: false,
      dataPlane: "ovs",
    },
  };
  assert.deepEqual(reply, { status: 200, body: expected });
  assert.equal(r.log.reads, 1);
  assert.deepEqual(r.log.scoped, [expected], "names are scoped once, in what the schemas output");
});

Deno.test("route: a bad query is a 400 naming its field, answered before the body is read", async () => {
  using r = await arrival({ params: { tenant: "acme" }, query: { timeout: "61" }, body: {} });
  await assert.rejects(networkCreate.run(r.a), (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, 400);
    assert.equal(err.field, "query.timeout");
    return true;
  });
  assert.equal(r.log.reads, 0);
  assert.deepEqual(r.log.scoped, []);
});

Deno.test("route: a bad body is a 400 naming its field; nothing is scoped or handled", async () => {
  using r = await arrival({
    params: { tenant: "acme" },
    body: { name: "blue", cidr: "x", mtu: 1 },
  });
  await assert.rejects(networkCreate.run(r.a), (err: unknown) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.field, "mtu");
    return true;
  });
  assert.deepEqual(r.log.scoped, []);
});

Deno.test("route: a route without a body never reads one, and refuses any query parameter", async () => {
  const plain = route({ ...META, method: "DELETE", path: "/tenants/{tenant}/quota" })
    .handle(() => Promise.resolve(noContent));
  assert.equal(plain.body, undefined, "the document shows no request body");
  {
    using r = await arrival({ params: { tenant: "acme" }, body: { sent: "anyway" } });
    assert.deepEqual(await plain.run(r.a), { status: 204 });
    assert.equal(r.log.reads, 0);
  }
  using r = await arrival({ params: { tenant: "acme" }, query: { all: "1" } });
  await assert.rejects(plain.run(r.a), /query\.all: unknown field/);
});

Deno.test("route: served without a parameter its path names, it fails as a bug, not as a 4xx", async () => {
  using r = await arrival({ params: {} });
  await assert.rejects(
    networkCreate.run(r.a),
    (err: unknown) => err instanceof Error && !(err instanceof ApiError),
  );
});

// What the type checker refuses (deno test checks this file before it runs it): each line under
// an expect-error directive must be a type error, or the check fails ("Unused directive").
export const REFUSED = [
  route({ ...META, method: "PUT", path: "/tenants/{tenant}/quota" })
    .body(S.TenantCreate)
    // @ts-expect-error: a tenant's creation is not a quota's limits
    .handle(async ({ ctx, params, body }) => ok(await quotas.setQuota(ctx, params.tenant, body))),
  route({ ...META, method: "GET", path: "/tenants/{tenant}/quota" })
    // @ts-expect-error: the path names no network
    .handle(async ({ ctx, params }) => ok(await quotas.getQuota(ctx, params.network))),
  route({ ...META, method: "GET", path: "/tenants/{tenant}/quota" })
    // @ts-expect-error: a route without a body has none to pass on
    .handle(async ({ ctx, params, body }) => ok(await quotas.setQuota(ctx, params.tenant, body))),
  // @ts-expect-error: "owner" is no path parameter params.ts checks
  route({ ...META, method: "GET", path: "/tenants/{owner}" }),
];
