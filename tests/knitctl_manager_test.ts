/**
 * knitctl against a real manager (HTTP on loopback, Deno KV): every verb on every resource, JSON
 * output that parses, settings from flags / env / config file / stack manifest, and bad input that
 * gets a clear message and the right exit code.
 */
import assert from "node:assert/strict";
import { ConfigSchema } from "../manager/config.ts";
import { startManager } from "../manager/mod.ts";
import { expectExit, knitctl } from "../knitctl/test_support.ts";
import { RESOURCES } from "../knitctl/resources.ts";
import { Cleanup } from "../devstack/cleanup.ts";

const ADMIN = `admin-${crypto.randomUUID()}`;
const ACME = `acme-${crypto.randomUUID()}`;

async function withManager(fn: (url: string, dir: string) => Promise<void>): Promise<void> {
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
    await fn(manager.url, dir);
  } finally {
    await manager.shutdown();
  }
}

type Run = (args: string[], as?: Record<string, string>) => Promise<ReturnType<typeof expectExit>>;

/**
 * A manager with tenant acme and its network blue (10.1.0.0/24, gateway 10.1.0.1); `ok` runs
 * knitctl as acme (or as given) and expects it to succeed.
 */
function withAcmeBlue(
  fn: (k: { env: Record<string, string>; admin: Record<string, string>; ok: Run }) => Promise<void>,
): Promise<void> {
  return withManager(async (url) => {
    const env = { KNITCTL_SERVER: url, KNITCTL_TOKEN: ACME };
    const admin = { KNITCTL_SERVER: url, KNITCTL_TOKEN: ADMIN };
    const ok: Run = async (args, as = env) =>
      expectExit(await knitctl(args, as), 0, args.join(" "));
    await ok(["create", "tenant", "acme"], admin);
    await ok([
      ...["-t", "acme", "create", "network", "blue", "--cidr", "10.1.0.0/24"],
      ...["--gateway", "10.1.0.1"],
    ], admin);
    await fn({ env, admin, ok });
  });
}

