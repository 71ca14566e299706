import assert from "node:assert/strict";
import { main } from "./main.ts";

/** A stand-in manager that records the requests and answers `items` to every history query. */
function fakeManager(items: unknown[]) {
  const seen: URL[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    seen.push(url);
    if (req.method === "GET" && url.pathname.endsWith("/history")) return Response.json({ items });
    return new Response("not found", { status: 404 });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

async function knitctl(server: string, args: string[]) {
  let out = "";
  let err = "";
  const env: Record<string, string> = { KNITCTL_SERVER: server, KNITCTL_TOKEN: "t" };
  const code = await main(args, {
    env: (name) => env[name],
    io: { out: (t) => void (out += t), err: (t) => void (err += t) },
  });
  return { code, out, err };
}

const A = {
  tenant: "acme",
  network: "control",
  networkTenant: "acme",
  networkId: "n1",
  port: "pa",
  ip: "10.10.0.5",
  mac: "02:52:49:00:00:05",
  pod: { namespace: "acme", name: "a", uid: "ua" },
  node: "n1",
  interface: "eth0",
  from: "2026-11-25T03:00:00.000Z",
  to: "2026-11-25T03:05:00.000Z",
  ended: "released",
};
const B = {
  ...A,
  tenant: "globex",
  networkTenant: "admin",
  network: "shared",
  port: "pb",
  pod: undefined,
  node: undefined,
  from: "2026-11-25T03:07:00.000Z",
  to: undefined,
  ended: undefined,
};

Deno.test("history: the holders as a table, oldest first; the query names the address and the time", async () => {
  await using m = fakeManager([A, B]);
  const r = await knitctl(m.url, [
    "-t",
    "acme",
    "history",
    "10.10.0.5",
    "--at",
    "2026-11-25T03:01:00Z",
  ]);
  assert.equal(r.code, 0, r.err);
  assert.deepEqual(r.out.split("\n").map((l) => l.split(/\s{2,}/)), [
    ["TENANT", "NETWORK", "PORT", "POD", "NODE", "IP", "MAC", "FROM", "TO"],
    ["acme", "control", "pa", "acme/a", "n1", A.ip, A.mac, A.from, A.to],
    ["globex", "admin/shared", "pb", "-", "-", A.ip, A.mac, B.from, "now"],
    [""],
  ]);
  const url = m.seen[0];
  assert.equal(url.pathname, "/api/v1/tenants/acme/history");
  assert.equal(url.searchParams.get("ip"), "10.10.0.5");
  assert.equal(url.searchParams.get("at"), "2026-11-25T03:01:00.000Z");

  const wide = await knitctl(m.url, ["history", "10.10.0.5", "-o", "wide"]);
  assert.match(wide.out, /INTERFACE\s+POD UID\s+ENDED\n.*eth0\s+ua\s+released\n/);
});

Deno.test("history: a MAC in any case, ranges, every tenant's with --all-tenants, JSON as answered", async () => {
  await using m = fakeManager([A]);
  const mac = await knitctl(m.url, [
    "history",
    "02-52-49-00-00-05",
    "--from",
    "2026-11-25T00:00:00Z",
    "--to",
    "now",
  ]);
  assert.equal(mac.code, 0, mac.err);
  assert.equal(m.seen[0].searchParams.get("mac"), "02:52:49:00:00:05");
  assert.equal(m.seen[0].searchParams.get("from"), "2026-11-25T00:00:00.000Z");
  assert.ok(Date.parse(m.seen[0].searchParams.get("to")!) > Date.parse("2026-11-25T00:00:00Z"));

  const all = await knitctl(m.url, ["history", "10.10.0.5", "-A", "-o", "json"]);
  assert.equal(all.code, 0, all.err);
  assert.equal(m.seen[1].pathname, "/api/v1/history");
  assert.deepEqual(JSON.parse(all.out), { items: [A] });
});

Deno.test("history: nobody held it is said on stderr, exit 0; bad usage is exit 2", async () => {
  await using m = fakeManager([]);
  const none = await knitctl(m.url, ["-t", "acme", "history", "10.10.0.9", "--at", "now"]);
  assert.equal(none.code, 0);
  assert.equal(none.out, "");
  assert.match(none.err, /No port of tenant "acme" held 10\.10\.0\.9 at \d{4}-/);
  for (
    const [args, message] of [
      [["history"], /one address or MAC/],
      [["history", "10.10.0.9", "10.10.0.8"], /one address or MAC/],
      [["history", "nope"], /neither an IPv4 or IPv6 address nor a MAC/],
      [["history", "10.10.0.9", "--at", "teatime"], /--at "teatime" is not a time/],
      [["history", "10.10.0.9", "--from", "2026-02-30"], /"2026-02-30" names no such date/],
      [["history", "10.10.0.9", "--at", "now", "--to", "now"], /--at, or --from/],
      [["history", "10.10.0.9", "-A", "-t", "acme"], /--tenant or --all-tenants/],
      [["history", "10.10.0.9", "--network", "x"], /does not take --network/],
    ] as [string[], RegExp][]
  ) {
    const r = await knitctl(m.url, args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
    assert.match(r.err, message);
  }
  assert.equal(m.seen.length, 1, "no request for bad usage");
});
