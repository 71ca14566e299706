import assert from "node:assert/strict";
import { ManagerThrottledError } from "@knitter/common";
import { CommandFailed } from "./errors.ts";
import { explainManagerError } from "./failures.ts";

Deno.test("knitctl says which limit a 429 met after its retries, and what to do", () => {
  const throttled = new ManagerThrottledError(
    "The manager at https://m:9527 refused GET /api/v1/tenants/acme/networks/blue/ports 4 tries in a row, its caller over a limit: tenant acme is over its rate of 100 requests a second (bursts of 500); retry in 1 s",
    1000,
    4,
  );
  const err = explainManagerError(throttled);
  assert.ok(err instanceof CommandFailed);
  assert.match(err.message, /over its rate of 100 requests a second/);
  assert.match(err.message, /\(429 too_many_requests\)/);
  // What to do: wait and run it again, fewer at once, or have the admin raise the budget.
  assert.match(err.message, /wait/);
  assert.match(err.message, /fairness/);
});