Deno.test("knitctl: create, get, usage and delete every resource against a real manager, as tables and as JSON", async () => {
  await withManager(async (url) => {
    const env = { KNITCTL_SERVER: url, KNITCTL_TOKEN: ADMIN };
    const ok = async (args: string[], what = args.join(" ")) =>
      expectExit(await knitctl(args, env), 0, what);
    const json = async (args: string[]) => (await ok([...args, "-o", "json"])).json();

    // tenants
    assert.equal((await ok(["create", "tenant", "acme"])).stdout, "tenant/acme created\n");
    assert.match(
      (await ok(["get", "tenants"])).stdout,
      /^NAME\s+NETWORKS\s+IPGROUPS\s+AGE\n(.*\n)*acme\s+0\s+0\s+\d+s\n/,
    );
    assert.equal((await json(["get", "tenant", "acme"])).name, "acme");

    // physnets
    await ok(["create", "physnet", "phys1", "--vlan-range", "100-199", "--description", "rack A"]);
    const phys = await json(["get", "physnets"]);
    assert.deepEqual(phys.items.map((p: { name: string }) => p.name), ["phys1"]);
    assert.deepEqual(phys.items[0].vlanRanges, [{ start: 100, end: 199 }]);
    assert.match(
      (await ok(["get", "physnet", "phys1", "-o", "wide"])).stdout,
      /phys1\s+100-199\s+0\s+0\/100\s+rack A/,
    );

    // networks, with every create flag
    const blue = await json([
      ...["-t", "acme", "create", "network", "blue", "--cidr", "10.1.0.0/24"],
      ...["--gateway", "10.1.0.1", "--pool", "10.1.0.10-10.1.0.200", "--exclude", "10.1.0.50"],
      ...["--route", "10.9.0.0/16,10.1.0.254", "--route", "10.8.0.0/16"],
      ...[
        "--dns-server",
        "10.1.0.2",
        "--dns-domain",
        "acme.internal",
        "--dns-search",
        "acme.internal",
      ],
      ...["--mtu", "1400", "--description", "front end"],
    ]);
    assert.equal(blue.type, "vxlan");
    assert.equal(blue.mtu, 1400);
    assert.deepEqual(blue.allocationPools, [{ start: "10.1.0.10", end: "10.1.0.200" }]);
    assert.deepEqual(blue.excludes, ["10.1.0.50"]);
    assert.deepEqual(blue.routes, [{ dst: "10.9.0.0/16", via: "10.1.0.254" }, {
      dst: "10.8.0.0/16",
    }]);
    assert.deepEqual(blue.dns, {
      nameservers: ["10.1.0.2"],
      search: ["acme.internal"],
      domain: "acme.internal",
    });
    await ok([
      ...["-t", "acme", "create", "net", "red", "--cidr", "10.2.0.0/24", "--type", "vlan"],
      ...["--physnet", "phys1", "--segment-id", "120"],
    ]);
    const table = (await ok(["-t", "acme", "get", "networks"])).stdout;
    assert.match(table, /^NAME\s+TENANT\s+TYPE\s+CIDR\s+GATEWAY\s+SEGMENT\s+USED\s+AGE\n/);
    assert.match(
      table,
      /\nblue\s+acme\s+vxlan\s+10\.1\.0\.0\/24\s+10\.1\.0\.1\s+5\d{3}\s+0\/\d+\s/,
    );
    assert.match(table, /\nred\s+acme\s+vlan\s+10\.2\.0\.0\/24\s+\S*\s*120\s/);
    assert.match(
      (await ok(["-t", "acme", "get", "networks", "-o", "wide"])).stdout,
      /PHYSNET\s+MTU\s+PUBLIC\s+ID/,
    );
    assert.equal((await json(["-t", "acme", "get", "network", "red"])).segmentId, 120);
    assert.deepEqual(await json(["usage", "physnet", "phys1"]), {
      name: "phys1",
      total: 100,
      used: 1,
      free: 99,
    });

    // IP groups and ports
    await ok(["-t", "acme", "create", "ipgroup", "g1", "--network", "blue", "--size", "4"]);
    await ok([
      "-t",
      "acme",
      "create",
      "ipg",
      "g2",
      "--network",
      "blue",
      "--addresses",
      "10.1.0.20,10.1.0.21",
    ]);
    const groups = await json(["-t", "acme", "get", "ipgroups"]);
    assert.deepEqual(groups.items.map((g: { name: string; size: number }) => [g.name, g.size]), [[
      "g1",
      4,
    ], ["g2", 2]]);
    await ok(["-t", "acme", "create", "port", "p1", "--network", "blue", "--ip-group", "g2"]);
    await ok([
      ...["-t", "acme", "create", "port", "p2", "--network", "blue", "--ip", "10.1.0.77"],
      ...["--mac", "02:00:0A:01:00:4D", "--node", "w1"],
    ]);
    const p1 = await json(["-t", "acme", "get", "port", "p1", "--network", "blue"]);
    assert.ok(["10.1.0.20", "10.1.0.21"].includes(p1.ip), p1.ip);
    const ports = (await ok(["-t", "acme", "get", "ports", "--network", "blue"])).stdout;
    assert.match(ports, /^ID\s+NETWORK\s+IP\s+MAC\s+NODE\s+POD\s+AGE\n/);
    assert.match(ports, /\np2\s+blue\s+10\.1\.0\.77\s+02:00:0a:01:00:4d\s+w1\s/);
    const byNode = await json(["-t", "acme", "get", "ports", "--node", "w1"]);
    assert.deepEqual(byNode.items.map((p: { id: string }) => p.id), ["p2"]);
    const usage = (await ok(["-t", "acme", "usage", "networks"])).stdout;
    assert.match(usage, /^NAME\s+TENANT\s+TOTAL\s+USED\s+FREE\n/);
    // The pool holds 191 addresses less one excluded; the groups hold 6, p2 has one more.
    assert.match(usage, /\nblue\s+acme\s+190\s+7\s+183\n/);
    const u = await json(["-t", "acme", "usage", "network", "blue"]);
    assert.deepEqual(u, { name: "blue", tenant: "acme", total: 190, used: 7, free: 183 });

    // nodes
    await ok(["create", "node", "w1", "--underlay-ip", "192.0.2.10", "--label", "zone=a"]);
    assert.deepEqual((await json(["get", "node", "w1"])).labels, { zone: "a" });
    assert.match(
      (await ok(["get", "nodes", "-o", "wide"])).stdout,
      /w1\s+192\.0\.2\.10\s+zone=a\s/,
    );

    // and everything goes again
    assert.equal(
      (await ok(["-t", "acme", "delete", "port", "p1", "--network", "blue"])).stdout,
      "port/p1 deleted\n",
    );
    assert.deepEqual(await json(["-t", "acme", "delete", "port", "p2", "--network", "blue"]), {
      deleted: "port/p2",
    });
    for (const g of ["g1", "g2"]) await ok(["-t", "acme", "delete", "ipgroup", g]);
    for (const n of ["blue", "red"]) await ok(["-t", "acme", "delete", "network", n]);
    await ok(["delete", "physnet", "phys1"]);
    await ok(["delete", "node", "w1"]);
    await ok(["delete", "tenant", "acme"]);
    const empty = await ok(["get", "physnets"]);
    assert.equal(empty.stdout, "");
    assert.match(empty.stderr, /No physnets found/);
    assert.deepEqual(await json(["get", "nodes"]), { items: [] });
    assert.ok(
      !(await json(["get", "tenants"])).items.some((t: { name: string }) => t.name === "acme"),
    );
  });
});

