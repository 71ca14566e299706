import assert from "node:assert/strict";
import { CniError } from "@knitter/plugin/contract";
import { checkConfig, decodeConfig, sniffVersion } from "./cni_config.ts";
const BASE = { cniVersion: "1.1.0", name: "knitter-net", type: "knitter" };

function code(f: () => unknown): CniError {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof CniError, String(e));
    return e;
  }
  assert.fail("expected a CniError");
}

Deno.test("config: stdin that is empty, not JSON or not an object is code 6", () => {
  for (const text of ["", "  \n", "{", "cniVersion: 1.0.0", "[]", "null", '"x"']) {
    assert.equal(code(() => decodeConfig(text)).code, 6, text);
  }
  assert.match(code(() => decodeConfig("{")).details, /not JSON/);
});

Deno.test("config: missing or unsupported cniVersion is code 1 naming what is supported", () => {
  const missing = code(() => checkConfig({ name: "n", type: "knitter" }));
  assert.equal(missing.code, 1);
  assert.equal(missing.msg, "the network configuration has no cniVersion");
  assert.equal(missing.details, "knitter supports 0.4.0, 1.0.0, 1.1.0");
  for (const v of ["0.3.1", "2.0.0", ""]) {
    assert.equal(code(() => checkConfig({ ...BASE, cniVersion: v })).code, 1, v);
  }
  assert.equal(code(() => checkConfig({ ...BASE, cniVersion: 1 })).code, 7);
});

Deno.test("config: name, type, agentSocket, networks and timeout problems are code 7", () => {
  const bad: Record<string, unknown>[] = [
    { name: undefined },
    { name: "bad/name" },
    { name: 3 },
    { type: undefined },
    { type: "" },
    { agentSocket: "agent.sock" },
    { agentSocket: 5 },
    // null is not "absent": the plugin refuses it too, so the two never disagree on the socket.
    { agentSocket: null },
    { networks: "blue" },
    { networks: ["blue", { interface: "net1" }] },
    { networks: [""] },
    { agentTimeoutSeconds: 0 },
    { agentTimeoutSeconds: "5" },
    { agentTimeoutSeconds: 1e9 },
  ];
  for (const patch of bad) {
    const e = code(() => checkConfig({ ...BASE, ...patch }));
    assert.equal(e.code, 7, JSON.stringify(patch));
  }
  assert.match(code(() => checkConfig({ ...BASE, networks: [{}] })).msg, /networks\[0\]/);
});

Deno.test("config: a good config keeps every key, its socket and timeout", () => {
  const raw = {
    ...BASE,
    cniVersion: "0.4.0",
    networks: ["blue", { name: "red", interface: "net1" }],
    runtimeConfig: { ips: ["10.0.0.5/24"], mac: "02:00:00:00:00:01" },
    prevResult: { cniVersion: "0.4.0", ips: [] },
    somethingElse: { kept: true },
  };
  const conf = checkConfig(raw);
  assert.equal(conf.cniVersion, "0.4.0");
  assert.equal(conf, raw);
  const own = { ...BASE, agentSocket: "/tmp/a.sock", agentTimeoutSeconds: 0.5 };
  assert.equal(checkConfig(own), own);
});

Deno.test("config: sniffVersion only reports versions the plugin speaks", () => {
  assert.equal(sniffVersion('{"cniVersion":"1.0.0"}'), "1.0.0");
  assert.equal(sniffVersion('{"cniVersion":"0.3.1"}'), undefined);
  assert.equal(sniffVersion("null"), undefined);
  assert.equal(sniffVersion("{"), undefined);
});
