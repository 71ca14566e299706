/**
 * Security groups through the API: the hostile tenant's attempts first (each refused, nothing
 * written, the victim unharmed), then the checks that name the field, the limits, the references
 * that keep a group from being deleted, and the feed events agents follow.
 */
import assert from "node:assert/strict";
import { attempt, must, mustFail, net, type TestApp, testApp, TOKEN } from "./test_support.ts";
import { keys } from "./model.ts";
import type { Entry, Key, ListOptions } from "./store/store.ts";
import { MAX_GROUPS_PER_TENANT, MAX_RULES_PER_GROUP } from "./security_group_schema.ts";

const ACME = "tenants/acme/security-groups";
const GLOBEX = "tenants/globex/security-groups";
const BLUE = "tenants/acme/networks/blue";
const WEB = { direction: "ingress", protocol: "tcp", ports: "80" };

/** acme with network blue and group web; globex with network red and group secret. */
async function world(): Promise<TestApp> {
  const t = await testApp({ tenants: ["acme", "globex"] });
  must(await t.call("POST", "tenants/acme/networks", net("blue", "10.1.0.0/24")), 201);
  must(await t.call("POST", "tenants/globex/networks", net("red", "10.9.0.0/24")), 201);
  must(await t.call("POST", ACME, { name: "web", rules: [WEB] }, TOKEN.acme), 201);
  must(await t.call("POST", GLOBEX, { name: "secret", rules: [] }, TOKEN.globex), 201);
  return t;
}

Deno.test("attack: a tenant cannot read, change or delete another tenant's security groups", async () => {
  using t = await world();
  const req = attempt(t);
  mustFail(await req("GET", GLOBEX, undefined, TOKEN.acme), 403, "forbidden");
  mustFail(await req("GET", `${GLOBEX}/secret`, undefined, TOKEN.acme), 403, "forbidden");
  mustFail(await req("PUT", `${GLOBEX}/secret`, { rules: [] }, TOKEN.acme), 403, "forbidden");
  mustFail(await req("DELETE", `${GLOBEX}/secret`, undefined, TOKEN.acme), 403, "forbidden");
  mustFail(await req("POST", GLOBEX, { name: "x", rules: [] }, TOKEN.acme), 403, "forbidden");
  // The list across tenants is the agents' (node tokens) and the admin's.
  mustFail(await req("GET", "security-groups", undefined, TOKEN.acme), 403, "forbidden");
  const all = must(await t.call("GET", "security-groups", undefined, TOKEN.worker1), 200);
  assert.deepEqual(all.items.map((g: { name: string }) => g.name).sort(), ["secret", "web"]);
});

Deno.test("attack: another tenant's group or network named as a peer, by a port or a network is absent (404)", async () => {
  using t = await world();
  const req = attempt(t);
  const peer = (p: unknown) => ({ name: "x", rules: [{ ...WEB, peer: p }] });
  mustFail(await req("POST", ACME, peer({ group: "secret" }), TOKEN.acme), 404, "not_found", {
    field: "rules[0].peer.group",
    message: /"secret" does not exist in tenant "acme"/,
  });
  mustFail(await req("POST", ACME, peer({ network: "red" }), TOKEN.acme), 404, "not_found", {
    field: "rules[0].peer.network",
  });
  mustFail(
    await req("PUT", `${BLUE}/ports/p1`, { securityGroups: ["secret"] }, TOKEN.acme),
    404,
    "not_found",
    { field: "securityGroups[0]", message: /"secret" does not exist in tenant "acme"/ },
  );
  mustFail(
    await req(
      "POST",
      "tenants/acme/networks",
      net("green", "10.2.0.0/24", {
        securityGroups: ["secret"],
      }),
      TOKEN.acme,
    ),
    404,
    "not_found",
    { field: "securityGroups[0]" },
  );
  mustFail(
    await req("PATCH", BLUE, { securityGroups: ["secret"] }, TOKEN.acme),
    404,
    "not_found",
    { field: "securityGroups[0]" },
  );
  // globex's group is untouched and named by nobody of acme.
  must(await t.call("DELETE", `${GLOBEX}/secret`, undefined, TOKEN.globex), 204);
});