Deno.test("knitctl: bad input gets a clear message and exit code 2 (usage) or 1 (refused)", async () => {
  await withManager(async (url) => {
    const env = { KNITCTL_SERVER: url, KNITCTL_TOKEN: ADMIN };
    const fails = async (
      args: string[],
      code: number,
      message: RegExp,
      e: Record<string, string> = env,
    ) => {
      const r = expectExit(await knitctl(args, e), code, args.join(" "));
      assert.match(r.stderr, message);
      assert.equal(r.stdout, "", "nothing on stdout when it fails");
    };
    await fails(
      ["get", "netwrks"],
      2,
      new RegExp(
        `^Error: Unknown resource "netwrks": use one of ${
          RESOURCES.map((r) => r.plural).join(", ")
        }\n$`,
      ),
    );
    await fails(["list", "networks"], 2, /Unknown verb "list": use one of get, create/);
    await fails(["get", "networks", "--colour"], 2, /Unknown option '--colour'.*knitctl --help/);
    await fails(
      ["get", "networks", "--cidr", "10.0.0.0/8"],
      2,
      /get networks does not take --cidr/,
    );
    await fails(
      ["create", "network", "blue"],
      2,
      /create network needs --cidr \(e\.g\. --cidr 10\.1\.0\.0\/24\)/,
    );
    await fails(
      ["create", "network"],
      2,
      /create network needs a name: knitctl create network NAME/,
    );
    await fails(
      ["create", "ipgroup", "g", "--network", "blue"],
      2,
      /needs --size N or --addresses/,
    );
    await fails(
      ["create", "physnet", "p", "--vlan-range", "100-5000"],
      2,
      /--vlan-range "100-5000" is not a VLAN range/,
    );
    await fails(["get", "port", "p1"], 2, /A port by name needs --network NAME/);
    await fails(["usage", "tenants"], 2, /usage is for networks \(addresses\) and physnets/);
    await fails(
      ["get", "networks", "-o", "yaml"],
      2,
      /-o "yaml" is not an output format: use table, wide or json/,
    );
    await fails(
      ["get", "networks"],
      2,
      /No manager given: pass --server URL, set KNITCTL_SERVER/,
      {},
    );
    await fails(
      ["--server", "localhost:9", "get", "nodes"],
      2,
      /must be an http:\/\/ or https:\/\/ URL/,
      { KNITCTL_TOKEN: ADMIN },
    );

    // Refused by the manager: its message, what to do, exit 1.
    expectExit(await knitctl(["create", "tenant", "acme"], env), 0, "tenant");
    await fails(
      ["-t", "acme", "create", "network", "bad", "--cidr", "10.1.0.0/33"],
      1,
      /^Error: The manager refused the request: .*cidr.*10\.1\.0\.0\/33.*\(400 \w+\)\n$/,
    );
    await fails(
      ["-t", "acme", "get", "network", "nosuch"],
      1,
      /\(404 not_found\): "knitctl -t acme get networks" lists what there is/,
    );
    await fails(["create", "tenant", "acme"], 1, /\(409 \w+\)/);
    await fails(
      ["get", "tenants"],
      1,
      /did not accept the token \(401 \w+\).*check --token \/ KNITCTL_TOKEN/,
      {
        KNITCTL_SERVER: url,
        KNITCTL_TOKEN: "wrong-token-0000000000",
      },
    );
    await fails(["create", "tenant", "other"], 1, /\(403 \w+\): use a token allowed to do this/, {
      KNITCTL_SERVER: url,
      KNITCTL_TOKEN: ACME,
    });
    const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (closed.addr as Deno.NetAddr).port;
    closed.close();
    await fails(
      ["--server", `http://127.0.0.1:${port}`, "get", "nodes"],
      1,
      /The manager at http:\/\/127\.0\.0\.1:\d+ is not reachable .*check --server \/ KNITCTL_SERVER/,
    );
  });
});

