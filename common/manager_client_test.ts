import assert from "node:assert/strict";
import { FakeClock, settle } from "./clock_fake.ts";
import {
  ManagerClient,
  ManagerError,
  ManagerThrottledError,
  THROTTLE_RETRY,
} from "./manager_client.ts";

/** A manager stand-in that answers an empty port list and records the URLs asked. */
function portsServer(): { url: string; asked: string[]; [Symbol.asyncDispose](): Promise<void> } {
  const asked: string[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const u = new URL(req.url);
    asked.push(u.pathname + u.search);
    return Response.json({ items: [] });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    asked,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test("ManagerClient.listPorts() asks the manager to filter: by node, pod and tenant", async () => {
  await using server = portsServer();
  const client = new ManagerClient(server.url, "t");
  try {
    await client.listPorts();
    await client.listPorts({ node: "n1" });
    await client.listPorts({ pod: "acme/web-0", tenant: "acme" });
  } finally {
    client.close();
  }
  assert.deepEqual(server.asked, [
    "/api/v1/ports",
    "/api/v1/ports?node=n1",
    "/api/v1/ports?pod=acme%2Fweb-0&tenant=acme",
  ]);
});

/**
 * A manager stand-in over its budget: it answers the first `throttled` requests 429 with
 * `Retry-After` (as manager/fairness.ts does), then the empty list; records the requests.
 */
function throttlingServer(throttled: number, retryAfterS = 2) {
  let asked = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, () => {
    if (++asked > throttled) return Response.json({ items: [] });
    return Response.json({
      error: {
        code: "too_many_requests",
        message: "tenant acme has 4 lists in progress, its limit; retry when one is answered",
      },
    }, { status: 429, headers: { "retry-after": String(retryAfterS) } });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    get asked() {
      return asked;
    },
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

/** Settles `p`, moving the fake clock on whenever the client sleeps on it. */
async function driven<T>(clock: FakeClock, p: Promise<T>): Promise<PromiseSettledResult<T>> {
  const settled = Promise.allSettled([p]).then(([r]) => r);
  let result: PromiseSettledResult<T> | undefined;
  settled.then((r) => result = r);
  while (result === undefined) {
    if (clock.sleeping > 0) await clock.advance(1000);
    else await settle();
  }
  return result;
}

Deno.test("ManagerClient waits out a 429's Retry-After and then gets its answer", async () => {
  await using server = throttlingServer(1, 2);
  const clock = new FakeClock();
  const client = new ManagerClient(server.url, "t", { clock });
  try {
    const r = await driven(clock, client.listPorts());
    assert.equal(r.status, "fulfilled");
    assert.deepEqual((r as PromiseFulfilledResult<unknown>).value, []);
  } finally {
    client.close();
  }
  assert.equal(server.asked, 2);
  // The manager said 2 s: the client waited that, not its own shorter backoff.
  assert.deepEqual(clock.slept, [2000]);
});

Deno.test("ManagerClient gives up on a manager that answers 429 forever, with an error naming the limit", async () => {
  await using server = throttlingServer(Infinity, 1);
  const clock = new FakeClock();
  const client = new ManagerClient(server.url, "t", { clock });
  let r;
  try {
    r = await driven(clock, client.listPorts());
  } finally {
    client.close();
  }
  assert.equal(r.status, "rejected");
  const err = (r as PromiseRejectedResult).reason;
  assert.ok(err instanceof ManagerThrottledError, String(err));
  assert.ok(err instanceof ManagerError);
  assert.equal(err.status, 429);
  assert.equal(err.code, "too_many_requests");
  assert.equal(err.attempts, THROTTLE_RETRY.attempts);
  assert.match(err.message, /4 lists in progress, its limit/);
  assert.match(err.message, new RegExp(`${THROTTLE_RETRY.attempts} tries in a row`));
  // Bounded: as many requests as attempts, one wait fewer, none longer than the bound.
  assert.equal(server.asked, THROTTLE_RETRY.attempts);
  assert.equal(clock.slept.length, THROTTLE_RETRY.attempts - 1);
  for (const ms of clock.slept) assert.ok(ms >= 1000 && ms <= THROTTLE_RETRY.maxMs, String(ms));
});
