import assert from "node:assert/strict";
import { CNI_CODE, CniError } from "./contract.ts";
import {
  AgentFailure,
  type AgentFailureKind,
  fromAgentError,
  incompatibleVersion,
  toCniError,
} from "./errors.ts";

const SOCK = "/run/knitter/agent.sock";

Deno.test("errors: the body carries the given cniVersion and omits empty details", () => {
  assert.deepEqual(new CniError(7, "bad").toBody("1.0.0"), {
    cniVersion: "1.0.0",
    code: 7,
    msg: "bad",
  });
  assert.deepEqual(new CniError(4, "m", "d").toBody("0.4.0"), {
    cniVersion: "0.4.0",
    code: 4,
    msg: "m",
    details: "d",
  });
  assert.equal(incompatibleVersion("0.3.1").code, CNI_CODE.incompatibleVersion);
});

Deno.test("errors: an unreachable agent is 11 (try again), or 50 for STATUS", () => {
  const kinds: AgentFailureKind[] = ["missing", "refused", "denied", "timeout", "broken"];
  for (const kind of kinds) {
    const f = new AgentFailure(kind, SOCK, "why");
    const add = toCniError(f, "ADD");
    assert.equal(add.code, 11, kind);
    assert.match(
      add.msg,
      /^try again later: the knitter agent at \/run\/knitter\/agent.sock is not answering$/,
    );
    assert.equal(toCniError(f, "DEL").code, 11);
    assert.equal(toCniError(f, "STATUS").code, 50);
  }
  assert.match(toCniError(new AgentFailure("missing", SOCK, ""), "ADD").details, /DaemonSet/);
});

Deno.test("errors: permission and protocol failures get their own codes", () => {
  const np = new AgentFailure("not-permitted", "/elsewhere.sock", "x");
  assert.equal(toCniError(np, "ADD").code, CNI_CODE.invalidConfig);
  assert.match(toCniError(np, "ADD").details, /KNITTER_AGENT_SOCKET/);
  assert.equal(toCniError(np, "STATUS").code, 50);
  const bad = new AgentFailure("bad-reply", SOCK, "not HTTP");
  assert.equal(toCniError(bad, "CHECK").code, CNI_CODE.internal);
  assert.equal(toCniError(bad, "STATUS").code, 50);
});

Deno.test("errors: the agent's own CNI errors pass through unchanged", () => {
  const body = JSON.stringify({ cniVersion: "1.1.0", code: 51, msg: "degraded", details: "ovs" });
  const e = fromAgentError("STATUS", SOCK, 500, body);
  assert.deepEqual([e.code, e.msg, e.details], [51, "degraded", "ovs"]);
  assert.equal(fromAgentError("ADD", SOCK, 409, '{"code":120,"msg":"exists"}').code, 120);
});

Deno.test("errors: non-CNI agent failures are described, 503 meaning try again", () => {
  assert.equal(fromAgentError("ADD", SOCK, 503, "starting").code, 11);
  const e = fromAgentError("ADD", SOCK, 500, "<html>oops</html>");
  assert.equal(e.code, CNI_CODE.internal);
  assert.match(e.details, /HTTP 500 without a CNI error body: <html>oops/);
  assert.equal(fromAgentError("ADD", SOCK, 400, '{"code":0,"msg":"x"}').code, CNI_CODE.internal);
  assert.equal(fromAgentError("ADD", SOCK, 500, "x".repeat(500)).details.length < 300, true);
});

Deno.test("errors: anything else is internal, and CniErrors are not wrapped", () => {
  const own = new CniError(6, "decode");
  assert.equal(toCniError(own, "ADD"), own);
  const e = toCniError(new TypeError("boom"), "ADD");
  assert.deepEqual([e.code, e.details], [999, "TypeError: boom"]);
  assert.equal(toCniError("str", "GC").details, "str");
});
