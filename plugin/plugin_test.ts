/**
 * The real plugin, run as a CNI runtime runs it (a process with CNI_* env and the config on
 * stdin), against a scripted agent socket: a unix-socket HTTP server that records each request
 * and answers what the test says. The real agent's end-to-end tests live with the agent.
 */
import assert from "node:assert/strict";
import type { CniRequest } from "./protocol.ts";

const MAIN = new URL("./main.ts", import.meta.url).pathname;
const WRAPPER = new URL("./knitter", import.meta.url).pathname;

const ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "0123abcd",
  CNI_NETNS: "/var/run/netns/cni-1234",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_UID=u-1",
  CNI_PATH: "/opt/cni/bin",
};

const RESULT_1_1 = {
  cniVersion: "1.1.0",
  interfaces: [{ name: "eth0", mac: "02:42:0a:01:00:05", mtu: 1450, sandbox: ENV.CNI_NETNS }],
  ips: [
    { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 },
    { address: "fd00:1::5/64", interface: 0 },
  ],
  routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1", priority: 100 }],
  dns: { nameservers: ["10.1.0.1"] },
};

interface Seen {
  route: string;
  body: CniRequest;
}

interface ScriptedAgent {
  socket: string;
  seen: Seen[];
  /** What the next requests get; default: 200 with RESULT_1_1 for ADD, {} otherwise. */
  answer?: (seen: Seen) => Response | Promise<Response>;
}

async function withAgent(test: (agent: ScriptedAgent, dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "knitter-plugin-" });
  const agent: ScriptedAgent = { socket: `${dir}/agent.sock`, seen: [] };
  const server = Deno.serve(
    { path: agent.socket, transport: "unix", onListen() {} },
    async (req) => {
      const seen = { route: new URL(req.url).pathname, body: await req.json() };
      agent.seen.push(seen);
      if (agent.answer) return agent.answer(seen);
      return Response.json(seen.body.command === "ADD" ? RESULT_1_1 : {});
    },
  );
  try {
    await test(agent, dir);
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout parsed, when there is any. */
  json?: Record<string, unknown>;
}

/**
 * Execs the plugin with exactly `env`: "deno" runs main.ts (plus what Deno needs to find its
 * cache), "wrapper" the sh wrapper with deno named in KNITTER_DENO, "bare" the wrapper with `env`
 * and nothing else, as `env -i` does (a runtime's minimal environment).
 */
async function cni(
  env: Record<string, string>,
  stdin: unknown,
  how: "deno" | "wrapper" | "bare" = "deno",
  wrapper = WRAPPER,
): Promise<Outcome> {
  const keep = ["HOME", "DENO_DIR", "XDG_CACHE_HOME"].filter((k) => Deno.env.get(k));
  const base = Object.fromEntries(keep.map((k) => [k, Deno.env.get(k)!]));
  const cmd = how === "deno"
    ? new Deno.Command(Deno.execPath(), {
      args: ["run", "--quiet", "--no-config", "--allow-all", MAIN],
      env: { ...base, NO_COLOR: "1", ...env },
      clearEnv: true,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    })
    // Exec'd by path, as a runtime does, so $0 is what the wrapper resolves.
    : new Deno.Command(wrapper, {
      env: how === "bare"
        ? env
        : { ...base, PATH: "/usr/bin:/bin", KNITTER_DENO: Deno.execPath(), ...env },
      clearEnv: true,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    });
  const child = cmd.spawn();
  const writer = child.stdin.getWriter();
  // A wrapper that fails early exits without reading stdin; the runtime then sees EPIPE, as here.
  await writer.write(
    new TextEncoder().encode(typeof stdin === "string" ? stdin : JSON.stringify(stdin)),
  ).then(() => writer.close()).catch((err) => {
    if (!(err instanceof Deno.errors.BrokenPipe)) throw err;
  });
  const out = await child.output();
  const stdout = new TextDecoder().decode(out.stdout);
  return {
    code: out.code,
    stdout,
    stderr: new TextDecoder().decode(out.stderr),
    json: stdout.trim() ? JSON.parse(stdout) : undefined,
  };
}

