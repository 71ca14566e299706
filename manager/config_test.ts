/** Configuration: file, then environment, then flags; every mistake a clear DaemonConfigError. */
import assert from "node:assert/strict";
import { DaemonConfigError } from "@knitter/common/daemon_config";
import { loadConfig } from "./mod.ts";
import { USAGE } from "./config.ts";

const ADMIN = "env-admin-token-0123456789";

const FILE = {
  listen: { hostname: "127.0.0.1", port: 7000 },
  store: { path: "/from/file.kv" },
  tokens: [{ token: "file-admin-token-0123456789", scope: "admin" }],
  vniRanges: ["5000-5999"],
  underlayMtu: 9000,
  logLevel: "warn",
};

/** loadConfig over in-memory files and environment. */
function load(
  args: string[],
  env: Record<string, string> = {},
  files: Record<string, string> = {},
) {
  return loadConfig(args, (name) => env[name], (path) => {
    if (path in files) return Promise.resolve(files[path]);
    return Promise.reject(new Deno.errors.NotFound(`no such file: ${path}`));
  });
}

const withFile = (content: unknown = FILE) => ({ "/etc/knitter.json": JSON.stringify(content) });

async function configError(p: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof DaemonConfigError, `a DaemonConfigError, got ${err}`);
    assert.match(err.message, message);
    return true;
  });
}

Deno.test("config: the file is read as given", async () => {
  const { config, help } = await load(["--config", "/etc/knitter.json"], {}, withFile());
  assert.equal(help, false);
  assert.deepEqual(config.listen, { hostname: "127.0.0.1", port: 7000 });
  assert.equal(config.store.path, "/from/file.kv");
  assert.equal(config.underlayMtu, 9000);
  assert.equal(config.logLevel, "warn");
  assert.deepEqual(config.vniRanges, ["5000-5999"]);
  assert.deepEqual(config.tokens, FILE.tokens);
});

Deno.test("config: the environment overrides the file, flags override both", async () => {
  const env = {
    KNITTER_MANAGER_LISTEN: "0.0.0.0:8000",
    KNITTER_MANAGER_STORE: "/from/env.kv",
    KNITTER_MANAGER_LOG_LEVEL: "debug",
    KNITTER_MANAGER_ADMIN_TOKEN: ADMIN,
  };
  const fromEnv = (await load(["--config", "/etc/knitter.json"], env, withFile())).config;
  assert.deepEqual(fromEnv.listen, { hostname: "0.0.0.0", port: 8000 });
  assert.equal(fromEnv.store.path, "/from/env.kv");
  assert.equal(fromEnv.logLevel, "debug");
  assert.deepEqual(
    fromEnv.tokens.map((t) => t.token),
    [FILE.tokens[0].token, ADMIN],
    "the env token adds one",
  );
  assert.equal(fromEnv.underlayMtu, 9000, "what the env does not set stays the file's");

  const args = [
    "--config",
    "/etc/knitter.json",
    "--listen",
    "[::1]:9000",
    "--store",
    "/from/flag.kv",
  ];
  const fromFlags = (await load(args, env, withFile())).config;
  assert.deepEqual(fromFlags.listen, { hostname: "::1", port: 9000 });
  assert.equal(fromFlags.store.path, "/from/flag.kv");
});

Deno.test("config: defaults without a file", async () => {
  const { config } = await load([], { KNITTER_MANAGER_ADMIN_TOKEN: ADMIN });
  assert.deepEqual(config.listen, { hostname: "0.0.0.0", port: 9527 });
  assert.equal(config.store.path, "knitter-manager.kv");
  assert.deepEqual(config.vniRanges, ["1-16777215"]);
  assert.equal(config.underlayMtu, 1500);
  assert.equal(config.tls, undefined);
  assert.deepEqual(config.tokens, [{ token: ADMIN, scope: "admin" }]);
});

