/**
 * The daemons' one configuration loader: defaults, then the file, then the environment, then
 * flags; objects merged key by key; every mistake says what failed, why, where the value came from
 * (or where a missing one can be given) and what to do.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { DaemonConfigError, type DaemonConfigSpec, loadDaemonConfig } from "./daemon_config.ts";

const Schema = z.strictObject({
  manager: z.strictObject({ url: z.url(), token: z.string().min(16) }),
  listen: z.strictObject({
    hostname: z.string().default("127.0.0.1"),
    port: z.int().min(0).max(65535).default(9000),
  }).default({ hostname: "127.0.0.1", port: 9000 }),
  logLevel: z.enum(["debug", "info"]).default("info"),
});
type Config = z.infer<typeof Schema>;

const SPEC: DaemonConfigSpec<Config> = {
  usage: "Usage: widgetd [--config FILE] [--listen PORT]",
  schema: Schema,
  env: {
    WIDGET_MANAGER_URL: "manager.url",
    WIDGET_MANAGER_TOKEN: "manager.token",
    WIDGET_LOG_LEVEL: "logLevel",
    WIDGET_PORT: { at: "listen.port", parse: Number },
  },
  flags: { listen: { at: "listen", parse: (t) => ({ port: Number(t) }) } },
};

const TOKEN = "a-token-of-16-characters";
const FILE = "/etc/widget.json";

function load(args: string[], env: Record<string, string> = {}, file?: unknown) {
  return loadDaemonConfig(SPEC, args, {
    env: (name) => env[name],
    readFile: (path) =>
      path === FILE && file !== undefined
        ? Promise.resolve(typeof file === "string" ? file : JSON.stringify(file))
        : Promise.reject(new Deno.errors.NotFound(`no such file: ${path}`)),
  });
}

async function refused(p: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof DaemonConfigError, `a DaemonConfigError, got ${err}`);
    assert.match(err.message, message);
    return true;
  });
}

Deno.test("daemon config: defaults, then the file, then the environment, then flags", async () => {
  const file = { manager: { url: "http://file:1", token: TOKEN }, listen: { hostname: "0.0.0.0" } };
  const fromFile = (await load(["--config", FILE], {}, file)).config;
  assert.deepEqual(fromFile.listen, { hostname: "0.0.0.0", port: 9000 });
  assert.equal(fromFile.manager.url, "http://file:1");

  const env = { WIDGET_MANAGER_URL: "http://env:2", WIDGET_PORT: "9100", WIDGET_LOG_LEVEL: "" };
  const fromEnv = (await load(["--config", FILE], env, file)).config;
  assert.equal(fromEnv.manager.url, "http://env:2");
  assert.equal(fromEnv.manager.token, TOKEN, "a variable changes only what it names");
  assert.deepEqual(fromEnv.listen, { hostname: "0.0.0.0", port: 9100 });
  assert.equal(fromEnv.logLevel, "info", "an empty variable is no value");

  const fromFlag = (await load(["--config", FILE, "--listen", "9200"], env, file)).config;
  assert.deepEqual(fromFlag.listen, { hostname: "0.0.0.0", port: 9200 }, "merged, not replaced");
});

Deno.test("daemon config: --help reads nothing else; an unknown flag shows the usage", async () => {
  assert.equal((await load(["--help"])).help, true);
  assert.equal((await load(["-h", "--config", "/missing.json"])).help, true);
  await refused(load(["--colour", "red"]), /--colour[\s\S]*Usage: widgetd/);
});

Deno.test("daemon config: a bad value names where it came from and what to do", async () => {
  const file = { manager: { url: "http://file:1", token: "short" } };
  await refused(
    load(["--config", FILE], {}, file),
    /^Invalid configuration at "manager.token": .*16.* \(from the file "\/etc\/widget.json"\); correct the file$/,
  );
  await refused(
    load(["--config", FILE], { WIDGET_MANAGER_URL: "not a url" }, file),
    /^Invalid configuration at "manager.url": .* \(from WIDGET_MANAGER_URL\); correct it$/,
  );
  await refused(
    load(["--listen", "70000"], { WIDGET_MANAGER_URL: "http://m:1", WIDGET_MANAGER_TOKEN: TOKEN }),
    /^Invalid configuration at "listen.port": .* \(from --listen\); correct it$/,
  );
  await refused(
    load(["--config", FILE], {}, { manager: { url: "http://f:1", token: TOKEN }, colour: "red" }),
    /^Invalid configuration at "\(root\)": .*colour.* \(from the file "\/etc\/widget.json"\)/,
  );
});

Deno.test("daemon config: a missing value says where it can be given", async () => {
  await refused(
    load([]),
    /^Invalid configuration at "manager": .*; give it in a configuration file \(--config\) or by WIDGET_MANAGER_URL, WIDGET_MANAGER_TOKEN$/,
  );
  await refused(
    load(["--config", FILE], {}, { manager: { url: "http://file:1" } }),
    /^Invalid configuration at "manager.token": .*; give it in "\/etc\/widget.json" or by WIDGET_MANAGER_TOKEN$/,
  );
});

Deno.test("daemon config: an unreadable or broken file is named", async () => {
  await refused(
    load(["--config", "/missing.json"]),
    /^Cannot read configuration file "\/missing.json": no such file.*; check the path/,
  );
  await refused(
    load(["--config", FILE], {}, "{ manager: "),
    /^The configuration file "\/etc\/widget.json" is not valid JSON: .*; correct the file$/,
  );
});