Deno.test("attack: a tenant cannot flood the manager with groups, rules or group names", async () => {
  using t = await world();
  const req = attempt(t);
  const rules = Array.from({ length: MAX_RULES_PER_GROUP + 1 }, () => WEB);
  mustFail(await req("POST", ACME, { name: "big", rules }, TOKEN.acme), 400, "invalid_request", {
    field: "rules",
  });
  const names = Array.from({ length: 9 }, (_, i) => `g${i}`);
  mustFail(
    await req("PUT", `${BLUE}/ports/p1`, { securityGroups: names }, TOKEN.acme),
    400,
    "invalid_request",
    { field: "securityGroups" },
  );
  mustFail(
    await req("PUT", `${BLUE}/ports/p1`, { securityGroups: ["web", "web"] }, TOKEN.acme),
    400,
    "invalid_request",
    { field: "securityGroups" },
  );
  for (let i = 1; i < MAX_GROUPS_PER_TENANT; i++) {
    must(await t.call("POST", ACME, { name: `g${i}`, rules: [] }, TOKEN.acme), 201);
  }
  mustFail(
    await req("POST", ACME, { name: "one-more", rules: [] }, TOKEN.acme),
    403,
    "quota_exceeded",
    {
      message: /256 security groups/,
    },
  );
});

Deno.test("security groups: bad rules are refused naming the field", async () => {
  using t = await world();
  const req = attempt(t);
  const bad: [unknown, string, RegExp][] = [
    [{ direction: "in", protocol: "tcp" }, "rules[0].direction", /ingress/],
    [{ direction: "ingress", protocol: "sctp" }, "rules[0].protocol", /tcp/],
    [{ direction: "ingress", protocol: "icmp", ports: "80" }, "rules[0].ports", /tcp and udp only/],
    [{ direction: "ingress", protocol: "tcp", ports: "90-80" }, "rules[0].ports", /range/],
    [{ direction: "ingress", protocol: "tcp", ports: "70000" }, "rules[0].ports", /1-65535/],
    [{ direction: "ingress", protocol: "udp", ports: "http" }, "rules[0].ports", /range/],
    [{ ...WEB, peer: { cidr: "10.0.0.0/33" } }, "rules[0].peer.cidr", /10.0.0.0\/33/],
    [{ ...WEB, peer: { cidr: "10.0.0.7/24" } }, "rules[0].peer.cidr", /host bits/],
    [{ ...WEB, peer: { cidr: "10.0.0.0/24", group: "web" } }, "rules[0].peer", /./],
    [
      { direction: "egress", protocol: "icmp", peer: { cidr: "fd00::/64" } },
      "rules[0].peer.cidr",
      /IPv6/,
    ],
    [{ ...WEB, peer: { group: "nope" } }, "rules[0].peer.group", /"nope" does not exist/],
  ];
  for (const [rule, field, message] of bad) {
    const r = await req("POST", ACME, { name: "x", rules: [rule] }, TOKEN.acme);
    assert.ok(r.status === 400 || r.status === 404, JSON.stringify(r.body));
    assert.ok(r.body.error.field?.startsWith(field), `${field}: ${JSON.stringify(r.body)}`);
    assert.match(r.body.error.message, message);
  }
});

Deno.test("security groups: create, get, list, replace rules; network peers carry their CIDR", async () => {
  using t = await world();
  const rules = [
    { direction: "ingress", protocol: "tcp", ports: "8000-8100", peer: { group: "db" } },
    { direction: "egress", protocol: "udp", ports: "53", peer: { network: "blue" } },
    { direction: "egress", protocol: "icmp", peer: { cidr: "10.1.0.7/32" } },
  ];
  const g = must(
    await t.call("POST", ACME, { name: "db", description: "d", rules }, TOKEN.acme),
    201,
  );
  assert.deepEqual(g.rules[1].peer, { network: "blue", cidr: "10.1.0.0/24" });
  assert.deepEqual(g.rules[2].peer, { cidr: "10.1.0.7/32" });
  assert.equal(g.tenant, "acme");
  assert.deepEqual(must(await t.call("GET", `${ACME}/db`, undefined, TOKEN.acme), 200), g);
  const list = must(await t.call("GET", ACME, undefined, TOKEN.acme), 200);
  assert.deepEqual(list.items.map((x: { name: string }) => x.name), ["db", "web"]);
  const up = must(await t.call("PUT", `${ACME}/db`, { rules: [WEB] }, TOKEN.acme), 200);
  assert.deepEqual(up.rules, [WEB]);
  assert.equal(up.description, "d");
  mustFail(
    await t.call("POST", ACME, { name: "db", rules: [] }, TOKEN.acme),
    409,
    "already_exists",
    {
      field: "name",
    },
  );
  mustFail(await t.call("GET", `${ACME}/nope`, undefined, TOKEN.acme), 404, "not_found");
});

