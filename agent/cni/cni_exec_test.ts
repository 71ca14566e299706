import assert from "node:assert/strict";
import { CNI_CODE, CniError } from "@knitter/plugin/contract";
import type { CniRequest } from "@knitter/plugin/protocol";
import { type CniHandler, execCni } from "./cni_exec.ts";

const ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "abc",
  CNI_NETNS: "/var/run/netns/p",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "K8S_POD_NAME=p",
  CNI_PATH: "/opt/cni/bin",
};
const CONF = { cniVersion: "1.0.0", name: "net", type: "knitter" };

/** A handler that records each request and answers `reply` (or throws it). */
function handler(reply: unknown | Error): { handle: CniHandler; seen: CniRequest[] } {
  const seen: CniRequest[] = [];
  const handle: CniHandler = (req) => {
    seen.push(req);
    return reply instanceof Error ? Promise.reject(reply) : Promise.resolve(reply);
  };
  return { handle, seen };
}

const unused: CniHandler = () => Promise.reject(new Error("must not be called"));

function exec(env: Record<string, string>, conf: unknown, handle: CniHandler) {
  return execCni(env, typeof conf === "string" ? conf : JSON.stringify(conf), handle);
}

Deno.test("exec: VERSION echoes the asked version without running anything", async () => {
  const v = await exec({ CNI_COMMAND: "VERSION" }, { cniVersion: "1.0.0" }, unused);
  assert.deepEqual(JSON.parse(v.stdout), {
    cniVersion: "1.0.0",
    supportedVersions: ["0.4.0", "1.0.0", "1.1.0"],
  });
  const blank = await exec({ CNI_COMMAND: "VERSION" }, "", unused);
  assert.deepEqual([JSON.parse(blank.stdout).cniVersion, blank.exitCode], ["1.1.0", 0]);
});

Deno.test("exec: ADD runs the request from env and config, prints the result in the config's version", async () => {
  const result = { cniVersion: "1.1.0", interfaces: [{ name: "eth0", mtu: 1400 }], ips: [] };
  const h = handler(result);
  const conf = { ...CONF, prevResult: { cniVersion: "1.0.0" }, runtimeConfig: { mac: "m" } };
  const out = await exec(ENV, conf, h.handle);
  assert.equal(out.exitCode, 0);
  assert.ok(out.stdout.endsWith("}\n"));
  assert.deepEqual(JSON.parse(out.stdout), {
    cniVersion: "1.0.0",
    interfaces: [{ name: "eth0" }],
    ips: [],
  });
  assert.deepEqual(h.seen, [{
    command: "ADD",
    containerId: "abc",
    netns: "/var/run/netns/p",
    ifName: "eth0",
    args: { K8S_POD_NAME: "p" },
    path: "/opt/cni/bin",
    config: conf,
  }]);
});

Deno.test("exec: success of DEL, CHECK, GC and STATUS prints nothing", async () => {
  for (const cmd of ["DEL", "CHECK", "GC", "STATUS"]) {
    const out = await exec({ ...ENV, CNI_COMMAND: cmd }, CONF, handler({ ignored: true }).handle);
    assert.deepEqual([out.exitCode, out.stdout], [0, ""], cmd);
  }
});

Deno.test("exec: DEL of an attachment the agent does not know is success; CHECK of it is code 3", async () => {
  const gone = new CniError(CNI_CODE.unknownContainer, "unknown container");
  const del = await exec({ ...ENV, CNI_COMMAND: "DEL" }, CONF, handler(gone).handle);
  assert.deepEqual([del.exitCode, del.stdout], [0, ""]);
  const check = await exec({ ...ENV, CNI_COMMAND: "CHECK" }, CONF, handler(gone).handle);
  assert.deepEqual(JSON.parse(check.stdout), {
    cniVersion: "1.0.0",
    code: 3,
    msg: "unknown container",
  });
  assert.equal(check.exitCode, 1);
});

Deno.test("exec: an ADD that ends without a result object is an internal error", async () => {
  for (const reply of [undefined, [], "x", null]) {
    const out = await exec(ENV, CONF, handler(reply).handle);
    assert.deepEqual([out.exitCode, JSON.parse(out.stdout).code], [1, 999], String(reply));
  }
});

Deno.test("exec: bad env is 4, bad stdin 6, version 1, config 7; in the config's version, else 1.1.0", async () => {
  const cases: [Record<string, string>, unknown, number, string][] = [
    [{ CNI_COMMAND: "ADD" }, { ...CONF, cniVersion: "0.4.0" }, 4, "0.4.0"],
    [{}, CONF, 4, "1.0.0"],
    [ENV, "", 6, "1.1.0"],
    [ENV, "{", 6, "1.1.0"],
    [ENV, { ...CONF, cniVersion: "0.3.1" }, 1, "1.1.0"],
    [ENV, { ...CONF, agentTimeoutSeconds: "5" }, 7, "1.0.0"],
  ];
  for (const [env, conf, code, version] of cases) {
    const out = await exec(env, conf, unused);
    const body = JSON.parse(out.stdout);
    assert.deepEqual([out.exitCode, body.code, body.cniVersion], [1, code, version], out.stdout);
  }
  const crash = await exec(ENV, CONF, () => Promise.reject(new RangeError("bug")));
  assert.deepEqual([crash.code, JSON.parse(crash.stdout).msg], [999, "ADD failed: bug"]);
});