function conf(agent: ScriptedAgent | string, extra: Record<string, unknown> = {}) {
  const socket = typeof agent === "string" ? agent : agent.socket;
  return {
    cniVersion: "1.1.0",
    name: "knitter-net",
    type: "knitter",
    agentSocket: socket,
    ...extra,
  };
}

Deno.test("plugin process: VERSION answers without an agent", async () => {
  const out = await cni({ CNI_COMMAND: "VERSION" }, { cniVersion: "0.4.0" });
  assert.equal(out.code, 0);
  assert.deepEqual(out.json, {
    cniVersion: "0.4.0",
    supportedVersions: ["0.4.0", "1.0.0", "1.1.0"],
  });
  assert.equal(out.stderr, "");
});

Deno.test("plugin process against a scripted agent socket: ADD in 1.1.0, 1.0.0 and 0.4.0", async () => {
  await withAgent(async (agent) => {
    const networks = ["blue", { name: "red", interface: "net1", ip: "10.2.0.9" }];
    // Every capability reaches the agent as the runtime wrote it (bandwidth: checked there).
    const runtimeConfig = {
      ips: ["10.1.0.5/24"],
      mac: "02:42:0a:01:00:05",
      bandwidth: { ingressRate: 20_000_000, ingressBurst: 400_000, egressRate: 10_000_000 },
    };
    const expected: Record<string, unknown> = {
      "1.1.0": RESULT_1_1,
      "1.0.0": {
        ...RESULT_1_1,
        cniVersion: "1.0.0",
        interfaces: [{ name: "eth0", mac: "02:42:0a:01:00:05", sandbox: ENV.CNI_NETNS }],
        routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }],
      },
      "0.4.0": {
        ...RESULT_1_1,
        cniVersion: "0.4.0",
        interfaces: [{ name: "eth0", mac: "02:42:0a:01:00:05", sandbox: ENV.CNI_NETNS }],
        ips: [
          { address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0, version: "4" },
          { address: "fd00:1::5/64", interface: 0, version: "6" },
        ],
        routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }],
      },
    };
    for (const version of ["1.1.0", "1.0.0", "0.4.0"]) {
      agent.seen.length = 0;
      const config = conf(agent, { cniVersion: version, networks, runtimeConfig, custom: [1] });
      const out = await cni(ENV, config);
      assert.equal(out.code, 0, out.stdout + out.stderr);
      assert.deepEqual(out.json, expected[version], version);
      assert.deepEqual(agent.seen, [{
        route: "/v1/cni/add",
        body: {
          command: "ADD",
          containerId: "0123abcd",
          netns: "/var/run/netns/cni-1234",
          ifName: "eth0",
          args: {
            IgnoreUnknown: "1",
            K8S_POD_NAMESPACE: "shop",
            K8S_POD_NAME: "web-0",
            K8S_POD_UID: "u-1",
          },
          path: "/opt/cni/bin",
          config,
        },
      }]);
    }
  });
});

Deno.test("plugin process against a scripted agent socket: CHECK and DEL carry prevResult", async () => {
  await withAgent(async (agent) => {
    const prevResult = { ...RESULT_1_1, cniVersion: "1.0.0" };
    const check = await cni({ ...ENV, CNI_COMMAND: "CHECK" }, conf(agent, { prevResult }));
    assert.deepEqual([check.code, check.stdout], [0, ""]);
    // DEL after the netns is gone: the runtime leaves CNI_NETNS out, and that is fine.
    const env: Record<string, string> = { ...ENV, CNI_COMMAND: "DEL" };
    delete env.CNI_NETNS;
    const del = await cni(env, conf(agent, { prevResult }));
    assert.deepEqual([del.code, del.stdout], [0, ""]);
    assert.deepEqual(agent.seen.map((s) => [s.route, s.body.netns, s.body.config.prevResult]), [
      ["/v1/cni/check", ENV.CNI_NETNS, prevResult],
      ["/v1/cni/del", "", prevResult],
    ]);
  });
});

