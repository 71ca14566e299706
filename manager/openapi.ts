/** Builds the OpenAPI 3.1 document from the route table and the schemas that validate requests. */
import { z } from "zod";
import { ERROR_STATUS } from "./errors.ts";
import type { ApiRoute } from "./routes.ts";
import { paramSchema } from "./routes/params.ts";
import { ErrorSchema } from "./schemas.ts";

const json = (schema: z.ZodType, io: "input" | "output") => ({
  "application/json": { schema: z.toJSONSchema(schema, { io, unrepresentable: "any" }) },
});

export function openApiDocument(routes: ApiRoute[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  const errorStatuses = [...new Set(Object.values(ERROR_STATUS))].sort();
  for (const r of routes) {
    const names = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
    const parameters: unknown[] = names.map((name) => ({
      name,
      in: "path",
      required: true,
      schema: z.toJSONSchema(paramSchema(name), { io: "input", unrepresentable: "any" }),
    }));
    if (r.query instanceof z.ZodObject) {
      for (const [name, schema] of Object.entries(r.query.shape)) {
        parameters.push({
          name,
          in: "query",
          required: false,
          schema: z.toJSONSchema(schema as z.ZodType, { io: "input", unrepresentable: "any" }),
        });
      }
    }
    const responses: Record<string, unknown> = {
      [r.ok.status]: {
        description: r.ok.description,
        ...(r.ok.schema ? { content: json(r.ok.schema, "output") } : {}),
      },
    };
    for (const a of r.also ?? []) {
      responses[a.status] = {
        description: a.description,
        ...(r.ok.schema ? { content: json(r.ok.schema, "output") } : {}),
      };
    }
    for (const s of errorStatuses) {
      const codes = Object.entries(ERROR_STATUS).filter(([, v]) => v === s).map(([k]) => k);
      responses[s] = {
        description: `error: ${codes.join(", ")}`,
        content: json(ErrorSchema, "output"),
      };
    }
    (paths[r.path] ??= {})[r.method.toLowerCase()] = {
      summary: r.summary,
      tags: [r.tag],
      "x-access": r.access,
      parameters,
      ...(r.body ? { requestBody: { required: true, content: json(r.body, "input") } } : {}),
      responses,
      security: [{ bearer: [] }],
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Knitter manager API",
      version: "1",
      description:
        "Tenants, networks, physnets, IP groups, ports, nodes and clusters. Every /api route needs a bearer token; " +
        "x-access says which scope reaches it (admin, tenant, owner, node, shared, infra, operator, any). " +
        "Node and monitor tokens belong to a cluster: they name nodes and ports bare, and read other " +
        "clusters' as NAME@CLUSTER.",
    },
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    paths,
  };
}
