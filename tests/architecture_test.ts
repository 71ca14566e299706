/**
 * docs/architecture.md against the code, without root: what the doc says about the package
 * boundaries, the pipeline's tables and the files it names must stay true.
 *
 * - Boundaries: every import (relative, or `@knitter/NAME`) of each workspace member (and of
 *   scripts/) reaches only the members the doc's "Workspace members" table lets it import, tests
 *   (`*_test.ts`, `test_support.ts`) also those of the table's test column; where the table says
 *   the cell names files of plugin/ (`contract.ts`), only those.
 * - No import cycles inside a member: no module reaches itself again through its own imports.
 * - The tables the doc names (`NAME` (id) in "Dataplane") are wasm/pipeline.ts's FLOW_TABLES, in
 *   order.
 * - Every file or folder the doc links to or names in backquotes exists.
 */
import assert from "node:assert/strict";
import { FLOW_TABLES } from "../wasm/pipeline.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const DOC = await Deno.readTextFile(`${ROOT}docs/architecture.md`);

/** A section of the doc: from its `## ` heading to the next. */
function section(title: string): string {
  const start = DOC.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `docs/architecture.md has a "## ${title}" section`);
  const end = DOC.indexOf("\n## ", start + 1);
  return DOC.slice(start, end < 0 ? undefined : end);
}

interface Rule {
  code: Set<string>;
  tests: Set<string>;
  /** Files of plugin/ the code may import (`contract.ts` in the cell); empty: any. */
  pluginFiles: Set<string>;
}

/** The "Workspace members" table: | `member/` | may import | tests also | */
function rules(): Map<string, Rule> {
  const out = new Map<string, Rule>();
  const names = (cell: string) => new Set([...cell.matchAll(/`([a-z]+)\/?`/g)].map((m) => m[1]));
  for (const line of section("Workspace members").split("\n")) {
    const cells = line.split("|").slice(1, -1).map((c) => c.trim());
    const member = /^`([a-z]+)\/`$/.exec(cells[0] ?? "")?.[1];
    if (!member || cells.length < 3) continue;
    out.set(member, {
      code: names(cells[1]),
      tests: names(cells[2]),
      pluginFiles: new Set([...cells[1].matchAll(/`([a-z_]+\.ts)`/g)].map((m) => `plugin/${m[1]}`)),
    });
  }
  return out;
}

const IMPORT_RE =
  /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)|(?:^|\n)\s*import\s*["']([^"']+)["']/g;

async function* sources(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    if (e.name.startsWith(".") || e.name === "build" || e.name === "node_modules") continue;
    const path = `${dir}/${e.name}`;
    // AssemblyScript, compiled on its own (wasm/build.ts), outside the workspace's module graph.
    if (e.isDirectory && path.endsWith("/wasm/assembly")) continue;
    if (e.isDirectory) yield* sources(path);
    else if (/\.(ts|js)$/.test(e.name)) yield path;
  }
}

interface Import {
  /** Path from the root of the importing module. */
  from: string;
  specifier: string;
  /** Path from the root of the module imported, for relative and workspace imports. */
  to?: string;
}

/** `@knitter/NAME[/sub]` as a path, from the member's deno.json exports. */
const exportsOf = new Map<string, Record<string, string>>();
async function workspacePath(specifier: string): Promise<string | undefined> {
  const [, member, ...sub] = specifier.split("/");
  if (!exportsOf.has(member)) {
    const json = JSON.parse(await Deno.readTextFile(`${ROOT}${member}/deno.json`));
    const ex = typeof json.exports === "string" ? { ".": json.exports } : json.exports;
    exportsOf.set(member, ex);
  }
  const target = exportsOf.get(member)![sub.length ? `./${sub.join("/")}` : "."];
  return target && `${member}/${target.replace(/^\.\//, "")}`;
}