Deno.test("knitctl: settings come from flags, then env, then a stack manifest, then the config file", async () => {
  await withManager(async (url, dir) => {
    expectExit(
      await knitctl(["create", "tenant", "acme"], { KNITCTL_SERVER: url, KNITCTL_TOKEN: ADMIN }),
      0,
      "acme",
    );
    expectExit(
      await knitctl(["create", "tenant", "beta"], { KNITCTL_SERVER: url, KNITCTL_TOKEN: ADMIN }),
      0,
      "beta",
    );
    for (const t of ["acme", "beta"]) {
      expectExit(
        await knitctl(["-t", t, "create", "network", `${t}-net`, "--cidr", "10.5.0.0/24"], {
          KNITCTL_SERVER: url,
          KNITCTL_TOKEN: ADMIN,
        }),
        0,
        t,
      );
    }
    const names = (r: { json(): { items: { name: string }[] } }) =>
      r.json().items.map((n) => n.name);

    const file = `${dir}/knitctl.json`;
    await Deno.writeTextFile(file, JSON.stringify({ server: url, token: ADMIN, tenant: "acme" }));
    const fromFile = await knitctl(["--config", file, "get", "networks", "-o", "json"]);
    assert.deepEqual(names(expectExit(fromFile, 0, "config file")), ["acme-net"]);
    const envWins = await knitctl(["get", "networks", "-o", "json"], {
      KNITCTL_CONFIG: file,
      KNITCTL_TENANT: "beta",
    });
    assert.deepEqual(names(expectExit(envWins, 0, "env over file")), ["beta-net"]);
    const flagWins = await knitctl(["-t", "acme", "get", "networks", "-o", "json"], {
      KNITCTL_CONFIG: file,
      KNITCTL_TENANT: "beta",
    });
    assert.deepEqual(names(expectExit(flagWins, 0, "flag over env")), ["acme-net"]);
    const badToken = await knitctl(["--token", "wrong-token-0000000000", "get", "tenants"], {
      KNITCTL_CONFIG: file,
    });
    assert.equal(badToken.code, 1, "the flag's token is the one sent");

    // A stack manifest (as scripts/stack.ts writes it) gives the manager and the admin token.
    const stackDir = `${dir}/stack`;
    await Deno.mkdir(stackDir);
    await Deno.writeTextFile(
      `${stackDir}/stack.json`,
      JSON.stringify({ manager: { url, adminToken: ADMIN }, nodes: [] }),
    );
    const fromStack = await knitctl(["--stack", stackDir, "get", "tenants", "-o", "json"]);
    assert.ok(names(expectExit(fromStack, 0, "stack")).includes("beta"));
    const noStack = expectExit(
      await knitctl(["--stack", `${dir}/none`, "get", "tenants"]),
      2,
      "no stack",
    );
    assert.match(noStack.stderr, /Cannot read the stack manifest .*deno task stack up --dir/);

    await Deno.writeTextFile(file, JSON.stringify({ server: url, tokn: "x" }));
    const typo = expectExit(await knitctl(["--config", file, "get", "tenants"]), 2, "typo in file");
    assert.match(typo.stderr, /unknown key "tokn": use server, token, tenant, caFile/);
    const missing = expectExit(
      await knitctl(["--config", `${dir}/nope.json`, "get", "tenants"]),
      2,
      "no file",
    );
    assert.match(missing.stderr, /Cannot read the config file .*nope\.json/);

    // Help and version need no manager.
    const help = expectExit(await knitctl(["create", "--help"]), 0, "create --help");
    assert.match(help.stdout, /network:\n.*--cidr CIDR.*\(required\)/);
    assert.match(
      expectExit(await knitctl(["help", "attach"]), 0, "help attach").stdout,
      /--route-gw CIDR,GW/,
    );
    assert.match(
      expectExit(await knitctl([]), 2, "no verb").stdout,
      /^knitctl: the command-line client/,
    );
    assert.equal(expectExit(await knitctl(["version"]), 0, "version").stdout, "knitctl 0.1.0\n");
  });
});

