import assert from "node:assert/strict";
import { ManagerError, ManagerThrottledError } from "@knitter/common";
import { CNI_CODE } from "@knitter/plugin/contract";
import { toCniError } from "./cni_errors.ts";

const LIMIT = "tenant acme has 32 requests in progress, its limit; retry when one is answered";

Deno.test("a 429 that outlived the client's retries is CNI error 11, naming the manager's limit", () => {
  const throttled = new ManagerThrottledError(
    `The manager at https://m:9527 refused PUT /api/v1/tenants/acme/networks/blue/ports/p 4 tries in a row, its caller over a limit: ${LIMIT}`,
    1000,
    4,
  );
  const err = toCniError(throttled, "allocating blue's port");
  assert.equal(err.code, CNI_CODE.tryAgainLater);
  assert.match(err.msg, /allocating blue's port/);
  assert.match(err.msg, /32 requests in progress, its limit/);
  assert.match(err.msg, /try again later/);
});

Deno.test("a bare 429 (a client that did not retry) is CNI error 11 too", () => {
  const err = toCniError(new ManagerError(429, "too_many_requests", LIMIT), "allocating");
  assert.equal(err.code, CNI_CODE.tryAgainLater);
  assert.match(err.msg, /its limit/);
});

Deno.test("a 401 says the agent's token is refused; a 403 about the request does not blame the token", () => {
  const unknown = toCniError(new ManagerError(401, "unauthorized", "Unknown token"), "ADD");
  assert.equal(unknown.code, CNI_CODE.invalidConfig);
  assert.match(unknown.msg, /the agent's manager token is refused: check its configuration/);
  const bind = toCniError(
    new ManagerError(
      403,
      "forbidden",
      'A token of node "n1" may bind a port of tenant "globex" only to a pod of namespace "globex" (a pod\'s tenant is its namespace), not "acme"',
    ),
    "ADD",
  );
  assert.equal(bind.code, CNI_CODE.invalidConfig);
  assert.match(bind.msg, /only to a pod of namespace "globex"/);
  assert.doesNotMatch(bind.msg, /token is refused/);
});
