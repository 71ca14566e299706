/** The path parameters of the API and the schema each must satisfy, wherever a route names it. */
import type { z } from "zod";
import { ApiError } from "../errors.ts";
import * as S from "../schemas.ts";

export const PARAMS = {
  tenant: S.Name,
  network: S.Name,
  physnet: S.Name,
  group: S.Name,
  router: S.Name,
  mirror: S.Name,
  service: S.Name,
  node: S.scopedParam(S.NodeName),
  port: S.scopedParam(S.PortId),
  cluster: S.Name,
  claim: S.ClaimName,
  pool: S.Name,
  address: S.FloatingAddress,
} satisfies Record<string, z.ZodType<string>>;

export type ParamName = keyof typeof PARAMS;

/** The schema of a path parameter; routes name only these (routes/route.ts checks their paths). */
export function paramSchema(name: string): z.ZodType<string> {
  if (!isParamName(name)) throw new Error(`no path parameter "${name}" in PARAMS`);
  return PARAMS[name];
}

function isParamName(name: string): name is ParamName {
  return Object.hasOwn(PARAMS, name);
}

/** The path's parameters, each checked by its schema (400 naming the first that fails). */
export function checkParams(given: Record<string, string>): Record<string, string> {
  const params = { ...given };
  for (const [name, value] of Object.entries(params)) {
    const r = paramSchema(name).safeParse(value);
    if (!r.success) {
      throw new ApiError(
        "invalid_request",
        `path ${name} "${value}" ${r.error.issues[0].message}`,
        name,
      );
    }
  }
  return params;
}