Deno.test("knitctl: clusters: create with what each may use, get as a table and JSON, delete", async () => {
  await withManager(async (url) => {
    const env = { KNITCTL_SERVER: url, KNITCTL_TOKEN: ADMIN };
    const ok = async (args: string[]) => expectExit(await knitctl(args, env), 0, args.join(" "));
    assert.equal(
      (await ok([
        ...["create", "cluster", "east", "--allow-tenant", "acme", "--allow-tenant", "globex"],
        ...["--allow-network", "admin/pods", "--allow-physnet", "dc1", "--description", "eu"],
      ])).stdout,
      "cluster/east created\n",
    );
    const got = (await ok(["get", "cluster", "east", "-o", "json"])).json();
    assert.deepEqual(
      [got.tenants, got.networks, got.physnets, got.nodes],
      [["acme", "globex"], ["admin/pods"], ["dc1"], []],
    );
    // The default cluster is always there, letting everything in.
    assert.match(
      (await ok(["get", "clusters"])).stdout,
      /^NAME\s+TENANTS\s+PHYSNETS\s+AGE\ndefault\s+\*\s+\*\s+\S+\neast\s+acme,globex\s+dc1\s+\d+s\n$/,
    );
    const bad = await knitctl(["create", "cluster", "west", "--allow-network", "pods"], env);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /networks.*must be tenant\/network/);
    assert.equal((await ok(["delete", "cluster", "east"])).stdout, "cluster/east deleted\n");
    const refused = await knitctl(["delete", "cluster", "default"], env);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /cannot be deleted/);
  });
});

