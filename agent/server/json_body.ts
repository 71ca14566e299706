/** A route's JSON body checked against its schema, or the 400 that says what is wrong with it. */
import type { Context } from "hono";
import type { z } from "zod";

export async function jsonBody<T>(
  c: Context,
  schema: z.ZodType<T>,
  what: string,
): Promise<{ data: T } | { refused: Response }> {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    return {
      refused: c.json({ error: { code: "bad_request", message: "The body is not JSON" } }, 400),
    };
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return { data: parsed.data };
  const issue = parsed.error.issues[0];
  const message = `Malformed ${what}: ${issue.path.join(".")}: ${issue.message}`;
  return { refused: c.json({ error: { code: "bad_request", message } }, 400) };
}
