/** The stack's manager API from a test that expects one answer: the body, or a failed assertion. */
import assert from "node:assert/strict";
import type { Stack } from "../../devstack/stack.ts";

/** `method path` with `body` as the stack's admin; asserts the status (default 201), answers the body. */
export async function api(
  stack: Stack,
  method: string,
  path: string,
  body: unknown,
  status = 201,
  // deno-lint-ignore no-explicit-any
): Promise<any> {
  const r = await stack.api(method, path, body);
  assert.equal(r.status, status, `${method} ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}
