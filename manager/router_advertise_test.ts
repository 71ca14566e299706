/**
 * A router's `advertise` (service/router_advertise.ts): the admin's choice to advertise every
 * network a router connects, with the checks of a network's own flag, all or nothing; attaching
 * advertises, detaching, turning it off and deleting the router withdraw; the ports on the feed
 * carry it to the agents.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";

const ACME = "tenants/acme/networks";
const ROUTERS = "tenants/acme/routers";
const EDGE = `${ROUTERS}/edge`;

/** acme's networks blue, green and red (10.1-3.0.0/24) and a port on each. */
async function world(ranges = ["10.0.0.0/8"]): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"], advertisableRanges: ranges });
  for (const [i, name] of ["blue", "green", "red"].entries()) {
    const cidr = `10.${i + 1}.0.0/24`;
    must(await t.call("POST", ACME, net(name, cidr, { gateway: `10.${i + 1}.0.1` })), 201);
    must(await t.call("PUT", `${ACME}/${name}/ports/p1`, {}, TOKEN.acme), 201);
  }
  return t;
}

/** Each network's advertise and advertisedBy, as the tenant reads them. */
async function advertised(t: TestApp, names = ["blue", "green", "red"]) {
  const out: Record<string, [boolean, string | undefined]> = {};
  for (const name of names) {
    const n = must(await t.call("GET", `${ACME}/${name}`, undefined, TOKEN.acme), 200);
    out[name] = [n.advertise, n.advertisedBy];
  }
  return out;
}

/** The port events on the feed since `cursor`: network name → networkAdvertise. */
async function portsSince(t: TestApp, cursor: string): Promise<Record<string, boolean>> {
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  const out: Record<string, boolean> = {};
  for (const e of page.events) {
    if (e.type === "port") out[e.port.network] = e.port.networkAdvertise === true;
  }
  return out;
}

/** The body of router "edge" advertising `networks`. */
function advertisedEdge(networks: string[]) {
  return { name: "edge", networks, advertise: true };
}

async function cursorOf(t: TestApp): Promise<string> {
  return must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor;
}

Deno.test("attack: a tenant cannot advertise its router (create or replace): 403, nothing changed", async () => {
  using t = await world();
  mustFail(
    await attempt(t)("POST", ROUTERS, advertisedEdge(["blue", "green"]), TOKEN.acme),
    403,
    "forbidden",
    { field: "advertise", message: /only an admin.*every network the router connects/ },
  );
  must(await t.call("POST", ROUTERS, { name: "edge", networks: ["blue"] }, TOKEN.acme), 201);
  mustFail(
    await attempt(t)("PUT", EDGE, { networks: ["blue", "green"], advertise: true }, TOKEN.acme),
    403,
    "forbidden",
    { field: "advertise" },
  );
  assert.equal(must(await t.call("GET", EDGE, undefined, TOKEN.acme), 200).advertise, false);
  assert.deepEqual(await advertised(t), {
    blue: [false, undefined],
    green: [false, undefined],
    red: [false, undefined],
  });
});

