/**
 * Issue 15, the agent's socket: every malformed request (not JSON, missing fields, nulls, wrong
 * types, huge bodies) is a 400 with a message, and reaches nothing behind the socket.
 */
import assert from "node:assert/strict";
import type { Logger } from "@knitter/common";
import type { Attacher } from "../cni/attach.ts";
import type { ExtraInterfaces } from "../extra/extra_interface.ts";
import { agentApp, MAX_AGENT_BODY_BYTES } from "./server.ts";

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** An agent app whose attacher and extra interfaces only count the calls that reach them. */
function app() {
  const calls: string[] = [];
  const record = (what: string) => () => {
    calls.push(what);
    return Promise.resolve({});
  };
  const attacher = {
    add: record("add"),
    del: record("del"),
    check: record("check"),
    gc: record("gc"),
  };
  const extra = {
    list: () => Promise.resolve([]),
    attach: () => {
      calls.push("attach");
      return Promise.resolve({ view: {}, created: true });
    },
    detach: () => {
      calls.push("detach");
      return Promise.resolve({});
    },
  };
  const a = agentApp({
    attacher: attacher as unknown as Attacher,
    notReady: () => null,
    log: quiet,
    extra: extra as unknown as ExtraInterfaces,
  });
  const post = async (path: string, body: string | ReadableStream, method = "POST") => {
    const res = await a.request(path, {
      method,
      headers: { "content-type": "application/json" },
      body,
    });
    const text = await res.text();
    return { status: res.status, text };
  };
  return { calls, post };
}

const VALID = {
  command: "ADD",
  containerId: "c1",
  netns: "/var/run/netns/p1",
  ifName: "eth0",
  args: { K8S_POD_NAMESPACE: "acme", K8S_POD_NAME: "p1" },
  path: "/opt/cni/bin",
  config: { cniVersion: "1.1.0", name: "knitter", type: "knitter" },
};

Deno.test("agent socket: malformed CNI requests are 400 with a message and reach nothing", async () => {
  const { calls, post } = app();
  const cases: unknown[] = [
    "not json",
    "",
    "null",
    "[]",
    "42",
    '"text"',
    {},
    { ...VALID, containerId: null },
    { ...VALID, containerId: 7 },
    { ...VALID, netns: undefined },
    { ...VALID, ifName: ["eth0"] },
    { ...VALID, args: null },
    { ...VALID, args: { K8S_POD_NAME: 5 } },
    { ...VALID, args: "K8S_POD_NAME=p1" },
    { ...VALID, path: {} },
    { ...VALID, config: null },
    { ...VALID, config: "x" },
    { ...VALID, config: { ...VALID.config, cniVersion: 1 } },
    { ...VALID, config: { ...VALID.config, networks: "blue" } },
    { ...VALID, config: { ...VALID.config, networks: [null] } },
    { ...VALID, config: { ...VALID.config, networks: [{ interface: "eth1" }] } },
    { ...VALID, config: { ...VALID.config, runtimeConfig: { ips: "10.1.0.5" } } },
    { ...VALID, config: { ...VALID.config, runtimeConfig: null } },
    { ...VALID, config: { ...VALID.config, prevResult: [] } },
    { ...VALID, config: { ...VALID.config, tenant: { name: "acme" } } },
    { ...VALID, containerId: "c".repeat(5000) },
  ];
  for (const command of ["add", "del", "check", "gc", "status"]) {
    for (const body of cases) {
      const r = await post(
        `/v1/cni/${command}`,
        typeof body === "string" ? body : JSON.stringify(body),
      );
      assert.equal(r.status, 400, `${command} ${JSON.stringify(body)?.slice(0, 80)}: ${r.text}`);
      const err = JSON.parse(r.text);
      assert.equal(err.code, 6, r.text);
      assert.ok(typeof err.msg === "string" && err.msg.length > 10, r.text);
    }
  }
  assert.deepEqual(calls, []);
  // The well-formed request goes through.
  assert.equal((await post("/v1/cni/add", JSON.stringify(VALID))).status, 200);
  assert.deepEqual(calls, ["add"]);
});

Deno.test("agent socket: a huge body is a 400, announced or streamed", async () => {
  const { calls, post } = app();
  const huge = JSON.stringify({ ...VALID, path: "x".repeat(MAX_AGENT_BODY_BYTES) });
  const r = await post("/v1/cni/add", huge);
  assert.equal(r.status, 400);
  assert.match(JSON.parse(r.text).msg, /exceeds/);
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < 20; i++) c.enqueue(new TextEncoder().encode(" ".repeat(100_000)));
      c.close();
    },
  });
  const s = await post("/v1/interfaces", stream);
  assert.equal(s.status, 400);
  assert.match(JSON.parse(s.text).error.message, /exceeds/);
  assert.deepEqual(calls, []);
});

Deno.test("agent socket: malformed attach and detach requests are 400 and reach nothing", async () => {
  const { calls, post } = app();
  const bodies: unknown[] = [
    "nope",
    "null",
    {},
    { netns: null, ifName: "eth1", network: "blue" },
    { netns: "x", ifName: 5, network: "blue" },
    { pid: 99999999999, ifName: "eth1", network: "blue" },
    { pid: -1, ifName: "eth1", network: "blue" },
    { netns: "x", ifName: "eth1", network: "blue", mtu: 1e9 },
    { netns: "x", ifName: "eth1", network: "blue", routes: null },
    { netns: "x", ifName: "eth1", network: "blue", routes: [{ dst: null }] },
  ];
  for (const body of bodies) {
    for (const method of ["POST", "DELETE"]) {
      const r = await post(
        "/v1/interfaces",
        typeof body === "string" ? body : JSON.stringify(body),
        method,
      );
      assert.equal(r.status, 400, `${method} ${JSON.stringify(body)}: ${r.text}`);
      assert.ok(JSON.parse(r.text).error.message.length > 5, r.text);
    }
  }
  assert.deepEqual(calls, []);
});
