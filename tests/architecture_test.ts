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
import { NEEDS_SYSTEM } from "./run.ts";

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

function isBench(path: string): boolean {
  return path.includes("/bench/");
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

/**
 * A member's code (not its tests, test support or benchmarks; not tests/, the cross-component
 * tests) reaches another member only as `@knitter/NAME` or `@knitter/NAME/ENTRY`, what that
 * member's deno.json exports: its mod.ts, or a named entry kept light for callers that must not
 * load the whole member (`@knitter/common/metrics`, `@knitter/agent/ovs`).
 */
Deno.test("architecture: code reaches another member only through what its deno.json exports", async () => {
  const broken: string[] = [];
  for (const member of [...members, "scripts"]) {
    if (member === "tests") continue;
    for (const imp of await importsOf(member)) {
      const target = imp.to?.split("/")[0];
      if (target === undefined || target === member || isTest(imp.from) || isBench(imp.from)) {
        continue;
      }
      if (!imp.specifier.startsWith("@knitter/")) {
        broken.push(`${imp.from} imports ${imp.specifier}`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

Deno.test("architecture: the quick run leaves out the members' tests that start nodes, OVS or etcd", async () => {
  const system = new Set<string>();
  for (const member of members.filter((m) => m !== "tests")) {
    for (const imp of await importsOf(member)) {
      const to = imp.to ?? imp.specifier;
      const starts = to.startsWith("devstack/") || to.endsWith("store/etcd_test_support.ts");
      if (starts && imp.from.endsWith("_test.ts")) system.add(imp.from);
    }
  }
  const unlisted = [...system].filter((f) => !NEEDS_SYSTEM.includes(f));
  assert.deepEqual(unlisted, [], "tests/run.ts's NEEDS_SYSTEM lists them");
});

/** Every source file of the members and scripts/, as paths from the root. */
async function allSources(): Promise<string[]> {
  const out: string[] = [];
  for (const member of [...members, "scripts"]) {
    for await (const file of sources(`${ROOT}${member}`)) out.push(file.slice(ROOT.length));
  }
  return out;
}

Deno.test("architecture: every benchmark is in its member's bench/ folder", async () => {
  const astray: string[] = [];
  for (const path of await allSources()) {
    const bench = path.endsWith("_bench.ts") ||
      /^\s*Deno\.bench\(/m.test(await Deno.readTextFile(`${ROOT}${path}`));
    if (bench && !/^[a-z]+\/bench\/[a-z0-9_]+\.ts$/.test(path)) astray.push(path);
  }
  assert.deepEqual(astray, []);
});

Deno.test("architecture: a test double is named <concept>_fake.ts", async () => {
  const misnamed = (await allSources()).filter((path) => {
    const name = path.split("/").pop()!;
    return /fake|double|stub|mock/.test(name) && !/^[a-z0-9]+(_[a-z0-9]+)*_fake\.ts$/.test(name);
  });
  assert.deepEqual(misnamed, []);
});