Deno.test("security groups: ports and networks name them; delete is refused (409, naming who) while named", async () => {
  using t = await world();
  must(
    await t.call(
      "POST",
      ACME,
      { name: "app", rules: [{ ...WEB, peer: { group: "web" } }] },
      TOKEN.acme,
    ),
    201,
  );
  const p = must(
    await t.call("PUT", `${BLUE}/ports/p1`, { securityGroups: ["web"] }, TOKEN.acme),
    201,
  );
  assert.deepEqual(p.securityGroups, ["web"]);
  mustFail(await t.call("DELETE", `${ACME}/web`, undefined, TOKEN.acme), 409, "in_use", {
    message: /port "p1" of network "blue".*security group "app"/,
  });
  // A second PUT changes the port's groups; [] leaves it with its network's.
  const again = must(
    await t.call("PUT", `${BLUE}/ports/p1`, { securityGroups: [] }, TOKEN.acme),
    200,
  );
  assert.equal(again.securityGroups, undefined);
  const n = must(await t.call("PATCH", BLUE, { securityGroups: ["app"] }, TOKEN.acme), 200);
  assert.deepEqual(n.securityGroups, ["app"]);
  const viewed = must(await t.call("GET", `${BLUE}/ports/p1`, undefined, TOKEN.acme), 200);
  assert.deepEqual(viewed.networkSecurityGroups, ["app"]);
  mustFail(await t.call("DELETE", `${ACME}/app`, undefined, TOKEN.acme), 409, "in_use", {
    message: /network "blue"/,
  });
  must(await t.call("PATCH", BLUE, { securityGroups: null }, TOKEN.acme), 200);
  must(await t.call("DELETE", `${ACME}/app`, undefined, TOKEN.acme), 204);
  must(await t.call("DELETE", `${ACME}/web`, undefined, TOKEN.acme), 204);
});