Deno.test("knitctl: mirrors (and routers): create from repeated flags, get as a table and JSON, refusals, delete", async () => {
  await withAcmeBlue(async ({ env, admin, ok }) => {
    // A required flag that may be repeated counts as given (it was refused as missing).
    await ok(["-t", "acme", "create", "router", "r1", "--networks", "blue"]);
    await ok(["-t", "acme", "delete", "router", "r1"]);
    for (const p of ["web", "db", "tap"]) {
      await ok(["-t", "acme", "create", "port", p, "--network", "blue", "--node", "w1"], admin);
    }
    assert.equal(
      (await ok([
        ...["-t", "acme", "create", "mirror", "m1", "--source", "blue/web"],
        ...["--source", "blue/db", "--collector", "blue/tap", "--direction", "out"],
      ])).stdout,
      "mirror/m1 created\n",
    );
    const got = (await ok(["-t", "acme", "get", "mirror", "m1", "-o", "json"])).json();
    assert.deepEqual(
      [got.sources.map((s: { id: string }) => s.id), got.direction, got.collector.id],
      [["web", "db"], "out", "tap"],
    );
    assert.match(
      (await ok(["-t", "acme", "get", "mirrors"])).stdout,
      /^NAME\s+SOURCES\s+DIRECTION\s+COLLECTOR\s+AGE\nm1\s+blue\/web,blue\/db\s+out\s+blue\/tap\s+\d+s\n$/,
    );
    // A flag that names no port is a usage error (2); what the manager refuses is 1, its reason shown.
    const usage = await knitctl([
      ...["-t", "acme", "create", "mirror", "m2", "--source", "web"],
      ...["--collector", "blue/tap"],
    ], env);
    expectExit(usage, 2, "a source without its network");
    assert.match(usage.stderr, /--source "web" is not a port: use NETWORK\/PORT-ID/);
    const refused = await knitctl([
      ...["-t", "acme", "create", "mirror", "m2", "--source", "blue/tap"],
      ...["--collector", "blue/web"],
    ], env);
    expectExit(refused, 1, "a collector as a source");
    assert.match(refused.stderr, /collector of mirror "m1"/);
    // An admin sends copies to an address over GRE.
    await ok([
      ...["-t", "acme", "create", "mirror", "far", "--source", "blue/web"],
      ...["--collector", "gre:192.0.2.250"],
    ], admin);
    assert.match(
      (await ok(["-t", "acme", "get", "mirror", "far"])).stdout,
      /\nfar\s+blue\/web\s+both\s+gre:192\.0\.2\.250\s/,
    );
    await ok(["-t", "acme", "delete", "mirror", "far"]);
    // Over VXLAN with its VNI, over ERSPAN with its session; a key GRE does not take is refused.
    for (const spec of ["vxlan:192.0.2.250:5001", "erspan:192.0.2.250:7"]) {
      await ok([
        ...["-t", "acme", "create", "mirror", "far", "--source", "blue/web"],
        ...["--collector", spec],
      ], admin);
      assert.match(
        (await ok(["-t", "acme", "get", "mirror", "far"])).stdout,
        new RegExp(`\\nfar\\s+blue/web\\s+both\\s+${spec.replaceAll(".", "\\.")}\\s`),
      );
      await ok(["-t", "acme", "delete", "mirror", "far"]);
    }
    const keyed = await knitctl([
      ...["-t", "acme", "create", "mirror", "far", "--source", "blue/web"],
      ...["--collector", "gre:192.0.2.250:5"],
    ], admin);
    expectExit(keyed, 2, "a key on a GRE collector");
    assert.match(keyed.stderr, /gre takes no key/);
    assert.equal(
      (await ok(["-t", "acme", "delete", "mirror", "m1"])).stdout,
      "mirror/m1 deleted\n",
    );
    // A filtered mirror: --match rules, what the pods send.
    await ok([
      ...[
        "-t",
        "acme",
        "create",
        "mirror",
        "f1",
        "--source",
        "blue/web",
        "--collector",
        "blue/tap",
      ],
      ...["--direction", "out", "--match", "tcp:5001", "--match", "udp:5000-5003:10.9.0.0/16"],
    ]);
    assert.deepEqual(
      (await ok(["-t", "acme", "get", "mirror", "f1", "-o", "json"])).json().filter,
      [
        { protocol: "tcp", ports: "5001" },
        { protocol: "udp", ports: "5000-5003", remote: "10.9.0.0/16" },
      ],
    );
    const bad = await knitctl([
      ...["-t", "acme", "create", "mirror", "f2", "--source", "blue/db", "--collector", "blue/tap"],
      ...["--direction", "out", "--match", "tcp:1:2:3"],
    ], env);
    expectExit(bad, 2, "a match of four parts");
    assert.match(bad.stderr, /--match "tcp:1:2:3" is not a match: use PROTO\[:PORTS\]\[:CIDR\]/);
    await ok(["-t", "acme", "delete", "mirror", "f1"]);
    assert.deepEqual((await ok(["-t", "acme", "get", "mirrors", "-o", "json"])).json(), {
      items: [],
    });
  });
});

