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

/** Execs the plugin with exactly `env` (plus what Deno needs to find its cache). */
async function cni(
  env: Record<string, string>,
  stdin: unknown,
  how: "deno" | "wrapper" = "deno",
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
      env: { ...base, PATH: "/usr/bin:/bin", KNITTER_DENO: Deno.execPath(), ...env },
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
    const runtimeConfig = { ips: ["10.1.0.5/24"], mac: "02:42:0a:01:00:05" };
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

Deno.test("plugin wrapper against a scripted agent socket: minimal permissions suffice", async () => {
  await withAgent(async (agent, dir) => {
    const env = { ...ENV, KNITTER_AGENT_SOCKET: agent.socket };
    const add = await cni(env, conf(agent), "wrapper");
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.deepEqual(add.json, RESULT_1_1);
    // The config may omit agentSocket: KNITTER_AGENT_SOCKET is the fallback default.
    const { agentSocket: _, ...noSocket } = conf(agent);
    assert.equal((await cni(env, noSocket, "wrapper")).code, 0);
    // A socket the wrapper did not grant is refused by Deno, and said so.
    const elsewhere = await cni(env, conf(`${dir}/other.sock`), "wrapper");
    assert.equal(elsewhere.json?.code, 7);
    assert.match(String(elsewhere.json?.msg), /not permitted to use the agent socket/);
    assert.equal(agent.seen.length, 2);
  });
});

Deno.test("plugin wrapper installed as a symlink finds main.ts beside its target; a missing main.ts is a CNI error", async () => {
  await withAgent(async (agent, dir) => {
    const env = { ...ENV, KNITTER_AGENT_SOCKET: agent.socket };
    const link = `${dir}/bin/knitter`;
    await Deno.mkdir(`${dir}/bin`);
    await Deno.symlink(WRAPPER, link);
    const add = await cni(env, conf(agent), "wrapper", link);
    assert.equal(add.code, 0, add.stdout + add.stderr);
    assert.deepEqual(add.json, RESULT_1_1);
    // A copy (not a link) has no main.ts beside it: the runtime still reads a CNI error.
    const copy = `${dir}/bin/knitter-copy`;
    await Deno.copyFile(WRAPPER, copy);
    await Deno.chmod(copy, 0o755);
    const lost = await cni(env, conf(agent), "wrapper", copy);
    assert.equal(lost.code, 1);
    assert.equal(lost.json?.code, 999);
    assert.match(String(lost.json?.msg), /main\.ts not found/);
    assert.match(String(lost.json?.details), /KNITTER_PLUGIN_MAIN/);
    // KNITTER_PLUGIN_MAIN points a copy at the source tree.
    const pointed = await cni({ ...env, KNITTER_PLUGIN_MAIN: MAIN }, conf(agent), "wrapper", copy);
    assert.equal(pointed.code, 0, pointed.stdout + pointed.stderr);
    assert.equal(agent.seen.length, 2);
  });
});