Deno.test("config: TLS from the environment needs both files", async () => {
  const env = { KNITTER_MANAGER_ADMIN_TOKEN: ADMIN, KNITTER_MANAGER_TLS_CERT: "/tls/cert.pem" };
  await configError(load([], env), /both KNITTER_MANAGER_TLS_CERT and KNITTER_MANAGER_TLS_KEY/);
  const { config } = await load([], { ...env, KNITTER_MANAGER_TLS_KEY: "/tls/key.pem" });
  assert.deepEqual(config.tls, { certFile: "/tls/cert.pem", keyFile: "/tls/key.pem" });
});

Deno.test("config: a tokens file adds tokens, and is checked", async () => {
  const tokens = [{ token: "tenant-acme-token-0123456789", scope: "tenant", tenant: "acme" }];
  const files = { "/secret/tokens.json": JSON.stringify(tokens) };
  const { config } = await load([], { KNITTER_MANAGER_TOKENS_FILE: "/secret/tokens.json" }, files);
  assert.deepEqual(config.tokens, tokens);

  const bad = {
    "/secret/tokens.json": JSON.stringify([{
      token: "tenant-acme-token-0123456789",
      scope: "tenant",
    }]),
  };
  await configError(
    load([], { KNITTER_MANAGER_TOKENS_FILE: "/secret/tokens.json" }, bad),
    /tokens file "\/secret\/tokens.json".*tenant token needs "tenant"/,
  );
  await configError(
    load([], { KNITTER_MANAGER_TOKENS_FILE: "/secret/missing.json" }),
    /Cannot read tokens file "\/secret\/missing.json"/,
  );
});

Deno.test("config: no tokens at all is a clear error", async () => {
  await configError(load([]), /No API tokens configured.*KNITTER_MANAGER_ADMIN_TOKEN/);
  await configError(
    load(["--config", "/etc/knitter.json"], {}, withFile({ ...FILE, tokens: [] })),
    /No API tokens configured/,
  );
});

Deno.test("config: unreadable or invalid files are named", async () => {
  await configError(
    load(["--config", "/nope.json"]),
    /Cannot read configuration file "\/nope.json"/,
  );
  await configError(
    load(["--config", "/etc/knitter.json"], {}, { "/etc/knitter.json": "{ listen: 1 }" }),
    /configuration file "\/etc\/knitter.json" is not valid JSON/,
  );
  await configError(
    load(["--config", "/etc/knitter.json"], {}, withFile({ ...FILE, colour: "red" })),
    /Invalid configuration at "\(root\)"/,
  );
  await configError(
    load(["--config", "/etc/knitter.json"], {}, withFile({ ...FILE, underlayMtu: 100 })),
    /Invalid configuration at "underlayMtu"/,
  );
  await configError(
    load(
      ["--config", "/etc/knitter.json"],
      {},
      withFile({ ...FILE, tokens: [{ token: "short", scope: "admin" }] }),
    ),
    /"tokens.0.token": must be at least 16 characters/,
  );
});

Deno.test("config: bad VNI ranges and listen addresses are refused", async () => {
  const env = { KNITTER_MANAGER_ADMIN_TOKEN: ADMIN };
  for (const range of ["5-1", "0-10", "1-16777216"]) {
    await configError(
      load(["--config", "/etc/knitter.json"], env, withFile({ ...FILE, vniRanges: [range] })),
      new RegExp(`VNI range "${range}" must lie within 1-16777215`),
    );
  }
  await configError(
    load(["--config", "/etc/knitter.json"], env, withFile({ ...FILE, vniRanges: ["5000"] })),
    /"vniRanges.0": must look like "5000-16777215"/,
  );
  await configError(
    load(["--listen", "localhost"], env),
    /Listen address "localhost" must be HOST:PORT/,
  );
  await configError(
    load(["--listen", "localhost:70000"], env),
    /Invalid configuration at "listen.port"/,
  );
  await configError(load([], { ...env, KNITTER_MANAGER_LOG_LEVEL: "loud" }), /"logLevel"/);
});

