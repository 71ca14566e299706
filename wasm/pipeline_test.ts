/**
 * agent/PIPELINE.md describes the pipeline for people; pipeline.ts is what the engines read. These
 * tests keep the two the same: the table list (number, name, default flow), the priorities, and
 * the flow kinds (builder, table, priority).
 */
import assert from "node:assert/strict";
import { FLOW_KINDS, FLOW_TABLES, PRIORITY, TABLE } from "./pipeline.ts";
import { ACL_KINDS, ACL_PRIORITY, ACL_TABLES } from "./acl_pipeline.ts";
import { compileFlows } from "./flows.ts";
import { SERVICE_KINDS, SERVICE_PRIORITY, SERVICE_TABLES } from "./service_pipeline.ts";
import { scenarios } from "./testdata/scenarios.ts";

const doc = await Deno.readTextFile(new URL("../agent/PIPELINE.md", import.meta.url));

/** The rows of the Markdown table whose header row starts with `first`, as trimmed cells. */
function rows(first: string): string[][] {
  const lines = doc.split("\n");
  const head = lines.findIndex((l) => l.startsWith("|") && cells(l)[0] === first);
  assert.ok(head >= 0, `PIPELINE.md has no table headed "${first}"`);
  const out: string[][] = [];
  for (let i = head + 2; i < lines.length && lines[i].startsWith("|"); i++) {
    out.push(cells(lines[i]));
  }
  return out;
}

function cells(line: string): string[] {
  return line.split("|").slice(1, -1).map((c) => c.trim());
}

const unquote = (s: string) => s.replace(/^`|`$/g, "");

Deno.test("PIPELINE.md lists the tables of pipeline.ts, in order, with their defaults", () => {
  const documented = rows("table").map(([id, name, , fallback]) => ({
    id: Number(id),
    name,
    fallback,
  }));
  assert.deepEqual(
    documented,
    FLOW_TABLES.map((t) => ({ id: t.id, name: t.name, fallback: t.default })),
  );
  for (const t of FLOW_TABLES) assert.equal(TABLE[t.name], t.id);
  assert.deepEqual(Object.keys(TABLE), FLOW_TABLES.map((t) => t.name));
});

Deno.test("PIPELINE.md lists the priorities of pipeline.ts, highest first", () => {
  const documented = rows("priority").map(([value, name]) => [name, Number(value)]);
  assert.deepEqual(documented, Object.entries(PRIORITY));
});

Deno.test("PIPELINE.md lists the flow kinds of pipeline.ts with their tables and priorities", () => {
  const documented = rows("builder").map(([builder, table, priority]) => [
    unquote(builder),
    table === "each" ? table : Number(table),
    Number(priority),
  ]);
  const kinds = Object.entries(FLOW_KINDS).map(([name, k]) => [name, k.table, k.priority]);
  // The defaults row stands for the default flow of each table (FLOW_TABLES).
  assert.deepEqual(documented, [...kinds, ["defaults", "each", PRIORITY.DEFAULT]]);
});

Deno.test("PIPELINE.md's Security groups section lists the tables, priorities and kinds of acl_pipeline.ts", () => {
  const tables = rows("acl table").map(([id, name, , fallback]) => [Number(id), name, fallback]);
  assert.deepEqual(tables, ACL_TABLES.map((t) => [t.id, t.name, t.default]));
  const priorities = rows("acl priority").map(([value, name]) => [name, Number(value)]);
  assert.deepEqual(priorities, Object.entries(ACL_PRIORITY));
  const kinds = rows("acl builder").map(([b, table, prio]) => [unquote(b), +table, +prio]);
  assert.deepEqual(kinds, Object.entries(ACL_KINDS).map(([n, k]) => [n, k.table, k.priority]));
});

Deno.test("PIPELINE.md's Security groups flows are those the golden model security_groups adds", async () => {
  const at = doc.indexOf("## Security groups");
  assert.deepEqual(codeBlock(at), await addedFlows("security_groups", "acls"));
});

Deno.test("PIPELINE.md's Services section lists the table, priorities and kinds of service_pipeline.ts, and the flows and groups the golden model services adds", async () => {
  const tables = rows("service table").map((
    [id, name, , fallback],
  ) => [Number(id), name, fallback]);
  assert.deepEqual(tables, SERVICE_TABLES.map((t) => [t.id, t.name, t.default]));
  const priorities = rows("service priority").map(([value, name]) => [name, Number(value)]);
  assert.deepEqual(priorities, Object.entries(SERVICE_PRIORITY));
  const kinds = rows("service builder").map(([b, table, prio]) => [unquote(b), +table, +prio]);
  assert.deepEqual(kinds, Object.entries(SERVICE_KINDS).map(([n, k]) => [n, k.table, k.priority]));
  const at = doc.indexOf("## Services");
  assert.deepEqual(codeBlock(at), await addedFlows("services", "services"));
});

Deno.test("PIPELINE.md's Services section shows the flows and groups the golden model services_routed adds", async () => {
  const at = doc.indexOf("The flows and groups the golden model `services_routed` adds");
  assert.deepEqual(codeBlock(at), await addedFlows("services_routed", "services"));
});

/** The lines of the first text block of PIPELINE.md after offset `at`. */
function codeBlock(at: number): string[] {
  return doc.slice(at).match(/```text\n([\s\S]*?)```/)![1].split("\n").filter(Boolean);
}

/** The golden lines of model `name` that its `section` adds (those it has not without it). */
async function addedFlows(name: string, section: "acls" | "services"): Promise<string[]> {
  const golden = await Deno.readTextFile(new URL(`./testdata/${name}.flows`, import.meta.url));
  const plain = new Set(compileFlows({ ...scenarios[name], [section]: undefined }));
  return golden.split("\n").filter((l) => l && !plain.has(l));
}
