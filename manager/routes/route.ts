/**
 * One route of the API, typed from its schemas, the way Hono's validators type a handler:
 *
 *   route({ method: "POST", path: "/tenants/{tenant}/routers", ... })
 *     .body(S.RouterCreate)
 *     .handle(({ ctx, params, body }) => ...)
 *
 * The handler's `params` are the names its path template holds, and its `query` and `body` are
 * what the schemas output (z.output), so a schema that does not fit the service function it feeds
 * is a type error. What `handle` returns is data (RouteDef): app.ts serves it, openapi.ts
 * documents it, both from the same schemas that validate the request.
 */
import { z } from "zod";
import type { Access, Principal, TokenTable } from "../auth.ts";
import type { Ctx } from "../service/context.ts";
import type { ParamName } from "./params.ts";
import { parse } from "./validate.ts";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** The parameter names of a path template: "/tenants/{tenant}/ipgroups/{group}": tenant | group. */
type ParamsOf<P extends string> = P extends `${string}{${infer Name}}${infer Rest}`
  ? Name | ParamsOf<Rest>
  : never;

/** A path template's parameters, each checked by its schema in params.ts. */
export type Params<P extends string> = { [K in ParamsOf<P>]: string };

/**
 * Nothing for a template naming only parameters params.ts knows; otherwise a property no route
 * has, so that the type error names the parameter ("Property 'unknownPathParameter' is missing").
 */
type KnownPath<P extends string> = [ParamsOf<P>] extends [ParamName] ? unknown
  : { unknownPathParameter: Exclude<ParamsOf<P>, ParamName> };

/** What a route is, for its caller and its document. */
export interface RouteMeta<P extends string = string> {
  method: Method;
  /** OpenAPI-style template under the API's base (routes.ts): /tenants/{tenant} */
  path: P;
  summary: string;
  access: Access;
  /** Success status and schema; error answers are documented for every route. */
  ok: { status: number; schema?: z.ZodType; description: string };
  /** Other success statuses (a PUT that found the port already there answers 200). */
  also?: { status: number; description: string }[];
}

/** A handler's inputs: all of them validated, typed from the route's path and schemas. */
export interface Input<P extends string, Q, B> {
  ctx: Ctx;
  principal: Principal;
  params: Params<P>;
  query: Q;
  body: B;
  /** The manager's tokens, for what a route tells of them (never a token itself). */
  tokens: TokenTable;
}

export interface Reply {
  status: number;
  body?: unknown;
}

/** A request once its caller is admitted and allowed (app.ts): its params checked, nothing read. */
export interface Arrival {
  ctx: Ctx;
  principal: Principal;
  tokens: TokenTable;
  params: Record<string, string>;
  query: Record<string, string>;
  /** The JSON body, read within the request's limits. */
  readBody(): Promise<unknown>;
  /** Scopes the names a cluster's token sent to its cluster, in place (service/cluster_view.ts). */
  scope(request: { params: Record<string, string>; query: unknown; body: unknown }): void;
}

/** A route as data: what it is, its schemas, and how it answers an arrival. */
export interface RouteDef extends RouteMeta {
  query: z.ZodType;
  /** Absent: the route reads no body. */
  body?: z.ZodType;
  run(arrival: Arrival): Promise<Reply>;
}

/** The query of a route that takes none: any parameter is refused as unknown. */
export const EMPTY_QUERY = z.strictObject({});
/** The body of a route that takes none: it is never read. */
const NO_BODY = z.undefined();

class RouteBuilder<P extends string, Q extends z.ZodType, B extends z.ZodType> {
  constructor(
    private readonly meta: RouteMeta<P>,
    private readonly querySchema: Q,
    private readonly bodySchema: B,
  ) {}

  /** Validates the query with `schema`; the handler gets what it outputs. */
  query<T extends z.ZodType>(schema: T): RouteBuilder<P, T, B> {
    return new RouteBuilder(this.meta, schema, this.bodySchema);
  }

  /** Reads a JSON body and validates it with `schema`; the handler gets what it outputs. */
  body<T extends z.ZodType>(schema: T): RouteBuilder<P, Q, T> {
    return new RouteBuilder(this.meta, this.querySchema, schema);
  }

  handle(handler: (input: Input<P, z.output<Q>, z.output<B>>) => Promise<Reply>): RouteDef {
    const { meta, querySchema, bodySchema } = this;
    const names = paramNames(meta.path);
    const reads = !isNoBody(bodySchema);
    return {
      ...meta,
      query: querySchema,
      ...(reads ? { body: bodySchema } : {}),
      run: async (arrival) => {
        const { ctx, principal, tokens, params } = arrival;
        if (!hasParams<P>(names, params)) {
          throw new Error(`${meta.method} ${meta.path} was served without its path parameters`);
        }
        const query = parse(querySchema, arrival.query, "query");
        const body = parse(bodySchema, reads ? await arrival.readBody() : undefined, "");
        arrival.scope({ params, query, body });
        return handler({ ctx, principal, tokens, params, query, body });
      },
    };
  }
}

/** A route with no query and no body until `.query()` and `.body()` say otherwise. */
export function route<const P extends string>(
  meta: RouteMeta<P> & KnownPath<P>,
): RouteBuilder<P, typeof EMPTY_QUERY, typeof NO_BODY> {
  return new RouteBuilder(meta, EMPTY_QUERY, NO_BODY);
}

function isNoBody(schema: z.ZodType): boolean {
  return schema === NO_BODY;
}

function paramNames(path: string): string[] {
  return [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
}

function hasParams<P extends string>(
  names: string[],
  params: Record<string, string>,
): params is Record<string, string> & Params<P> {
  return names.every((name) => typeof params[name] === "string");
}

export const ok = (body: unknown, status = 200): Reply => ({ status, body });
export const items = (list: unknown[]): Reply => ok({ items: list });
export const noContent: Reply = { status: 204 };

/** A resource of the API: its routes under one OpenAPI tag, served as one Hono sub-app (app.ts). */
export interface Resource {
  tag: string;
  routes: RouteDef[];
}