Deno.test("config: --help needs nothing else; unknown flags show the usage", async () => {
  const { help } = await load(["--help"]);
  assert.equal(help, true);
  assert.equal((await load(["-h"])).help, true);
  assert.match(USAGE, /--config FILE/);
  await configError(load(["--colour", "red"]), /--colour[\s\S]*Usage: deno task manager/);
  await configError(load(["--store"]), /--store/);
});

Deno.test("config: the store backend: Deno KV by default, etcd from the file, env or flag", async () => {
  const env = { KNITTER_MANAGER_ADMIN_TOKEN: ADMIN };
  assert.equal((await load([], env)).config.store.backend, undefined);
  const etcdFile = {
    ...FILE,
    store: {
      etcd: {
        endpoints: ["https://10.0.0.1:2379", "https://10.0.0.2:2379"],
        caFile: "/etc/etcd/ca.pem",
        certFile: "/etc/etcd/client.pem",
        keyFile: "/etc/etcd/client-key.pem",
        username: "knitter",
        password: "secret",
      },
    },
  };
  const fromFile = (await load(["--config", "/etc/knitter.json"], env, withFile(etcdFile))).config;
  assert.equal(fromFile.store.backend, "etcd");
  assert.deepEqual(fromFile.store.etcd, {
    ...etcdFile.store.etcd,
    prefix: "knitter/",
    timeoutMs: 5000,
  });

  const fromEnv = (await load([], {
    ...env,
    KNITTER_MANAGER_ETCD_ENDPOINTS: "http://127.0.0.1:2379, http://127.0.0.1:2380",
    KNITTER_MANAGER_ETCD_PREFIX: "site-a/",
    KNITTER_MANAGER_ETCD_USERNAME: "u",
    KNITTER_MANAGER_ETCD_PASSWORD: "p",
  })).config;
  assert.equal(fromEnv.store.backend, "etcd");
  assert.deepEqual(fromEnv.store.etcd?.endpoints, [
    "http://127.0.0.1:2379",
    "http://127.0.0.1:2380",
  ]);
  assert.equal(fromEnv.store.etcd?.prefix, "site-a/");

  const flag = (await load(["--etcd", "http://127.0.0.1:2379"], env)).config;
  assert.equal(flag.store.backend, "etcd");
  // A --store flag picks Deno KV even over a file that names etcd.
  const kv =
    (await load(["--config", "/etc/knitter.json", "--store", "/x.kv"], env, withFile(etcdFile)))
      .config;
  assert.equal(kv.store.backend, "kv");
  assert.equal(kv.store.path, "/x.kv");
  assert.match(USAGE, /--etcd URLS/);
  assert.match(USAGE, /KNITTER_MANAGER_ETCD_CA/);
});

Deno.test("config: store mistakes are named", async () => {
  const env = { KNITTER_MANAGER_ADMIN_TOKEN: ADMIN };
  const withStore = (store: unknown) => withFile({ ...FILE, store });
  const file = ["--config", "/etc/knitter.json"];
  await configError(load(file, env, withStore({ backend: "etcd" })), /etcd backend needs "etcd"/);
  await configError(
    load(file, env, withStore({ etcd: { endpoints: ["10.0.0.1:2379"] } })),
    /"store.etcd.endpoints.0": must look like "http:\/\/HOST:PORT"/,
  );
  await configError(
    load(file, env, withStore({ etcd: { endpoints: [] } })),
    /name at least one etcd member/,
  );
  await configError(
    load(file, env, withStore({ etcd: { endpoints: ["https://e:2379"], certFile: "/c.pem" } })),
    /give both etcd.certFile and etcd.keyFile/,
  );
  await configError(
    load(file, env, withStore({ etcd: { endpoints: ["https://e:2379"], username: "u" } })),
    /give both etcd.username and etcd.password/,
  );
  await configError(
    load(["--store", "https://kv.example.test/db"], env),
    /remote Deno KV .* needs an access token: set store.accessToken or KNITTER_MANAGER_KV_ACCESS_TOKEN/,
  );
  const remote = (await load(["--store", "https://kv.example.test/db"], {
    ...env,
    KNITTER_MANAGER_KV_ACCESS_TOKEN: "tok",
  })).config;
  assert.equal(remote.store.path, "https://kv.example.test/db");
  assert.equal(remote.store.accessToken, "tok");
});