Deno.test("security groups: changes reach the feed (groups, and ports when their network's defaults change)", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/p1`, {}, TOKEN.acme), 201);
  const cursor = must(await t.call("GET", "feed", undefined, TOKEN.worker1), 200).cursor;
  must(await t.call("PUT", `${ACME}/web`, { rules: [] }, TOKEN.acme), 200);
  must(await t.call("PATCH", BLUE, { securityGroups: ["web"] }, TOKEN.acme), 200);
  const page = must(
    await t.call("GET", `feed?after=${cursor}&timeout=0`, undefined, TOKEN.worker1),
    200,
  );
  const seen = page.events.map((e: { type: string; op: string }) => `${e.type}:${e.op}`);
  assert.deepEqual(seen, ["securityGroup:put", "port:put"]);
  assert.deepEqual(page.events[0].securityGroup.rules, []);
  assert.deepEqual(page.events[1].port.networkSecurityGroups, ["web"]);
});

Deno.test("attack: a tenant deleted with its security groups cannot hand them to a tenant made again under its name", async () => {
  using t = await world();
  must(await t.call("DELETE", `${GLOBEX}/secret`, undefined, TOKEN.globex), 204);
  must(await t.call("DELETE", "tenants/globex/networks/red"), 204);
  must(await t.call("POST", GLOBEX, { name: "left", rules: [] }, TOKEN.globex), 201);
  mustFail(await attempt(t)("DELETE", "tenants/globex"), 409, "in_use", {
    message: /security groups "left"/,
  });
  must(await t.call("DELETE", `${GLOBEX}/left`, undefined, TOKEN.globex), 204);
  must(await t.call("DELETE", "tenants/globex"), 204);
  must(await t.call("POST", "tenants", { name: "globex" }), 201);
  const list = must(await t.call("GET", GLOBEX, undefined, TOKEN.globex), 200);
  assert.deepEqual(list.items, [], "the tenant made again starts without groups");
});

Deno.test("a group's delete racing PUTs that name it leaves either the group or no port, network or rule naming it", async () => {
  for (let round = 0; round < 5; round++) {
    using t = await world();
    must(await t.call("POST", ACME, { name: "doomed", rules: [WEB] }, TOKEN.acme), 201);
    const naming = [
      ...Array.from(
        { length: 12 },
        (_, i) => t.call("PUT", `${BLUE}/ports/r${i}`, { securityGroups: ["doomed"] }, TOKEN.acme),
      ),
      t.call("POST", "tenants/acme/networks", {
        ...net("green", "10.2.0.0/24"),
        securityGroups: ["doomed"],
      }, TOKEN.acme),
      t.call("POST", ACME, {
        name: "fan",
        rules: [{ ...WEB, peer: { group: "doomed" } }],
      }, TOKEN.acme),
    ];
    const deleted = await t.call("DELETE", `${ACME}/doomed`, undefined, TOKEN.acme);
    const answers = await Promise.all(naming);
    for (const a of answers) {
      assert.ok([200, 201, 404, 409].includes(a.status), JSON.stringify(a.body));
    }
    const ports = must(await t.call("GET", "ports?tenant=acme"), 200).items
      .filter((p: { securityGroups?: string[] }) => p.securityGroups?.includes("doomed"));
    const nets = must(await t.call("GET", "tenants/acme/networks"), 200).items
      .filter((n: { securityGroups?: string[] }) => n.securityGroups?.includes("doomed"));
    const groups = must(await t.call("GET", ACME, undefined, TOKEN.acme), 200).items
      .filter((g: { rules: { peer?: { group?: string } }[] }) =>
        g.rules.some((r) => r.peer?.group === "doomed")
      );
    if (deleted.status === 204) {
      assert.deepEqual([ports, nets, groups], [[], [], []], `round ${round}: nothing names it`);
    } else {
      assert.equal(deleted.status, 409, JSON.stringify(deleted.body));
      assert.ok(ports.length + nets.length + groups.length > 0, "refused for a user");
      const kept = must(await t.call("GET", `${ACME}/doomed`, undefined, TOKEN.acme), 200);
      assert.equal(kept.deletingSince, undefined, "a refused delete leaves the group as it was");
      must(
        await t.call("PUT", `${BLUE}/ports/after`, { securityGroups: ["doomed"] }, TOKEN.acme),
        201,
      );
    }
  }
});

Deno.test("a delete cut short (the manager died after marking the group) holds its mark a minute at most, and the next DELETE takes it back", async () => {
  using t = await world();
  must(await t.call("PUT", `${BLUE}/ports/p1`, { securityGroups: ["web"] }, TOKEN.acme), 201);
  // What a manager that died between the mark and the delete left in the store.
  const key = keys.securityGroup("acme", "web");
  const leave = async (since: Date) => {
    const e = await t.store.get<Record<string, unknown>>(key);
    const marked = { ...e.value, deletingSince: since.toISOString(), deletingBy: "dead" };
    await t.store.commit([], [{ type: "set", key, value: marked }]);
  };
  await leave(new Date());
  mustFail(
    await t.call("PUT", `${BLUE}/ports/p2`, { securityGroups: ["web"] }, TOKEN.acme),
    409,
    "conflict",
    { field: "securityGroups[0]", message: /being deleted/ },
  );
  mustFail(await t.call("DELETE", `${ACME}/web`, undefined, TOKEN.acme), 409, "in_use");
  const back = must(await t.call("GET", `${ACME}/web`, undefined, TOKEN.acme), 200);
  assert.equal(back.deletingSince, undefined);
  must(await t.call("PUT", `${BLUE}/ports/p2`, { securityGroups: ["web"] }, TOKEN.acme), 201);
  // Left an hour ago, and no one deleted again: it refuses nothing.
  await leave(new Date(Date.now() - 3_600_000));
  must(await t.call("PUT", `${BLUE}/ports/p3`, { securityGroups: ["web"] }, TOKEN.acme), 201);
});

Deno.test("two deletes: the refused one takes back only its own mark, so no PUT names the group the other deletes", async () => {
  using t = await world();
  must(await t.call("POST", ACME, { name: "doomed", rules: [] }, TOKEN.acme), 201);
  must(await t.call("PUT", `${BLUE}/ports/p1`, { securityGroups: ["doomed"] }, TOKEN.acme), 201);
  // Each delete is held where it lists the tenant's groups, the last look for users.
  const held = [Promise.withResolvers<void>(), Promise.withResolvers<void>()];
  const reached = [Promise.withResolvers<void>(), Promise.withResolvers<void>()];
  const store = t.ctx.store;
  const list = store.list.bind(store);
  let n = 0;
  store.list = <T>(prefix: Key, options?: ListOptions): AsyncIterable<Entry<T>> => {
    if (prefix[0] !== keys.securityGroups()[0] || n >= held.length) return list(prefix, options);
    const at = n++;
    return (async function* () {
      reached[at].resolve();
      await held[at].promise;
      yield* list<T>(prefix, options);
    })();
  };
  const first = t.call("DELETE", `${ACME}/doomed`, undefined, TOKEN.acme);
  await reached[0].promise; // the first has seen p1
  must(await t.call("PUT", `${BLUE}/ports/p1`, { securityGroups: [] }, TOKEN.acme), 200);
  const second = t.call("DELETE", `${ACME}/doomed`, undefined, TOKEN.acme);
  await reached[1].promise; // the second has seen no port
  held[0].resolve();
  mustFail(await first, 409, "in_use");
  const p2 = await t.call("PUT", `${BLUE}/ports/p2`, { securityGroups: ["doomed"] }, TOKEN.acme);
  held[1].resolve();
  const gone = (await second).status === 204;
  const named = p2.status === 201;
  assert.ok(!(gone && named), "a port was let name the group the second delete then deleted");
  assert.ok(gone, "the second delete, which saw no user, went through");
  mustFail(p2, 409, "conflict", { field: "securityGroups[0]" });
});
