import assert from "node:assert/strict";
import type { AgentCall } from "./agent_client.ts";
import { AgentFailure } from "./errors.ts";
import type { HttpReply } from "./http1.ts";
import type { CniRequest } from "./protocol.ts";
import { runCommand } from "./run_command.ts";

const ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "abc",
  CNI_NETNS: "/var/run/netns/p",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "K8S_POD_NAME=p",
  CNI_PATH: "/opt/cni/bin",
};
const CONF = { cniVersion: "1.0.0", name: "net", type: "knitter" };

interface Sent {
  socket: string;
  route: string;
  request: CniRequest;
  timeoutMs: number;
}

/** A fake agent: records what it was sent and answers `reply` (or throws it). */
function fakeAgent(reply: HttpReply | Error): { call: AgentCall; sent: Sent[] } {
  const sent: Sent[] = [];
  const call: AgentCall = (socket, route, body, timeoutMs) => {
    sent.push({ socket, route, request: JSON.parse(body), timeoutMs });
    return reply instanceof Error ? Promise.reject(reply) : Promise.resolve(reply);
  };
  return { call, sent };
}

function run(env: Record<string, string>, conf: unknown, call: AgentCall) {
  const stdin = typeof conf === "string" ? conf : JSON.stringify(conf);
  return runCommand((n) => env[n], stdin, call);
}

const unused: AgentCall = () => Promise.reject(new Error("must not be called"));

Deno.test("run: VERSION echoes the asked version and never calls the agent", async () => {
  const v = await run({ CNI_COMMAND: "VERSION" }, { cniVersion: "1.0.0" }, unused);
  assert.deepEqual(JSON.parse(v.stdout), {
    cniVersion: "1.0.0",
    supportedVersions: ["0.4.0", "1.0.0", "1.1.0"],
  });
  const blank = await run({ CNI_COMMAND: "VERSION" }, "", unused);
  assert.equal(JSON.parse(blank.stdout).cniVersion, "1.1.0");
  assert.equal(blank.exitCode, 0);
});

Deno.test("run: ADD sends env and config, prints the result in the config's version", async () => {
  const result = { cniVersion: "1.1.0", interfaces: [{ name: "eth0", mtu: 1400 }], ips: [] };
  const agent = fakeAgent({ status: 200, body: JSON.stringify(result) });
  const conf = { ...CONF, prevResult: { cniVersion: "1.0.0" }, runtimeConfig: { mac: "m" } };
  const out = await run(ENV, conf, agent.call);
  assert.equal(out.exitCode, 0);
  assert.deepEqual(JSON.parse(out.stdout), {
    cniVersion: "1.0.0",
    interfaces: [{ name: "eth0" }],
    ips: [],
  });
  assert.deepEqual(agent.sent, [{
    socket: "/run/knitter/agent.sock",
    route: "/v1/cni/add",
    timeoutMs: 30_000,
    request: {
      command: "ADD",
      containerId: "abc",
      netns: "/var/run/netns/p",
      ifName: "eth0",
      args: { K8S_POD_NAME: "p" },
      path: "/opt/cni/bin",
      config: conf,
    },
  }]);
});

Deno.test("run: the socket comes from the config, then KNITTER_AGENT_SOCKET", async () => {
  const agent = fakeAgent({ status: 200, body: "{}" });
  const env = { ...ENV, CNI_COMMAND: "CHECK", KNITTER_AGENT_SOCKET: "/env.sock" };
  await run(env, CONF, agent.call);
  await run(env, { ...CONF, agentSocket: "/conf.sock" }, agent.call);
  assert.deepEqual(agent.sent.map((s) => s.socket), ["/env.sock", "/conf.sock"]);
});

Deno.test("run: success of DEL, CHECK, GC and STATUS prints nothing", async () => {
  for (const cmd of ["DEL", "CHECK", "GC", "STATUS"]) {
    const agent = fakeAgent({ status: 200, body: '{"ignored":true}' });
    const out = await run({ ...ENV, CNI_COMMAND: cmd }, CONF, agent.call);
    assert.deepEqual([out.exitCode, out.stdout], [0, ""], cmd);
    assert.equal(agent.sent[0].route, `/v1/cni/${cmd.toLowerCase()}`);
  }
});

Deno.test("run: DEL of an attachment the agent does not know is success", async () => {
  const gone = { status: 404, body: '{"cniVersion":"1.1.0","code":3,"msg":"unknown container"}' };
  const del = await run({ ...ENV, CNI_COMMAND: "DEL" }, CONF, fakeAgent(gone).call);
  assert.deepEqual([del.exitCode, del.stdout], [0, ""]);
  const check = await run({ ...ENV, CNI_COMMAND: "CHECK" }, CONF, fakeAgent(gone).call);
  assert.deepEqual(JSON.parse(check.stdout), {
    cniVersion: "1.0.0",
    code: 3,
    msg: "unknown container",
  });
});

Deno.test("run: an ADD answer that is not a result object is an internal error", async () => {
  for (const body of ["", "[]", "not json", "null"]) {
    const out = await run(ENV, CONF, fakeAgent({ status: 200, body }).call);
    assert.equal(out.exitCode, 1);
    assert.equal(JSON.parse(out.stdout).code, 999, body);
  }
});

Deno.test("run: errors are printed in the config's version, else 1.1.0", async () => {
  const down = fakeAgent(new AgentFailure("missing", "/s", "connect: no such file"));
  const out = await run(ENV, { ...CONF, cniVersion: "0.4.0" }, down.call);
  assert.equal(out.exitCode, 1);
  assert.deepEqual(Object.keys(JSON.parse(out.stdout)), ["cniVersion", "code", "msg", "details"]);
  assert.equal(JSON.parse(out.stdout).cniVersion, "0.4.0");
  assert.equal(JSON.parse(out.stdout).code, 11);
  const old = await run(ENV, { ...CONF, cniVersion: "0.3.1" }, unused);
  assert.deepEqual([JSON.parse(old.stdout).cniVersion, JSON.parse(old.stdout).code], ["1.1.0", 1]);
  const crash = await run(ENV, CONF, () => Promise.reject(new RangeError("bug")));
  assert.equal(JSON.parse(crash.stdout).details, "RangeError: bug");
});

Deno.test("run: one debug line when asked for, by env or by config", async () => {
  const ok = fakeAgent({ status: 200, body: "{}" });
  const quiet = await run(ENV, CONF, ok.call);
  assert.equal(quiet.log, undefined);
  const byEnv = await run({ ...ENV, KNITTER_PLUGIN_DEBUG: "1" }, CONF, ok.call);
  const line = JSON.parse(byEnv.log!);
  assert.deepEqual([line.component, line.msg, line.containerId, line.outcome], [
    "knitter-plugin",
    "ADD",
    "abc",
    "ok",
  ]);
  const failed = await run(ENV, { ...CONF, logLevel: "debug", name: "bad/name" }, unused);
  assert.match(JSON.parse(failed.log!).outcome, /^error 7: /);
});