Deno.test("knitctl: claims: create, ports bound with --claim, activate a migration's target, get, delete", async () => {
  await withManager(async (url) => {
    const env = { KNITCTL_SERVER: url, KNITCTL_TOKEN: ADMIN };
    const run = (args: string[]) => knitctl([...args, "-t", "acme"], env);
    const ok = async (args: string[]) => expectExit(await run(args), 0, args.join(" "));
    const json = async (args: string[]) => (await ok([...args, "-o", "json"])).json();
    await ok(["create", "tenant", "acme"]);
    await ok(["create", "network", "blue", "--cidr", "10.1.0.0/24"]);
    assert.equal(
      (await ok(["create", "claim", "vm1", "--network", "blue"])).stdout,
      "claim/vm1 created\n",
    );
    const claim = await json(["get", "claim", "vm1", "--network", "blue"]);
    await ok(["create", "port", "src", "--network", "blue", "--claim", "vm1", "--node", "n1"]);
    const dst = await json([
      "create",
      "port",
      "dst",
      "--network",
      "blue",
      "--claim",
      "vm1",
      "--node",
      "n2",
    ]);
    assert.deepEqual([dst.ip, dst.mac, dst.active], [claim.ip, claim.mac, false]);
    assert.match(
      (await ok(["get", "claims"])).stdout,
      new RegExp(
        `^NAME\\s+NETWORK\\s+IP\\s+MAC\\s+PORTS\\s+AGE\\nvm1\\s+blue\\s+${
          claim.ip.replaceAll(".", "\\.")
        }\\s+\\S+\\s+src@n1,dst@n2 \\(inactive\\)\\s`,
      ),
    );
    assert.equal(
      (await ok(["activate", "port", "dst", "--network", "blue"])).stdout,
      `port/dst active: it has claim vm1 (${claim.ip}) on node n2\n`,
    );
    assert.match(
      (await ok(["get", "ports", "--network", "blue", "-o", "wide"])).stdout,
      /vm1 \(inactive\)/,
    );
    assert.deepEqual(
      (await json(["get", "claims", "--network", "blue"])).items[0].ports,
      [{ id: "src", node: "n1", active: false }, { id: "dst", node: "n2", active: true }],
    );
    // A claim with ports is refused, clearly; a plain port has nothing to activate.
    const refused = expectExit(
      await run(["delete", "claim", "vm1", "--network", "blue"]),
      1,
      "delete",
    );
    assert.match(refused.stderr, /port\(s\) "src", "dst" are bound to it/);
    expectExit(await run(["activate", "claim", "vm1", "--network", "blue"]), 2, "activate claim");
    expectExit(await run(["activate", "port", "dst"]), 2, "activate without --network");
    await ok(["delete", "port", "src", "--network", "blue"]);
    await ok(["delete", "port", "dst", "--network", "blue"]);
    assert.equal(
      (await ok(["delete", "claim", "vm1", "--network", "blue"])).stdout,
      "claim/vm1 deleted\n",
    );
  });
});

Deno.test("knitctl: services: create with ports and backends, get with endpoints, refusals, delete", async () => {
  await withAcmeBlue(async ({ env, admin, ok }) => {
    for (const p of ["web1", "web2"]) {
      await ok(["-t", "acme", "create", "port", p, "--network", "blue", "--node", "w1"], admin);
    }
    assert.equal(
      (await ok([
        ...["-t", "acme", "create", "service", "front", "--network", "blue", "--vip", "10.1.0.50"],
        ...["--service-port", "tcp:80:8080", "--service-port", "udp:53"],
        ...["--backend", "web1,web2", "--affinity", "ClientIP"],
      ])).stdout,
      "service/front created\n",
    );
    const got = (await ok(["-t", "acme", "get", "service", "front", "-o", "json"])).json();
    assert.deepEqual(
      [got.vip, got.ports, got.backends, got.sessionAffinity, got.status.endpoints.length],
      [
        "10.1.0.50",
        [
          { protocol: "TCP", port: 80, targetPort: 8080 },
          { protocol: "UDP", port: 53, targetPort: 53 },
        ],
        ["web1", "web2"],
        "ClientIP",
        2,
      ],
    );
    assert.match(
      (await ok(["-t", "acme", "get", "services"])).stdout,
      /^NAME\s+NETWORK\s+VIP\s+PORTS\s+ENDPOINTS\s+AGE\nfront\s+blue\s+10\.1\.0\.50\s+tcp:80:8080,udp:53\s+2\/2\s+\d+s\n$/,
    );
    const usage = await knitctl([
      ...["-t", "acme", "create", "service", "bad", "--network", "blue"],
      ...["--service-port", "sctp:80"],
    ], env);
    expectExit(usage, 2, "a service port of an unknown protocol");
    assert.match(usage.stderr, /--service-port "sctp:80" is not a service port/);
    const taken = await knitctl([
      ...["-t", "acme", "create", "service", "again", "--network", "blue"],
      ...["--vip", "10.1.0.50", "--service-port", "80"],
    ], env);
    expectExit(taken, 1, "a VIP another service holds");
    assert.match(taken.stderr, /10\.1\.0\.50 of network "blue" is the VIP of service "front"/);
    assert.equal(
      (await ok(["-t", "acme", "delete", "service", "front"])).stdout,
      "service/front deleted\n",
    );
  });
});
