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

/** `method path` with a tenant's `token`; asserts the status, answers the body (none: undefined). */
export async function tenantApi(
  stack: Stack,
  token: string,
  req: { method: string; path: string; body?: unknown },
  status: number,
  // deno-lint-ignore no-explicit-any
): Promise<any> {
  const r = await fetch(`${stack.managerUrl}/api/v1/${req.path}`, {
    method: req.method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: req.body === undefined ? undefined : JSON.stringify(req.body),
  });
  const text = await r.text();
  assert.equal(r.status, status, `${req.method} ${req.path}: ${text}`);
  return text ? JSON.parse(text) : undefined;
}