Deno.test("config: budgets by role from the file, the environment over them field by field", async () => {
  const file = withFile({
    ...FILE,
    limits: { jsonDepth: 16 },
    fairness: { tenant: { ratePerSecond: 5, burst: 10 }, node: { concurrent: 500 } },
  });
  const { config } = await load(["--config", "/etc/knitter.json"], {
    KNITTER_MANAGER_FAIRNESS:
      '{"tenant":{"burst":20,"concurrent":4},"monitor":{"ratePerSecond":0}}',
  }, file);
  assert.equal(config.limits?.jsonDepth, 16);
  assert.deepEqual(config.fairness, {
    tenant: { ratePerSecond: 5, burst: 20, concurrent: 4 },
    node: { concurrent: 500 },
    monitor: { ratePerSecond: 0 },
  });
});

Deno.test("config: bad budgets are refused, naming where", async () => {
  const env = { KNITTER_MANAGER_ADMIN_TOKEN: ADMIN };
  const fairness = (text: string) => load([], { ...env, KNITTER_MANAGER_FAIRNESS: text });
  await configError(fairness("{tenant"), /KNITTER_MANAGER_FAIRNESS is not valid JSON/);
  await configError(fairness("[1]"), /must be a JSON object of budgets by role/);
  await configError(fairness('{"robot":{}}'), /"fairness".*robot|Unrecognized key/);
  await configError(fairness('{"tenant":{"concurrent":-1}}'), /"fairness.tenant.concurrent"/);
  await configError(
    fairness('{"tenant":{"ratePerSecond":5,"burst":0}}'),
    /a burst of 0 refuses every request/,
  );
  await configError(
    load(["--config", "/c.json"], env, { "/c.json": JSON.stringify({ limits: { jsonDepth: 1 } }) }),
    /"limits.jsonDepth"/,
  );
});

Deno.test("config: limits.feedSockets (removed) is refused at start, naming listen.feedSocketPort", async () => {
  for (const feedSockets of [true, false]) {
    const file = { "/c.json": JSON.stringify({ ...FILE, limits: { feedSockets } }) };
    await configError(
      load(["--config", "/c.json"], {}, file),
      /"limits\.feedSockets": removed.*set listen\.feedSocketPort.*"\/c\.json"/,
    );
  }
});

Deno.test("config: manager.example.json loads, fairness budgets and all", async () => {
  const path = new URL("./manager.example.json", import.meta.url).pathname;
  const { config } = await loadConfig(["--config", path], () => undefined);
  assert.equal(config.limits?.jsonDepth, 32);
  assert.equal(config.fairness?.tenant?.concurrentLists, 4);
});

Deno.test("config: bgp.advertisableRanges are CIDRs, none by default (nothing is advertised)", async () => {
  const env = { KNITTER_MANAGER_ADMIN_TOKEN: ADMIN };
  const { config } = await load(["--config", "/etc/knitter.json"], env, withFile(FILE));
  assert.equal(config.bgp, undefined);
  const ranges = ["10.64.0.0/10", "fd00::/8"];
  const given = await load(
    ["--config", "/etc/knitter.json"],
    env,
    withFile({ ...FILE, bgp: { advertisableRanges: ranges } }),
  );
  assert.deepEqual(given.config.bgp, { advertisableRanges: ranges });
  for (const bad of ["10.64.0.1/10", "10.0.0.0/33", "public"]) {
    await configError(
      load(
        ["--config", "/etc/knitter.json"],
        env,
        withFile({ ...FILE, bgp: { advertisableRanges: [bad] } }),
      ),
      new RegExp(`bgp.advertisableRanges: "${bad.replaceAll(".", "\\.")}" is not a CIDR`),
    );
  }
});