async function importsOf(dir: string): Promise<Import[]> {
  const out: Import[] = [];
  for await (const file of sources(`${ROOT}${dir}`)) {
    const from = file.slice(ROOT.length);
    const text = await Deno.readTextFile(file);
    for (const m of text.matchAll(IMPORT_RE)) {
      const specifier = m[1] ?? m[2] ?? m[3];
      let to: string | undefined;
      if (specifier.startsWith(".")) {
        to = new URL(specifier, `file://${file}`).pathname.slice(ROOT.length);
      } else if (specifier.startsWith("@knitter/")) {
        to = await workspacePath(specifier);
        assert.ok(to, `${from}: ${specifier} is not exported by its member's deno.json`);
      }
      out.push({ from, specifier, to: to?.split("?")[0] });
    }
  }
  return out;
}

function isTest(path: string): boolean {
  return /(_test|test_support)\.ts$/.test(path) || path.includes("/testdata/");
}

const members: string[] = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).workspace
  .map((m: string) => m.replace(/^\.\//, ""));

Deno.test("architecture: the doc's members table lists every workspace member, and scripts/", () => {
  assert.deepEqual([...rules().keys()].sort(), [...members, "scripts"].sort());
});

Deno.test("architecture: each member imports only the members the doc lets it", async () => {
  const table = rules();
  const broken: string[] = [];
  for (const [member, rule] of table) {
    for (const imp of await importsOf(member)) {
      const target = imp.to?.split("/")[0];
      if (target === undefined || target === member) continue;
      const allowed = rule.code.has(target) || (isTest(imp.from) && rule.tests.has(target));
      if (!allowed) broken.push(`${imp.from} imports ${imp.specifier} (${target}/)`);
      else if (
        target === "plugin" && rule.pluginFiles.size > 0 && !rule.pluginFiles.has(imp.to!)
      ) {
        broken.push(
          `${imp.from} imports ${imp.specifier}: of plugin/, only ${[...rule.pluginFiles]}`,
        );
      }
    }
  }
  assert.deepEqual(broken, []);
});

Deno.test("architecture: no import cycle inside a member", async () => {
  const cycles: string[] = [];
  for (const member of [...members, "scripts"]) {
    const graph = new Map<string, string[]>();
    for (const imp of await importsOf(member)) {
      if (imp.to === undefined || !imp.to.startsWith(`${member}/`)) continue;
      graph.set(imp.from, [...(graph.get(imp.from) ?? []), imp.to]);
    }
    // Depth-first search; a module met again while still on the path closes a cycle.
    const state = new Map<string, "open" | "done">();
    const path: string[] = [];
    const visit = (m: string) => {
      if (state.get(m) === "done") return;
      if (state.get(m) === "open") {
        cycles.push([...path.slice(path.indexOf(m)), m].join(" -> "));
        return;
      }
      state.set(m, "open");
      path.push(m);
      for (const next of graph.get(m) ?? []) visit(next);
      path.pop();
      state.set(m, "done");
    };
    for (const m of graph.keys()) visit(m);
  }
  assert.deepEqual(cycles, []);
});

Deno.test("architecture: the pipeline tables the doc names are wasm/pipeline.ts's", () => {
  const named = [...section("Dataplane").matchAll(/`([A-Z_]+)`\s+\((\d+)\)/g)]
    .map((m) => ({ name: m[1], id: Number(m[2]) }));
  assert.deepEqual(named, FLOW_TABLES.map((t) => ({ name: t.name, id: t.id })));
});

Deno.test("architecture: every file and folder the doc names exists", async () => {
  const paths = new Set<string>();
  // Links, relative to docs/.
  for (const m of DOC.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
    if (/^[a-z]+:/.test(m[1])) continue;
    paths.add(new URL(m[1], `file://${ROOT}docs/`).pathname.slice(ROOT.length));
  }
  // Paths in backquotes, from the root: a folder and a file name at least (`agent/dataplane/remote.ts`).
  for (const m of DOC.matchAll(/`([a-z_]+\/[\w./-]*)`/g)) {
    if (/\.(ts|md|json)$|\/$/.test(m[1])) paths.add(m[1]);
  }
  assert.ok(paths.size > 10, `the doc names files (${paths.size} found)`);
  const missing: string[] = [];
  for (const p of paths) {
    try {
      await Deno.stat(`${ROOT}${p}`);
    } catch {
      missing.push(p);
    }
  }
  assert.deepEqual(missing, []);
});

/** `any` as a type: `: any`, `<any>`, `any[]`, `as any`, `| any`. */
const ANY_TYPE = /(?:[:<|&,(]\s*|\bas\s+)any\b|\bany\s*(?:\[\]|>)/;
/** A type assertion: `x as T` (not `as const`), or `<T>x` (a `<` no name stands before). */
const CAST = /\bas\s+(?!const\b)[A-Za-z{[(]|(?<![\w.$\s])\s*<\w+>/;

/** The lines of a module that type something `any`, cast, or silence the linter's `any` rule. */
function looseLines(text: string): number[] {
  // Comments and strings may say "any" or "as" (blanked, their line breaks kept); imports say
  // `* as NAME`.
  const blank = (part: string) => part.replace(/[^\n]/g, "");
  const raw = text.split("\n");
  const code = text
    .replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, blank)
    .replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`/g, blank)
    .replace(/import \* as \w+/g, "")
    .split("\n");
  return code.flatMap((line, i) =>
    ANY_TYPE.test(line) || CAST.test(line) || raw[i].includes("no-explicit-any") ? [i + 1] : []
  );
}

/**
 * The manager's routes (issue 31): each resource a module under manager/routes/, served; handler
 * inputs are typed from the schemas (manager/routes/route.ts), so no `any` and no type assertion
 * stands between a schema and the service function it feeds.
 */
Deno.test("architecture: manager routes have no any and no casts, and every resource module is served", async () => {
  const { RESOURCES } = await import("../manager/routes.ts");
  const files = ["manager/routes.ts"];
  for await (const e of Deno.readDir(`${ROOT}manager/routes`)) {
    const code = e.isFile && e.name.endsWith(".ts") && !e.name.endsWith("_test.ts");
    if (code) files.push(`manager/routes/${e.name}`);
  }
  const loose: string[] = [];
  const unserved: string[] = [];
  for (const file of files.sort()) {
    const text = await Deno.readTextFile(`${ROOT}${file}`);
    const lines = text.split("\n");
    for (const n of looseLines(text)) loose.push(`${file}:${n}: ${lines[n - 1].trim()}`);
    for (const value of Object.values(await import(`file://${ROOT}${file}`))) {
      const resource = value as { tag?: unknown; routes?: unknown };
      if (typeof resource?.tag !== "string" || !Array.isArray(resource.routes)) continue;
      if (!RESOURCES.some((r) => r === value)) unserved.push(`${file}: ${resource.tag}`);
    }
  }
  assert.deepEqual(loose, [], "typed from the schemas, never `any` nor a cast");
  assert.deepEqual(unserved, [], "resource modules missing from RESOURCES (manager/routes.ts)");
});

/**
 * Port mirrors (issue 30): one module writes Open vSwitch's Mirror rows (the agent's, computed from
 * the manager's mirrors), and the change feed's event types, mirrors included, are one list that
 * the API's document (the FeedPage schema) and the manager's feed agree on.
 */
Deno.test("architecture: OVS Mirror rows have one writer, and the feed's event types are documented", async () => {
  const writers: string[] = [];
  for (const dir of ["agent", "common", "devstack"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      if (file.endsWith("_test.ts")) continue;
      const text = await Deno.readTextFile(file);
      if (/table:\s*"Mirror"|\bMirror\b.*(?:create|add Bridge)/.test(text)) {
        writers.push(file.slice(ROOT.length));
      }
    }
  }
  assert.deepEqual(writers, ["agent/dataplane/mirrors.ts"]);
  const feed = await Deno.readTextFile(`${ROOT}manager/feed.ts`);
  const union = feed.slice(feed.indexOf("export type FeedEvent"), feed.indexOf("type Unnumbered"));
  const published = [...union.matchAll(/type: "(\w+)"/g)].map((m) => m[1]).sort();
  const { FeedPage } = await import("../manager/schemas.ts");
  const documented = [...FeedPage.shape.events.element.shape.type.options].sort();
  assert.deepEqual(documented, published, "FeedPage (schemas.ts) documents every feed event type");
  assert.ok(published.includes("mirror"), "mirrors reach the agents on the feed");
});

async function* tsFiles(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) yield* tsFiles(path);
    else if (e.name.endsWith(".ts")) yield path;
  }
}
