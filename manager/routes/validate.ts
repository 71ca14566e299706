/** A request's query or body through its schema: the value as the schema outputs it, or a 400. */
import type { z } from "zod";
import { ApiError } from "../errors.ts";

/**
 * The value parsed by `schema`, typed as it outputs; otherwise a 400 `invalid_request` naming the
 * field (`where`: "query", or "" for the body) and what is wrong with it.
 */
export function parse<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  let at = issue.path;
  let message = issue.message;
  if (issue.code === "unrecognized_keys") {
    // The unknown field is the one to name, not the object that holds it.
    at = [...issue.path, issue.keys[0]];
    const more = issue.keys.slice(1).map((k) => `"${k}"`).join(", ");
    message = more ? `unknown field (so are ${more})` : "unknown field";
  }
  const path = at.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("")
    .replace(/^\./, "");
  const field = [where, path].filter(Boolean).join(".") || where || "body";
  throw new ApiError("invalid_request", `${field}: ${message}`, field);
}