Deno.test("plugin process against a scripted agent socket: GC and STATUS", async () => {
  await withAgent(async (agent) => {
    const valid = [{ containerID: "0123abcd", ifname: "eth0" }];
    const gc = await cni(
      { CNI_COMMAND: "GC", CNI_PATH: "/opt/cni/bin" },
      conf(agent, { "cni.dev/valid-attachments": valid, "cni.dev/attachments": valid }),
    );
    assert.deepEqual([gc.code, gc.stdout], [0, ""]);
    assert.deepEqual(agent.seen[0].body.config["cni.dev/valid-attachments"], valid);
    assert.deepEqual([agent.seen[0].body.containerId, agent.seen[0].body.ifName], ["", ""]);
    agent.answer = () =>
      Response.json({ cniVersion: "1.1.0", code: 51, msg: "uplink down", details: "eth1" }, {
        status: 503,
      });
    const status = await cni({ CNI_COMMAND: "STATUS" }, conf(agent));
    assert.equal(status.code, 1);
    assert.deepEqual(status.json, {
      cniVersion: "1.1.0",
      code: 51,
      msg: "uplink down",
      details: "eth1",
    });
  });
});

Deno.test("plugin process against a scripted agent socket: agent errors pass through", async () => {
  await withAgent(async (agent) => {
    agent.answer = () =>
      Response.json({
        cniVersion: "1.1.0",
        code: 7,
        msg: "unknown network",
        details: 'network "green" does not exist in tenant "shop"',
      }, { status: 422 });
    const out = await cni(ENV, conf(agent, { cniVersion: "1.0.0", networks: ["green"] }));
    assert.equal(out.code, 1);
    assert.deepEqual(out.json, {
      cniVersion: "1.0.0",
      code: 7,
      msg: "unknown network",
      details: 'network "green" does not exist in tenant "shop"',
    });
    // "Nothing to do" on DEL is success even when the agent words it as unknown container.
    agent.answer = () =>
      Response.json({ cniVersion: "1.1.0", code: 3, msg: "no such" }, { status: 404 });
    const del = await cni({ ...ENV, CNI_COMMAND: "DEL" }, conf(agent));
    assert.deepEqual([del.code, del.stdout], [0, ""]);
  });
});

Deno.test("plugin process: an agent that is not there is 11 (DEL too), 50 for STATUS", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-plugin-" });
  try {
    const socket = `${dir}/agent.sock`;
    for (const command of ["ADD", "DEL", "CHECK", "GC"]) {
      const out = await cni({ ...ENV, CNI_COMMAND: command }, conf(socket));
      assert.equal(out.code, 1);
      assert.equal(out.json?.code, 11, command);
      assert.equal(
        out.json?.msg,
        `try again later: the knitter agent at ${socket} is not answering`,
      );
      assert.match(String(out.json?.details), /does not exist; is the knitter-agent DaemonSet/);
    }
    const status = await cni({ CNI_COMMAND: "STATUS" }, conf(socket));
    assert.equal(status.json?.code, 50);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plugin process against a scripted agent socket: a slow agent times out as 11", async () => {
  await withAgent(async (agent) => {
    agent.answer = () => new Promise((r) => setTimeout(() => r(Response.json({})), 1000));
    const started = performance.now();
    const out = await cni(ENV, conf(agent, { agentTimeoutSeconds: 0.2 }));
    assert.equal(out.json?.code, 11);
    assert.match(String(out.json?.details), /no answer within 0.2s/);
    assert.ok(performance.now() - started < 900, "the plugin waited for the agent");
  });
});

Deno.test("plugin process: bad environment is 4 naming the variables", async () => {
  const env: Record<string, string> = { ...ENV, CNI_IFNAME: "much-too-long-ifname" };
  delete env.CNI_NETNS;
  const out = await cni(env, conf("/nowhere.sock"));
  assert.equal(out.code, 1);
  assert.equal(out.json?.code, 4);
  assert.equal(out.json?.msg, "invalid or missing environment variables: CNI_NETNS, CNI_IFNAME");
  const unknown = await cni({ ...ENV, CNI_COMMAND: "UPDATE" }, conf("/nowhere.sock"));
  assert.equal(unknown.json?.code, 4);
  assert.match(String(unknown.json?.details), /CNI_COMMAND "UPDATE" is not one of/);
});