Deno.test("router advertise: every connected network is advertised, one attached later too; detached, turned off or deleted: withdrawn; the ports on the feed say so", async () => {
  using t = await world();
  let cursor = await cursorOf(t);
  const made = must(
    await t.call("POST", ROUTERS, advertisedEdge(["blue", "green"]), TOKEN.admin),
    201,
  );
  assert.equal(made.advertise, true);
  assert.deepEqual(await advertised(t), {
    blue: [true, "edge"],
    green: [true, "edge"],
    red: [false, undefined],
  });
  assert.deepEqual(await portsSince(t, cursor), { blue: true, green: true });

  // The tenant attaches red by a replace that leaves advertise out: kept, red advertised.
  cursor = await cursorOf(t);
  const grown = must(
    await t.call("PUT", EDGE, { networks: ["blue", "green", "red"] }, TOKEN.acme),
    200,
  );
  assert.equal(grown.advertise, true);
  assert.deepEqual((await advertised(t)).red, [true, "edge"]);
  assert.deepEqual(await portsSince(t, cursor), { red: true });

  // A network the router advertises keeps it while on the router.
  mustFail(
    await attempt(t)("PATCH", `${ACME}/green`, { advertise: false }, TOKEN.admin),
    409,
    "conflict",
    { field: "advertise", message: /advertised by its router "edge".*off the router/ },
  );
  // Green detached: withdrawn.
  cursor = await cursorOf(t);
  must(await t.call("PUT", EDGE, { networks: ["blue", "red"] }, TOKEN.acme), 200);
  assert.deepEqual((await advertised(t)).green, [false, undefined]);
  assert.deepEqual(await portsSince(t, cursor), { green: false });

  // The tenant turns it off: every network withdrawn.
  must(await t.call("PUT", EDGE, { networks: ["blue", "red"], advertise: false }, TOKEN.acme), 200);
  assert.deepEqual(await advertised(t, ["blue", "red"]), {
    blue: [false, undefined],
    red: [false, undefined],
  });

  // On again; then the router deleted: withdrawn.
  must(await t.call("PUT", EDGE, { networks: ["blue", "red"], advertise: true }, TOKEN.admin), 200);
  cursor = await cursorOf(t);
  must(await t.call("DELETE", EDGE, undefined, TOKEN.acme), 204);
  assert.deepEqual(await advertised(t, ["blue", "red"]), {
    blue: [false, undefined],
    red: [false, undefined],
  });
  assert.deepEqual(await portsSince(t, cursor), { blue: false, red: false });
});

Deno.test("router advertise: a network advertised on its own stays advertised when it leaves the router", async () => {
  using t = await world();
  must(await t.call("PATCH", `${ACME}/blue`, { advertise: true }, TOKEN.admin), 200);
  must(
    await t.call("POST", ROUTERS, advertisedEdge(["blue", "green"]), TOKEN.admin),
    201,
  );
  // Green asked for on its own while the router advertises it: its own from now on.
  must(await t.call("PATCH", `${ACME}/green`, { advertise: true }, TOKEN.admin), 200);
  must(await t.call("DELETE", EDGE, undefined, TOKEN.acme), 204);
  assert.deepEqual(await advertised(t, ["blue", "green"]), {
    blue: [true, undefined],
    green: [true, undefined],
  });
});

Deno.test("attack: a router cannot advertise a network outside the advertisable ranges, nor one overlapping another tenant's advertised network: the error names it, nothing is half-advertised", async () => {
  using t = await world(["10.1.0.0/16", "10.2.0.0/16"]);
  // red (10.3.0.0/24) is outside the ranges.
  mustFail(
    await attempt(t)("POST", ROUTERS, advertisedEdge(["blue", "red"]), TOKEN.admin),
    400,
    "invalid_request",
    { field: "advertise", message: /network "red" \(networks\[1\]\).*10\.3\.0\.0\/24 is outside/ },
  );
  must(await t.call("POST", ROUTERS, { name: "edge", networks: ["blue", "red"] }, TOKEN.acme), 201);
  mustFail(
    await attempt(t)("PUT", EDGE, { networks: ["blue", "red"], advertise: true }, TOKEN.admin),
    400,
    "invalid_request",
    { field: "advertise", message: /network "red"/ },
  );
  // globex advertises 10.2.0.0/24 first; acme's green has the same CIDR.
  must(
    await t.call(
      "POST",
      "tenants/globex/networks",
      net("same", "10.2.0.0/24", { gateway: "10.2.0.1", advertise: true }),
      TOKEN.admin,
    ),
    201,
  );
  mustFail(
    await attempt(t)("PUT", EDGE, { networks: ["blue", "green"], advertise: true }, TOKEN.admin),
    409,
    "conflict",
    { field: "advertise", message: /network "green" \(networks\[1\]\).*overlaps.*nothing was/ },
  );
  // An advertised router cannot take it in either.
  must(await t.call("PUT", EDGE, { networks: ["blue"], advertise: true }, TOKEN.admin), 200);
  mustFail(
    await attempt(t)("PUT", EDGE, { networks: ["blue", "green"] }, TOKEN.acme),
    409,
    "conflict",
    { field: "advertise", message: /network "green"/ },
  );
  assert.deepEqual(await advertised(t), {
    blue: [true, "edge"],
    green: [false, undefined],
    red: [false, undefined],
  });
});