Deno.test("plugin process: undecodable stdin is 6, version problems 1, config problems 7", async () => {
  const garbage = await cni(ENV, "cniVersion=1.1.0");
  assert.deepEqual([garbage.code, garbage.json?.code, garbage.json?.cniVersion], [1, 6, "1.1.0"]);
  const missing = await cni(ENV, { name: "n", type: "knitter" });
  assert.equal(missing.json?.code, 1);
  assert.equal(missing.json?.msg, "the network configuration has no cniVersion");
  const old = await cni(ENV, { cniVersion: "0.3.1", name: "n", type: "knitter" });
  assert.equal(old.json?.code, 1);
  assert.equal(old.json?.details, "knitter supports 0.4.0, 1.0.0, 1.1.0");
  const noType = await cni(ENV, { cniVersion: "1.0.0", name: "n" });
  assert.deepEqual([noType.json?.code, noType.json?.cniVersion], [7, "1.0.0"]);
});

Deno.test("plugin process against a scripted agent socket: one debug line on stderr", async () => {
  await withAgent(async (agent) => {
    const quiet = await cni(ENV, conf(agent));
    assert.equal(quiet.stderr, "");
    const loud = await cni({ ...ENV, KNITTER_PLUGIN_DEBUG: "1" }, conf(agent));
    const lines = loud.stderr.trim().split("\n");
    assert.equal(lines.length, 1);
    assert.deepEqual(
      [JSON.parse(lines[0]).msg, JSON.parse(lines[0]).outcome],
      ["ADD", "ok"],
    );
    const byConf = await cni(ENV, conf(agent, { logLevel: "debug" }));
    assert.equal(byConf.stderr.trim().split("\n").length, 1);
  });
});

/** A runtime's environment for a plugin: CNI_* and a minimal PATH, nothing of ours. */
const BARE = { ...ENV, PATH: "/usr/sbin:/usr/bin:/sbin:/bin" };

Deno.test("plugin wrapper with a runtime's bare environment: deno and the socket come from where it is installed and from the config", async () => {
  await withAgent(async (agent) => {
    // No KNITTER_DENO, no deno on PATH, no KNITTER_AGENT_SOCKET: deno from the source tree's
    // .tools/bin, the socket from agentSocket.
    const add = await cni(BARE, conf(agent), "bare");
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.deepEqual(add.json, RESULT_1_1);
    // An empty PATH, as some runtimes pass, works too; so does no PATH at all.
    const { PATH: _, ...noPath } = BARE;
    for (const env of [{ ...BARE, PATH: "" }, noPath]) {
      const del = await cni({ ...env, CNI_COMMAND: "DEL" }, conf(agent), "bare");
      assert.deepEqual([del.code, del.stdout], [0, ""], JSON.stringify(env));
    }
    assert.deepEqual(agent.seen.map((s) => s.route), ["/v1/cni/add", "/v1/cni/del", "/v1/cni/del"]);
  });
});

Deno.test("plugin wrapper: the config's agentSocket is granted; KNITTER_AGENT_SOCKET is only the default", async () => {
  await withAgent(async (agent, dir) => {
    // The config names the agent, the variable another socket: the config wins.
    const env = { ...BARE, KNITTER_AGENT_SOCKET: `${dir}/elsewhere.sock` };
    const add = await cni(env, conf(agent), "bare");
    assert.equal(add.code, 0, add.stdout + add.stderr);
    // Pretty-printed, with space around the colon, as a person writes it.
    const pretty = JSON.stringify(conf(agent), null, 2).replace('":', '" :');
    assert.equal((await cni(BARE, pretty, "bare")).code, 0);
    // A config without agentSocket falls back to the variable.
    const { agentSocket: _, ...noSocket } = conf(agent);
    const fallback = await cni({ ...BARE, KNITTER_AGENT_SOCKET: agent.socket }, noSocket, "bare");
    assert.equal(fallback.code, 0, fallback.stdout + fallback.stderr);
    assert.equal(agent.seen.length, 3);
    // Deno still gets exactly one socket: an agentSocket the wrapper did not take (a nested key
    // read last) is refused by Deno's permissions, and said so, before anything is sent.
    const nested = conf(agent, { args: { cni: { agentSocket: `${dir}/other.sock` } } });
    const refused = await cni(BARE, nested, "bare");
    assert.equal(refused.json?.code, 7);
    assert.match(String(refused.json?.msg), /not permitted to use the agent socket/);
    assert.equal(agent.seen.length, 3);
  });
});

Deno.test("plugin wrapper with a bare environment: STATUS and DEL against a socket that is not there are CNI errors naming it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-plugin-" });
  try {
    const socket = `${dir}/agent.sock`;
    const status = await cni({ CNI_COMMAND: "STATUS", PATH: "" }, conf(socket), "bare");
    assert.equal(status.code, 1);
    assert.deepEqual([status.json?.code, status.json?.cniVersion], [50, "1.1.0"]);
    assert.equal(
      status.json?.msg,
      `plugin not available: the knitter agent at ${socket} is not answering`,
    );
    const del = await cni(
      { ...BARE, CNI_COMMAND: "DEL" },
      conf(socket, { cniVersion: "0.4.0" }),
      "bare",
    );
    assert.equal(del.code, 1);
    assert.deepEqual([del.json?.code, del.json?.cniVersion], [11, "0.4.0"]);
    assert.match(String(del.json?.details), new RegExp(`${socket} does not exist`));
    const version = await cni({ CNI_COMMAND: "VERSION" }, { cniVersion: "1.0.0" }, "bare");
    assert.equal(version.code, 0, version.stdout + version.stderr);
    assert.deepEqual(version.json?.supportedVersions, ["0.4.0", "1.0.0", "1.1.0"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plugin wrapper: an agentSocket it cannot grant is code 7 (50 for STATUS) from the wrapper itself", async () => {
  const cases: [unknown, RegExp][] = [
    ["agent.sock", /not a usable socket path: "agent.sock"/],
    ["/run/my agent.sock", /not a usable socket path/],
    ["/run/a.sock,/etc", /not a usable socket path/],
    ["/run/\\u0061.sock", /not a usable socket path/],
    ["", /not a usable socket path/],
    [5, /is not a string/],
    [null, /is not a string/],
  ];
  for (const [socket, msg] of cases) {
    const config = conf("/x", { cniVersion: "1.0.0", agentSocket: socket });
    const out = await cni({ ...BARE, CNI_COMMAND: "DEL" }, config, "bare");
    assert.equal(out.code, 1, JSON.stringify(socket));
    assert.deepEqual([out.json?.code, out.json?.cniVersion], [7, "1.0.0"], JSON.stringify(socket));
    assert.match(String(out.json?.msg), msg);
    assert.match(String(out.json?.details), /absolute path/);
    const status = await cni({ CNI_COMMAND: "STATUS" }, config, "bare");
    assert.equal(status.json?.code, 50);
  }
  // From the variable as well, when the config has no agentSocket.
  const { agentSocket: _, ...noSocket } = conf("/x");
  const env = { ...BARE, CNI_COMMAND: "DEL", KNITTER_AGENT_SOCKET: "relative.sock" };
  const out = await cni(env, noSocket, "bare");
  assert.equal(out.json?.code, 7);
  assert.match(String(out.json?.msg), /KNITTER_AGENT_SOCKET is not a usable socket path/);
});

/** Deno in a fixed system location would be found before PATH, making "not found" untestable. */
const SYSTEM_DENO = ["/usr/local/bin/deno", "/usr/bin/deno", "/root/.deno/bin/deno"]
  .find((p) => {
    try {
      return Deno.statSync(p).isFile;
    } catch {
      return false;
    }
  });

Deno.test("plugin wrapper installed away from the source tree: deno beside the plugin in the CNI bin dir or beside the wrapper, else a CNI error saying where it looked", async () => {
  const dir = await Deno.makeTempDir({ prefix: "knitter-plugin-" });
  try {
    // The plugin's files in lib/ (no .tools beside), linked from a CNI bin dir as the runtime sees it.
    await Deno.mkdir(`${dir}/lib`);
    await Deno.mkdir(`${dir}/bin`);
    for (const e of Deno.readDirSync(new URL(".", import.meta.url))) {
      if (e.isFile) await Deno.copyFile(new URL(e.name, import.meta.url), `${dir}/lib/${e.name}`);
    }
    await Deno.chmod(`${dir}/lib/knitter`, 0o755);
    const plugin = `${dir}/bin/knitter`;
    await Deno.symlink(`${dir}/lib/knitter`, plugin);
    const version = () =>
      cni({ CNI_COMMAND: "VERSION", PATH: "/usr/bin:/bin" }, {}, "bare", plugin);
    if (SYSTEM_DENO) {
      console.log(`  (deno in ${SYSTEM_DENO}: the "not found" case is not checked here)`);
    } else {
      const lost = await version();
      assert.equal(lost.code, 1);
      assert.deepEqual([lost.json?.code, lost.json?.msg], [
        999,
        "knitter plugin: no deno runtime found",
      ]);
      assert.match(String(lost.json?.details), new RegExp(`${dir}/bin/deno`));
      assert.match(String(lost.json?.details), /set KNITTER_DENO/);
      const status = await cni({ CNI_COMMAND: "STATUS" }, conf("/x"), "bare", plugin);
      assert.equal(status.json?.code, 50);
      assert.match(String(status.json?.msg), /no deno runtime found/);
    }
    // A deno installed beside the plugin in the CNI bin dir.
    await Deno.symlink(Deno.execPath(), `${dir}/bin/deno`);
    assert.equal((await version()).code, 0);
    // Or beside the resolved wrapper.
    await Deno.remove(`${dir}/bin/deno`);
    await Deno.symlink(Deno.execPath(), `${dir}/lib/deno`);
    assert.equal((await version()).code, 0);
    // KNITTER_DENO overrides, and a wrong one is an error rather than a silent fallback.
    const wrong = await cni(
      { CNI_COMMAND: "VERSION", KNITTER_DENO: `${dir}/nowhere/deno` },
      {},
      "bare",
      plugin,
    );
    assert.equal(wrong.json?.code, 999);
    assert.match(String(wrong.json?.msg), /KNITTER_DENO=.*nowhere\/deno is not an executable file/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plugin wrapper installed as a symlink finds main.ts beside its target; a missing main.ts is a CNI error", async () => {
  await withAgent(async (agent, dir) => {
    const env = BARE;
    const link = `${dir}/bin/knitter`;
    await Deno.mkdir(`${dir}/bin`);
    await Deno.symlink(WRAPPER, link);
    const add = await cni(env, conf(agent), "bare", link);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.deepEqual(add.json, RESULT_1_1);
    // A copy (not a link) has no main.ts beside it: the runtime still reads a CNI error.
    const copy = `${dir}/bin/knitter-copy`;
    await Deno.copyFile(WRAPPER, copy);
    await Deno.chmod(copy, 0o755);
    const lost = await cni(env, conf(agent), "bare", copy);
    assert.equal(lost.code, 1);
    assert.equal(lost.json?.code, 999);
    assert.match(String(lost.json?.msg), /main\.ts not found/);
    assert.match(String(lost.json?.details), /KNITTER_PLUGIN_MAIN/);
    // KNITTER_PLUGIN_MAIN points a copy at the source tree (and so at its .tools/bin/deno).
    const pointed = await cni({ ...env, KNITTER_PLUGIN_MAIN: MAIN }, conf(agent), "bare", copy);
    assert.equal(pointed.code, 0, pointed.stdout + pointed.stderr);
    assert.equal(agent.seen.length, 2);
  });
});
