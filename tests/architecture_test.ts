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

Deno.test("architecture: one config loader and one start for the daemons, one reconciler and one watch wiring in the monitor", async () => {
  const found: string[] = [];
  // Each daemon's config.ts declares its schema, variables and flags; common/daemon_config.ts reads them.
  const READS = /\bparseArgs\b|Deno\.args|Deno\.env|Deno\.readTextFile|extends Error\b/;
  for (const member of ["manager", "agent", "monitor"]) {
    const text = await Deno.readTextFile(`${ROOT}${member}/config.ts`);
    const read = text.match(READS)?.[0];
    if (read) found.push(`${member}/config.ts: ${read} (declare it for common/daemon_config.ts)`);
    if (!text.includes("loadDaemonConfig")) found.push(`${member}/config.ts: no loadDaemonConfig`);
  }
  // The daemons start (help, signals, a config mistake's exit) through common/daemon_start.ts.
  for (const main of ["agent/main.ts", "monitor/main.ts"]) {
    const text = await Deno.readTextFile(`${ROOT}${main}`);
    if (/SIGTERM|Deno\.exit/.test(text)) found.push(`${main}: starts by itself, not runDaemon`);
  }
  // The monitor: watches and queues wired in watch_queue.ts only; a custom resource's finalizer
  // and status written by cr_reconciler.ts only.
  const ONLY: [RegExp, string][] = [
    [/new (Informer|WorkQueue)\b/, "monitor/watch_queue.ts"],
    [/\b(ensureFinalizer|dropFinalizer|writeStatus)\(/, "monitor/cr_reconciler.ts"],
  ];
  for await (const file of sources(`${ROOT}monitor`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts") || path === "monitor/resources.ts") continue;
    const text = await Deno.readTextFile(file);
    for (const [re, home] of ONLY) {
      const m = text.match(re);
      if (m && path !== home) found.push(`${path}: ${m[0]} (only ${home})`);
    }
  }
  assert.deepEqual(found, []);
});

Deno.test("architecture: the flow compiler is written once, in wasm/assembly (the TS engine is built from it)", async () => {
  const { FLOW_KINDS } = await import("../wasm/pipeline.ts");
  const { ACL_KINDS } = await import("../wasm/acl_pipeline.ts");
  const builders = [...Object.keys(FLOW_KINDS), ...Object.keys(ACL_KINDS)];
  const defines = new RegExp(`\\b(?:function|const|let)\\s+(${builders.join("|")})\\b`, "g");
  const twins: string[] = [];
  // The members that make or read flows (knitctl's trace has a nextHop of its own: the next node).
  for (const member of ["wasm", "agent"]) {
    for await (const file of sources(`${ROOT}${member}`)) {
      const text = await Deno.readTextFile(file);
      for (const m of text.matchAll(defines)) twins.push(`${file.slice(ROOT.length)}: ${m[1]}`);
    }
  }
  assert.deepEqual(
    twins,
    [],
    "a flow builder defined outside wasm/assembly/ (a hand-written twin)",
  );
  // The rule is not vacuous: the one definition of each flow kind's builder is in wasm/assembly.
  let assembly = "";
  for await (const e of Deno.readDir(`${ROOT}wasm/assembly`)) {
    if (e.isFile) assembly += await Deno.readTextFile(`${ROOT}wasm/assembly/${e.name}`);
  }
  const missing = Object.keys(FLOW_KINDS).filter((k) => !assembly.includes(`function ${k}(`));
  assert.deepEqual(missing, [], "flow kinds without a builder in wasm/assembly/");
});

/** The manager's port concept: one folder, reached through its mod.ts only. */
const PORTS_DIR = "manager/service/ports/";

/** The parameters of each exported function of `text`, as written (top-level commas split them). */
function exportedParams(text: string): { name: string; params: string[] }[] {
  const out = [];
  for (const m of text.matchAll(/export (?:async )?function\s+(\w+)\s*(?:<[^(]*?>)?\s*\(/g)) {
    const params: string[] = [];
    let depth = 0;
    let current = "";
    for (let i = m.index! + m[0].length; i < text.length; i++) {
      const c = text[i];
      const arrow = c === ">" && text[i - 1] === "=";
      if ("({[<".includes(c)) depth++;
      if (")}]>".includes(c) && !arrow) depth--;
      if (depth < 0) break;
      if (c === "," && depth === 0) {
        params.push(current.trim());
        current = "";
      } else current += c;
    }
    if (current.trim()) params.push(current.trim());
    out.push({ name: m[1], params });
  }
  return out;
}

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

Deno.test("architecture: the manager's ports are reached through service/ports/mod.ts; no exported service function takes more than three parameters", async () => {
  const reachIn: string[] = [];
  for (const imp of await importsOf("manager")) {
    if (!imp.to?.startsWith(PORTS_DIR) || imp.from.startsWith(PORTS_DIR)) continue;
    if (imp.to !== `${PORTS_DIR}mod.ts`) reachIn.push(`${imp.from} imports ${imp.specifier}`);
  }
  assert.deepEqual(reachIn, [], `only ${PORTS_DIR}mod.ts is imported from outside the folder`);
  const long: string[] = [];
  let read = 0;
  for await (const file of sources(`${ROOT}manager/service`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    read++;
    for (const f of exportedParams(await Deno.readTextFile(file))) {
      if (f.params.length > 3) long.push(`${path} ${f.name}(${f.params.length} parameters)`);
    }
  }
  assert.ok(read > 30, `the service files were read (${read})`);
  assert.deepEqual(long, [], "more than three: take an options object");
});

Deno.test("architecture: one place in the agent reads a CNI config's ipam section (knitter as another plugin's IPAM)", async () => {
  const HOME = "agent/cni/ipam_call.ts";
  const READS = /\bconfig\.ipam\b|\bconfig\[["']ipam["']\]|\bipam\.type\b/;
  const found: string[] = [];
  for await (const file of sources(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts") || path === HOME) continue;
    const m = (await Deno.readTextFile(file)).match(READS);
    if (m) found.push(`${path}: ${m[0]} (only ${HOME} tells an IPAM call apart)`);
  }
  assert.deepEqual(found, []);
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

/**
 * A port ID is unique only within its tenant: on a public network two tenants may each have a
 * port of the same ID. The agent names a port by one key, tenant included (port_key.ts); a key of
 * network and ID alone lets one tenant's port hide another's in a node's flows.
 */
Deno.test("architecture: the agent keys ports in one place, by tenant, network and ID", async () => {
  const keyed: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    if (file.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(file);
    if (/\$\{[\w.?]*networkId\}\/\$\{/.test(text)) keyed.push(file.slice(ROOT.length));
  }
  assert.deepEqual(keyed, ["agent/dataplane/port_key.ts"]);
  const { portKey } = await import("../agent/dataplane/port_key.ts");
  const mine = { tenant: "acme", networkId: "n1", id: "web" };
  assert.notEqual(portKey(mine), portKey({ ...mine, tenant: "globex" }));
});

async function* tsFiles(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) yield* tsFiles(path);
    else if (e.name.endsWith(".ts")) yield path;
  }
}
Deno.test("architecture: the flow compiler's two builds differ only in SIMD, so the speed-up stays a fair measure", async () => {
  // wasm/build.ts: the WASM and JavaScript builds of assembly/flows.ts share one optimisation level.
  const build = await Deno.readTextFile(`${ROOT}wasm/build.ts`);
  const flags = [...build.matchAll(/name: "flows",\s*flags: \[([^\]]*)\]/g)].map((m) =>
    [...m[1].matchAll(/"([^"]+)"/g)].map((f) => f[1]).filter((f) =>
      f !== "--enable" && f !== "simd"
    )
  );
  assert.equal(flags.length, 2, "wasm/build.ts builds assembly/flows.ts twice (WASM, JavaScript)");
  assert.deepEqual(
    flags[0],
    flags[1],
    "the two builds of the flow compiler take the same flags but SIMD",
  );
  assert.ok(flags[0].includes("-O3"), "the flow compiler is built with -O3");
  assert.match(build, /setOptimizeLevel\(3\)/, "wasm2js output re-optimized at level 3");
  // Every SIMD step of the flow compiler has the plain branch the JavaScript build compiles.
  const simd = /\b(?:v128|i8x16|i16x8|i32x4|i64x2)\.\w+\(/;
  const unguarded: string[] = [];
  for await (const e of Deno.readDir(`${ROOT}wasm/assembly`)) {
    if (!e.isFile || e.name === "bitmap.ts") continue;
    const text = await Deno.readTextFile(`${ROOT}wasm/assembly/${e.name}`);
    if (simd.test(text) && !text.includes("if (ASC_FEATURE_SIMD)")) unguarded.push(e.name);
  }
  assert.deepEqual(
    unguarded,
    [],
    "flow compiler files using SIMD without an ASC_FEATURE_SIMD branch",
  );
});

Deno.test("architecture: every custom resource kind the monitor follows is installed whole: its CRD in deploy/, the monitor's RBAC on it and its status, and the stand-in API server serves it", async () => {
  const { PLURAL, GROUP } = await import("../monitor/crd_types.ts");
  const { loadManifests } = await import("../deploy/manifests.ts");
  const { RESOURCES } = await import("./support/kube_api.ts");
  const manifests = loadManifests().map((m) => m.object);
  const crds = manifests.filter((o) => o.kind === "CustomResourceDefinition");
  const rules: { apiGroups: string[]; resources: string[] }[] = manifests
    .filter((o) => o.kind === "ClusterRole" && /monitor/.test(o.metadata.name))
    .flatMap((o) => o.rules);
  const granted = (resource: string) =>
    rules.some((r) => r.apiGroups.includes(GROUP) && r.resources.includes(resource));
  const missing: string[] = [];
  for (const plural of Object.values(PLURAL)) {
    if (!crds.some((c) => c.metadata.name === `${plural}.${GROUP}`)) missing.push(`${plural}: CRD`);
    if (!granted(plural)) missing.push(`${plural}: monitor RBAC`);
    if (!granted(`${plural}/status`)) missing.push(`${plural}/status: monitor RBAC`);
    if (RESOURCES[plural]?.group !== GROUP) missing.push(`${plural}: stand-in API server`);
  }
  assert.deepEqual(missing, []);
});

/**
 * Delegated interfaces (issue 27): one module of the agent runs other CNI plugins (delegates.ts,
 * through common/run.ts), and the plugins a network's delegate may name are one list, the API's
 * (schemas.ts Delegate), which the Network CRD's enum repeats.
 */
Deno.test("architecture: one place in the agent runs a delegate CNI plugin, and the CRD lists the API's delegate plugins", async () => {
  const HOME = "agent/cni/delegates.ts";
  const runners: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    if (/\bCNI_COMMAND\s*:/.test(await Deno.readTextFile(file))) runners.push(path);
  }
  assert.deepEqual(runners, [HOME]);
  assert.match(await Deno.readTextFile(`${ROOT}${HOME}`), /\brun\(\[bin\]/, "through run.ts");
  const { Delegate } = await import("../manager/schemas.ts");
  const api = Delegate.options.map((o) => o.shape.plugin.value).sort();
  const crd = await Deno.readTextFile(`${ROOT}deploy/crds/networks.yaml`);
  const listed = crd.match(/plugin:\s*\n\s*type: string\s*\n\s*enum: \[([^\]]+)\]/)?.[1];
  assert.deepEqual(listed?.split(",").map((s) => s.trim()).sort(), api);
});

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

/**
 * knitctl capture (issue 30): one module of the agent runs tcpdump (agent/capture/capture.ts),
 * through common/run.ts, and it asks the manager with the caller's token (managerAs), never with
 * the node's client: a node token sees every port, so the port would never be refused.
 */
Deno.test("architecture: one place in the agent runs tcpdump, through run.ts, with the caller's token", async () => {
  const HOME = "agent/capture/capture.ts";
  const capturers: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    if (/"tcpdump"/.test(await Deno.readTextFile(file))) capturers.push(path);
  }
  assert.deepEqual(capturers, [HOME]);
  const text = await Deno.readTextFile(`${ROOT}${HOME}`);
  assert.match(text, /\brun\(argv\b/, "through run.ts");
  assert.doesNotMatch(text, /Deno\.Command/);
  // Who may capture (a port, a mirror) is asked with the caller's token, in one module beside it.
  const allowed = await Deno.readTextFile(`${ROOT}agent/capture/allowed.ts`);
  assert.match(allowed, /deps\.managerAs\(token\)/, "the manager asked with the caller's token");
});

/**
 * BGP advertisement (issue 29): one module of the agent renders BIRD's configuration
 * (agent/bgp/bird_config.ts, data to text, golden tested), and one runs `bird` and `birdc`
 * (agent/bgp/bgp_speaker.ts), through common/run.ts, so that BIRD's pid stays the agent's to stop.
 */
Deno.test("architecture: one place in the agent writes BIRD's configuration, one runs BIRD, through run.ts", async () => {
  const writers: string[] = [];
  const runners: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(file);
    if (/protocol (bgp|static|kernel)\b/.test(text)) writers.push(path);
    if (/\bpaths\.birdc?\b|\["birdc?"/.test(text)) runners.push(path);
  }
  assert.deepEqual(writers, ["agent/bgp/bird_config.ts"]);
  assert.deepEqual(runners, ["agent/bgp/bgp_speaker.ts"]);
  const speaker = await Deno.readTextFile(`${ROOT}agent/bgp/bgp_speaker.ts`);
  assert.match(speaker, /seams\.run\(/, "through run.ts");
  assert.doesNotMatch(speaker, /Deno\.Command/);
});

/**
 * Hot-plug (issue 26): a running pod's interfaces change through one path, the extra interfaces of
 * knitctl attach (journalled, rolled back, the port released on removal). The hot-plug modules
 * reach no wiring, link, switch or manager code of their own, so they cannot make half of an
 * interface; and only they and knitctl's routes call that path.
 */
Deno.test("architecture: hot-plug changes a running pod's interfaces only through knitctl attach's path", async () => {
  const HOTPLUG = ["agent/kubernetes/hotplug.ts", "agent/kubernetes/hotplug_plan.ts"];
  const imports = (await importsOf("agent/kubernetes"))
    .filter((i) => HOTPLUG.includes(i.from) && i.to !== undefined)
    .map((i) => `${i.from} -> ${i.to}`);
  const reached = imports.filter((i) =>
    /-> agent\/(interfaces|dataplane)\/|-> agent\/cni\/attach\.ts/.test(i)
  );
  assert.deepEqual(reached, [], "hot-plug makes nothing itself");
  for (const path of HOTPLUG) {
    const text = await Deno.readTextFile(`${ROOT}${path}`);
    assert.doesNotMatch(text, /\bManagerClient\b|\brun\(|Deno\.Command/, path);
  }
  assert.ok(
    imports.includes("agent/kubernetes/hotplug.ts -> agent/extra/extra_interface.ts"),
    JSON.stringify(imports),
  );
  const callers: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    if (/\bextra\.attach\(|\.detachRecord\(/.test(await Deno.readTextFile(file))) {
      callers.push(path);
    }
  }
  assert.deepEqual(callers.sort(), [
    "agent/kubernetes/hotplug.ts",
    "agent/server/extra_interface_routes.ts",
  ]);
});

/**
 * IPAM claims (issue 26): the community's IPAMClaim, another group's kind, is installed whole like
 * ours (its CRD in deploy/, the monitor's RBAC on it and its status, the stand-in serves it); and
 * a claim's record is written in two places of the manager only, the claims module (make, delete)
 * and the ports' claimed.ts (bind, release, activate), and read besides by `check` and the refusal
 * that names an address's holder.
 */
Deno.test("architecture: the IPAMClaim kind is installed whole, and only service/claims.ts and ports/claimed.ts write claims", async () => {
  const { IPAM_CLAIM } = await import("../monitor/crd_types.ts");
  const { loadManifests } = await import("../deploy/manifests.ts");
  const { RESOURCES } = await import("./support/kube_api.ts");
  const manifests = loadManifests().map((m) => m.object);
  const { group, plural } = IPAM_CLAIM;
  const rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[] = manifests
    .filter((o) => o.kind === "ClusterRole" && /monitor/.test(o.metadata.name))
    .flatMap((o) => o.rules);
  const granted = (resource: string, verb: string) =>
    rules.some((r) =>
      r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb)
    );
  const missing: string[] = [];
  const crd = manifests.find((o) =>
    o.kind === "CustomResourceDefinition" && o.metadata.name === `${plural}.${group}`
  );
  if (!crd) missing.push("CRD");
  if (!granted(plural, "watch") || !granted(plural, "patch")) missing.push("monitor RBAC");
  if (!granted(`${plural}/status`, "patch")) missing.push("monitor RBAC on the status");
  if (RESOURCES[plural]?.group !== group) missing.push("stand-in API server");
  assert.deepEqual(missing, []);

  const writers: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    if (/keys\.claim\(/.test(await Deno.readTextFile(file))) writers.push(path);
  }
  assert.deepEqual(writers.sort(), [
    "manager/check.ts",
    "manager/service/claims.ts",
    "manager/service/holders.ts",
    "manager/service/ports/claimed.ts",
  ]);
});

/**
 * Flow records (issue 30): one IPFIX codec (agent/flow_records/ipfix.ts), which knitctl's
 * collector reaches through `@knitter/agent/flow_records`; one module makes the agent's
 * Flow_Sample_Collector_Set; and the compiler's sample actions come from one builder
 * (wasm/assembly/sample.ts), so a node without flow records has exactly its old flows.
 */
Deno.test("architecture: flow records have one IPFIX codec, one writer of OVS's collector set and one builder of sample actions", async () => {
  const codecs: string[] = [];
  const setWriters: string[] = [];
  const samplers: string[] = [];
  for (const dir of ["agent", "common", "knitctl", "wasm", "devstack", "manager", "monitor"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      const path = file.slice(ROOT.length);
      if (path.endsWith("_test.ts") || path.includes("/generated/")) continue;
      const text = await Deno.readTextFile(file);
      if (/IPFIX_VERSION\s*=|getUint16\(0\)\s*;?\s*\n.*version/.test(text)) codecs.push(path);
      if (/"Flow_Sample_Collector_Set"/.test(text)) setWriters.push(path);
      if (/"sample\(probability=/.test(text)) samplers.push(path);
    }
  }
  assert.deepEqual(codecs, ["agent/flow_records/ipfix.ts"]);
  assert.deepEqual(setWriters, ["agent/flow_records/ovs_export.ts"]);
  assert.deepEqual(samplers, ["wasm/assembly/sample.ts"]);
  const collector = await Deno.readTextFile(`${ROOT}knitctl/flow_collect.ts`);
  assert.match(collector, /from "@knitter\/agent\/flow_records"/);
});

/**
 * The "ready" write of an ADD follows its answer (issue 25): a crash in between leaves a "building"
 * record that only the agent's start completes (agent/cni/settle.ts). Any other place marking an
 * attachment ready would skip the check that the pod has everything the record names.
 */
Deno.test("architecture: an attachment is marked ready by the wiring and by the start's completion only, and the start runs it", async () => {
  const markers: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts") || path.startsWith("agent/extra/")) continue;
    if (/\.status = "ready"/.test(await Deno.readTextFile(file))) markers.push(path);
  }
  assert.deepEqual(markers.sort(), ["agent/cni/attach.ts", "agent/interfaces/wiring.ts"]);
  const attach = await Deno.readTextFile(`${ROOT}agent/cni/attach.ts`);
  const marked = attach.slice(
    attach.indexOf("completeAnswered("),
    attach.indexOf("private async doAdd("),
  );
  assert.match(marked, /a\.status = "ready"/, "attach.ts marks ready in completeAnswered only");
  const daemon = await Deno.readTextFile(`${ROOT}agent/daemon.ts`);
  assert.match(daemon, /await settleAnswered\(/, "the agent's start completes answered ADDs");
});

/**
 * The console's trace is knitctl's offline trace (issue 30): the packet evaluated on the flows the
 * manager's model implies is computed in one module, which knitctl and the manager's trace route
 * both call, so the page and the command line never disagree.
 */
Deno.test("architecture: the trace from the manager's model is computed in knitctl/trace_offline.ts only, and the manager's trace route calls it", async () => {
  const HOME = "knitctl/trace_offline.ts";
  const evaluators: string[] = [];
  // The agent explains its switch's own trace (ofproto/trace) with explainHop: that is live.
  for (const dir of ["knitctl", "manager", "common"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      const path = file.slice(ROOT.length);
      if (path.endsWith("_test.ts")) continue;
      if (/\b(explainHop|evalPacket)\(/.test(await Deno.readTextFile(file))) evaluators.push(path);
    }
  }
  assert.deepEqual(evaluators, [HOME]);
  const route = await Deno.readTextFile(`${ROOT}manager/routes/trace.ts`);
  assert.match(route, /from "@knitter\/knitctl\/trace_offline"/);
  assert.match(route, /\bofflineTrace\(/);
});

/**
 * Port mirrors (issue 30): the tunnel ports towards remote collectors (GRE, ERSPAN, VXLAN) are
 * declared in one module, so their kinds, options and names are one list.
 */
Deno.test("architecture: one module declares the mirror tunnels", async () => {
  const tunnels: string[] = [];
  for (const dir of ["agent", "common", "knitctl", "manager", "monitor"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      const path = file.slice(ROOT.length);
      if (path.endsWith("_test.ts")) continue;
      const text = await Deno.readTextFile(file);
      if (/erspan_ver|"kmir-"/.test(text)) tunnels.push(path);
    }
  }
  assert.deepEqual(tunnels, ["agent/dataplane/mirror_tunnels.ts"]);
});

/**
 * The connection guard (issue 32) hands each accepted connection to Deno's own HTTP server and
 * never copies a request's bytes through JavaScript (the relay it replaced halved throughput); it
 * needs Deno's server for one accepted connection, which the pinned Deno must offer.
 */
Deno.test("architecture: the connection guard relays no bytes, and the pinned Deno serves one accepted connection", async () => {
  const text = await Deno.readTextFile(`${ROOT}manager/conn_guard.ts`);
  assert.doesNotMatch(text, /\.(read|write|closeWrite)\(/, "no bytes read or written by the guard");
  const { serveOnConnection } = await import("../manager/conn_guard.ts");
  assert.equal(typeof serveOnConnection(), "function");
});

/**
 * Live migration in the data plane (agent/PIPELINE.md, "Inactive ports"): the agent decides
 * whether one of its ports is its claim's active one, and activates one at the manager, in one
 * place (agent/dataplane/migration.ts); the flows of inactive ports come from the compiler's own
 * builder (wasm/assembly/inactive.ts) and nowhere else.
 */
Deno.test("architecture: one place in the agent decides and changes a port's activity; one builder makes the inactive ports' flows", async () => {
  const deciders: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(file);
    if (/\.active\b|activatePort\(/.test(text)) deciders.push(path);
  }
  // daemon.ts hands the manager's call to it; remote.ts notices a change of our own port's.
  assert.deepEqual(deciders.sort(), [
    "agent/daemon.ts",
    "agent/dataplane/migration.ts",
    "agent/dataplane/remote.ts",
  ]);
  const builders: string[] = [];
  for await (const file of tsFiles(`${ROOT}wasm/assembly`)) {
    if (/F_INACTIVE_PORT_/.test(await Deno.readTextFile(file))) {
      builders.push(file.slice(ROOT.length));
    }
  }
  assert.deepEqual(builders.filter((f) => !f.includes("/generated/")), [
    "wasm/assembly/inactive.ts",
  ]);
});

/**
 * Floating addresses (issue 29): a binding is kept under the port's ID by one service module and
 * copied into a new port by one ports module; in the agent, one module writes the 1:1 NAT rules
 * (nothing else DNATs or SNATs to a fixed address) and one runs conntrack, through run.ts.
 */
Deno.test("architecture: floating addresses: one manager module binds, one copies into new ports; one agent module writes NAT to fixed addresses, one runs conntrack", async () => {
  const binders: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    if (/keys\.floatingOfPort\(/.test(await Deno.readTextFile(file))) binders.push(path);
  }
  assert.deepEqual(binders.sort(), [
    "manager/service/floating_ips.ts",
    "manager/service/ports/floating.ts",
  ]);
  const nat: string[] = [];
  const conntrack: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(file);
    if (/\b(dnat|snat) to\b/.test(text)) nat.push(path);
    if (/\["conntrack"/.test(text)) conntrack.push(path);
  }
  assert.deepEqual(nat, ["agent/dataplane/floating_nft.ts"]);
  assert.deepEqual(conntrack, ["agent/dataplane/floating_kernel.ts"]);
  assert.doesNotMatch(
    await Deno.readTextFile(`${ROOT}agent/dataplane/floating_kernel.ts`),
    /Deno\.Command/,
  );
});

/**
 * Services (issue 28): select groups are written by one builder (wasm/assembly/service.ts) and go
 * to the switch through one place (agent/dataplane/ovs.ts, the only OpenFlow 1.5 caller), so that
 * groups and the flows naming them are always applied in one bundle, in order; and services reach
 * the agents on the documented feed.
 */
Deno.test("architecture: select groups have one builder and one writer, and services are on the feed", async () => {
  const builders: string[] = [];
  for await (const file of tsFiles(`${ROOT}wasm/assembly`)) {
    if ((await Deno.readTextFile(file)).includes('"group_id="')) {
      builders.push(file.slice(ROOT.length));
    }
  }
  assert.deepEqual(builders, ["wasm/assembly/service.ts"]);
  const writers: string[] = [];
  for (const dir of ["agent", "common", "devstack", "knitctl", "monitor", "manager"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      if (file.endsWith("_test.ts")) continue;
      const text = await Deno.readTextFile(file);
      if (/OpenFlow15|add-group|mod-group|del-groups/.test(text)) {
        writers.push(file.slice(ROOT.length));
      }
    }
  }
  assert.deepEqual(writers, ["agent/dataplane/ovs.ts"]);
  const { FeedPage } = await import("../manager/schemas.ts");
  assert.ok(FeedPage.shape.events.element.shape.type.options.includes("service"));
});

/**
 * Security group rules are conjunctive matches (issue 32): one module of the flow compiler writes
 * the `conjunction(…)` action and merges the lines that share a match (Open vSwitch keeps one flow
 * per match and priority), acl.ts is its only caller, and the offline evaluator completes
 * conjunctions, so that knitctl trace reads what the compiler emits.
 */
Deno.test("architecture: conjunction actions are written by wasm/assembly/conjunction.ts only, for acl.ts, and the evaluator reads them", async () => {
  const writers: string[] = [];
  const users: string[] = [];
  for await (const file of tsFiles(`${ROOT}wasm/assembly`)) {
    const path = file.slice(ROOT.length);
    const text = await Deno.readTextFile(file);
    if (text.includes('"conjunction(')) writers.push(path);
    if (/from "\.\/conjunction"/.test(text)) users.push(path);
  }
  assert.deepEqual(writers, ["wasm/assembly/conjunction.ts"]);
  assert.deepEqual(users, ["wasm/assembly/acl.ts"]);
  const evaluator = await Deno.readTextFile(`${ROOT}wasm/flow_eval.ts`);
  assert.match(evaluator, /conjunction\\\(/, "flow_eval.ts reads conjunction actions");
  assert.match(evaluator, /case "conj_id":/, "flow_eval.ts matches conj_id");
});

/**
 * Issue 32, feed fan-out: a change wakes every waiting follower at once, so what each of them costs
 * is multiplied by thousands. The API's feed is read in one place (service/cluster_view.ts
 * feedFor), which makes each page once per view and cursor through feed_pages.ts and answers its
 * encoded bytes; the feed finds a follower's events by position, never by scanning its buffer.
 */
Deno.test("architecture: the API's feed pages are made once per view (feed_pages.ts), and the feed scans no buffer per follower", async () => {
  const readers: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts") || path.includes("/bench/")) continue;
    if (/\bfeed\.since\(/.test(await Deno.readTextFile(file))) readers.push(path);
  }
  assert.deepEqual(readers.sort(), [
    "manager/console/console.ts",
    "manager/feed_streams.ts",
    "manager/service/cluster_view.ts",
    // Not a follower: the address history's index catches up before a query (issue 32).
    "manager/service/history_holders.ts",
  ]);
  const view = await Deno.readTextFile(`${ROOT}manager/service/cluster_view.ts`);
  assert.match(view, /pagesOf\(ctx\)\.answer\(/);
  const feed = await Deno.readTextFile(`${ROOT}manager/feed.ts`);
  assert.doesNotMatch(feed, /this\.events\.(filter|find|map)\(/);
});

/**
 * Filtered port mirrors (issue 30): the compiler's copies (`clone(output:N)`) are written by one
 * builder, wasm/assembly/mirror.ts, and only the agent's dataplane/mirrors.ts turns mirrors into
 * its input (`mirrorFilters`), so a copy is always what mirror.ts matches: the source port itself.
 */
Deno.test("architecture: one builder writes a mirror's copies, one agent module feeds it", async () => {
  const cloners: string[] = [];
  for await (const file of tsFiles(`${ROOT}wasm/assembly`)) {
    if (/"[^"]*clone\(/.test(await Deno.readTextFile(file))) cloners.push(file.slice(ROOT.length));
  }
  assert.deepEqual(cloners, ["wasm/assembly/mirror.ts"]);
  const feeders: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    if (/FlowMirrorFilter\b/.test(await Deno.readTextFile(file))) feeders.push(path);
  }
  assert.deepEqual(feeders, ["agent/dataplane/mirrors.ts"]);
});

/**
 * Issue 28, a VIP through a router: the agent and `knitctl trace --offline` must model a service
 * alike (its MAC, ports and backends), or the offline trace names flows no node has. One function
 * makes a service's compiler entry (agent/dataplane/service_model.ts flowService); knitctl calls it,
 * and only that file derives a service's MAC.
 */
Deno.test("architecture: a service's flow model and MAC are made in agent/dataplane/service_model.ts only, for the agent and the offline trace", async () => {
  const makers: string[] = [];
  const callers: string[] = [];
  for (const dir of ["agent", "knitctl", "manager", "wasm"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      const path = file.slice(ROOT.length);
      if (isTest(path) || isBench(path)) continue;
      const text = await Deno.readTextFile(file);
      if (/gatewayMac\(\s*\[\s*"service"/.test(text)) makers.push(path);
      if (/\bflowService\(/.test(text)) callers.push(path);
    }
  }
  assert.deepEqual(makers, ["agent/dataplane/service_model.ts"]);
  assert.deepEqual(callers.sort(), ["agent/dataplane/service_model.ts", "knitctl/trace_model.ts"]);
});

/**
 * Issue 29, a floating address that moves without BGP: the node that starts answering ARP for it
 * announces it by gratuitous ARP, from the one module that answers ARP for floating addresses
 * (agent/dataplane/floating_kernel.ts), through the one runner; nothing else in the agent sends it.
 */
Deno.test("architecture: a floating address's gratuitous ARP is sent by agent/dataplane/floating_kernel.ts only, through run.ts", async () => {
  const senders: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    if (/"arping"/.test(await Deno.readTextFile(file))) senders.push(path);
  }
  assert.deepEqual(senders, ["agent/dataplane/floating_kernel.ts"]);
});

/**
 * Issue 29, a router's advertise: one module turns it into its networks' own flag and withdraws it
 * (manager/service/router_advertise.ts), so every other reader of a network's `advertise` (the
 * overlap checks, the ports' view, the agents) sees a router's networks as any advertised one.
 */
Deno.test("architecture: a network's advertisedBy is written by manager/service/router_advertise.ts only", async () => {
  const writers: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    if (/advertisedBy:\s*change\.|\.advertisedBy\s*=[^=]/.test(await Deno.readTextFile(file))) {
      writers.push(path);
    }
  }
  assert.deepEqual(writers, ["manager/service/router_advertise.ts"]);
});

/**
 * Issue 29, router errors: a flow hands a packet to the agent's slow path only through
 * wasm/assembly/slow_path.ts (the punt action and its reason register), and only the slow path
 * (agent/punt/router_slow_path.ts) holds the agent's OpenFlow connection, so every packet-in has a
 * reason it knows and every answer goes through its budgets.
 */
Deno.test("architecture: punts are written by wasm/assembly/slow_path.ts only, and only the router's slow path speaks OpenFlow packet-in/out", async () => {
  const punters: string[] = [];
  for await (const file of tsFiles(`${ROOT}wasm/assembly`)) {
    const path = file.slice(ROOT.length);
    if (path.includes("/generated/")) continue;
    if (/\bPUNT_ACTION\b|CONTROLLER/.test(await Deno.readTextFile(file))) punters.push(path);
  }
  assert.deepEqual(punters, ["wasm/assembly/slow_path.ts"]);
  const speakers: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    if (/\bOpenFlowConn\b/.test(await Deno.readTextFile(file))) speakers.push(path);
  }
  assert.deepEqual(speakers.sort(), ["agent/punt/openflow.ts", "agent/punt/router_slow_path.ts"]);
});

/**
 * Issue 29, IPv6 routing: a router's routes of both families are made by one function
 * (common/router_routes.ts flowRoutes: the IPv4 and IPv6 subnets a router joins, its static routes
 * by their next hop's family), for the agent's flows and knitctl's offline trace alike, so the
 * trace never names a route no node has; and one compiler module moves a packet into another
 * network (`dec_ttl` with the new reg0), wasm/assembly/route.ts, for both families (route6.ts only
 * parses and spells IPv6's), so isolation has one place to look at.
 */
Deno.test("architecture: routes of both families come from common/router_routes.ts only, and only wasm/assembly/route.ts routes a packet into another network", async () => {
  const callers: string[] = [];
  for (const dir of ["agent", "knitctl", "manager", "monitor", "common"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      const path = file.slice(ROOT.length);
      if (isTest(path) || isBench(path)) continue;
      if (/\bflowRoutes\(/.test(await Deno.readTextFile(file))) callers.push(path);
    }
  }
  assert.deepEqual(callers.sort(), [
    "agent/dataplane/dataplane.ts",
    "common/router_routes.ts",
    "knitctl/trace_model.ts",
  ]);
  const routers: string[] = [];
  for await (const file of tsFiles(`${ROOT}wasm/assembly`)) {
    // A string that writes the action (a comment may name it).
    if (/"[^"\n]*dec_ttl/.test(await Deno.readTextFile(file))) {
      routers.push(file.slice(ROOT.length));
    }
  }
  assert.deepEqual(routers, ["wasm/assembly/route.ts"]);
});

/**
 * Issue 25, the ADD's veth made while the manager is asked: a pod's pair exists before its port
 * does, so only the record written first lets DEL or the reaper find it after a crash. Only the
 * wiring sends a pair ahead (Links.sendPair), and its `wire` sends it only after the first record
 * write has landed.
 */
Deno.test("architecture: a veth pair is made before the manager's answer by the wiring only, after the record landed", async () => {
  const makers: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path) || path.endsWith("_fake.ts")) continue;
    if (/\.sendPair\(/.test(await Deno.readTextFile(file))) makers.push(path);
  }
  assert.deepEqual(makers, ["agent/interfaces/wiring.ts"]);
  const wiring = await Deno.readTextFile(`${ROOT}agent/interfaces/wiring.ts`);
  const wire = wiring.slice(
    wiring.indexOf("  async wire("),
    wiring.indexOf("  private async askPorts("),
  );
  const landed = wire.indexOf("await written;");
  assert.ok(landed > 0 && landed < wire.indexOf("this.sendPair("), "the pair after the record");
});

Deno.test("architecture: a tenant's quota use is written by service/quotas.ts and quota_shares.ts only, and ports charge their network's share", async () => {
  const writers: string[] = [];
  const laneless: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(file);
    if (/keys\.quota(Share|Shares)?\(/.test(text)) writers.push(path);
    // A port's commit charges its network's lane: ports of two networks write no common key.
    if (path.startsWith(PORTS_DIR) && /new QuotaCharges\(ctx, tx\)/.test(text)) laneless.push(path);
  }
  assert.deepEqual(writers.sort(), [
    "manager/service/quota_shares.ts",
    "manager/service/quotas.ts",
    "manager/service/tenants.ts",
  ]);
  assert.deepEqual(laneless, []);
});

/**
 * The streamed feed (issue 32): a waiting stream costs an entry in its group's set, not a wait of
 * its own. feed_streams.ts waits on the feed once, in a group's pump, makes each page once
 * (FeedPages) and writes the same bytes to the group's streams; nothing else in the manager makes
 * a streamed answer.
 */
Deno.test("architecture: feed streams wait once per group and share each page's bytes; only feed_streams.ts streams an answer", async () => {
  const streamers: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts") || path.includes("/bench/")) continue;
    if (/new ReadableStream\b/.test(await Deno.readTextFile(file))) streamers.push(path);
  }
  assert.deepEqual(streamers, ["manager/feed_streams.ts"]);
  const streams = await Deno.readTextFile(`${ROOT}manager/feed_streams.ts`);
  assert.equal(streams.match(/\.since\(/g)?.length, 1, "one wait on the feed: the group's");
  assert.match(streams, /this\.feed\.since\(group\.cursor, [^)]*group\.signal\)/);
  assert.match(streams, /this\.pages\.answer\(/);
  assert.doesNotMatch(streams, /setTimeout|setInterval/, "no timer per stream");
});

/**
 * Per-node BGP settings (issue 29): a Node's `bgp.knitter.io/` keys are parsed in one module
 * (agent/bgp/node_keys.ts) with the config file's own schemas, so the two sources are checked
 * alike; the agent's Kubernetes client never writes a Node (it reads its own; RBAC: read only,
 * deploy/manifests_test.ts); and the node's pods and its Node are followed by one list-and-watch
 * loop (agent/kubernetes/list_watch.ts), so both get the same answer to 410, cuts and dead watches.
 */
Deno.test("architecture: the Node's BGP keys are parsed in one place with the config's schemas; the agent never writes a Node; one list-and-watch loop", async () => {
  const prefixed: string[] = [];
  const loops: string[] = [];
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (path.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(file);
    if (text.includes('"bgp.knitter.io/"')) prefixed.push(path);
    if (/new Backoff\(/.test(text) && path.startsWith("agent/kubernetes/")) loops.push(path);
  }
  assert.deepEqual(prefixed, ["agent/bgp/node_keys.ts"]);
  assert.deepEqual(loops, ["agent/kubernetes/list_watch.ts"]);
  const keys = await Deno.readTextFile(`${ROOT}agent/bgp/node_keys.ts`);
  assert.match(keys, /import \{[^}]*NodeBgpPeers[^}]*\} from "\.\.\/config\.ts"/);
  assert.doesNotMatch(keys, /z\.(int|number|array|strictObject)\(/, "no schema of its own");
  const client = await Deno.readTextFile(`${ROOT}agent/kubernetes/kube_pods.ts`);
  for (const m of client.matchAll(/this\.call(?:<[^>]*>)?\(\s*"(\w+)",\s*`([^`]*)`/g)) {
    if (m[1] !== "GET") assert.doesNotMatch(m[2], /nodes/, `${m[1]} ${m[2]}: a write to a Node`);
  }
  for (const w of ["agent/kubernetes/node_pod_watch.ts", "agent/kubernetes/node_watch.ts"]) {
    assert.match(await Deno.readTextFile(`${ROOT}${w}`), /extends ListWatch</, w);
  }
});

/**
 * Issue 32, a start on a million ports: what a manager awaits before it serves (manager/server.ts
 * prepareStore) reads a handful of keys, none per port; manager/startup_test.ts proves it of these
 * steps. An upgrade step of manager/service/upgrade.ts among them scans the store only until its
 * marker (`keys.upgraded`) says it was done: its first read is the marker.
 */
const START_STEPS = ["ensureTenant", "ensureDefaultCluster", "scopeForeignPortKeys"];

Deno.test("architecture: a manager's start awaits only steps that read nothing per port, and an upgrade step reads its marker first", async () => {
  const server = await Deno.readTextFile(`${ROOT}manager/server.ts`);
  const from = server.indexOf("export async function prepareStore(");
  assert.ok(from >= 0, "manager/server.ts defines prepareStore");
  const body = server.slice(from, server.indexOf("\n}\n", from));
  const steps = [...body.matchAll(/await (\w+)\(/g)].map((m) => m[1]);
  assert.deepEqual(
    steps,
    START_STEPS,
    "a new step before serving: prove in manager/startup_test.ts that it reads nothing per port, then name it here",
  );
  assert.doesNotMatch(server, /\.list\(/, "manager/server.ts lists no prefix itself");
  const upgrade = await Deno.readTextFile(`${ROOT}manager/service/upgrade.ts`);
  const markers = [...upgrade.matchAll(/const (\w+) = keys\.upgraded\(/g)].map((m) => m[1]);
  const unmarked: string[] = [];
  for (const m of upgrade.matchAll(/export async function (\w+)\(ctx[^{]*\{\n\s*(.*)\n/g)) {
    const [, name, first] = m;
    if (!START_STEPS.includes(name)) continue;
    if (!markers.some((k) => first.startsWith(`if ((await ctx.store.get(${k})).value) return`))) {
      unmarked.push(`${name}: its first line is "${first}", not its marker's read`);
    }
  }
  assert.deepEqual(unmarked, []);
  assert.ok(upgrade.includes("export async function scopeForeignPortKeys(ctx"), "steps were read");
});

/**
 * Issue 29, the router's IPv6 errors: the slow path's punts are one builder per reason for both
 * families (wasm/assembly/slow_path.ts), and route.ts hands each the family of the route it serves,
 * so no family's routes go without their errors; a route's MTU is the one the encoding carries, for
 * either family (route.ts and route6.ts store no constant), so a size check is never dropped.
 */
Deno.test("architecture: route.ts calls every punt builder with the route's family, and routes of both families keep their encoded MTU", async () => {
  const route = await Deno.readTextFile(`${ROOT}wasm/assembly/route.ts`);
  for (const builder of ["routeMiss", "gatewaySelf", "tooBig"]) {
    const calls = [...route.matchAll(new RegExp(`\\b${builder}\\(([^;]*)\\);`, "g"))];
    assert.ok(calls.length > 0, `route.ts calls ${builder}`);
    for (const [call, args] of calls) assert.match(args, /\bv6\b/, `${call}: with the family`);
  }
  for (const file of ["route.ts", "route6.ts"]) {
    const text = await Deno.readTextFile(`${ROOT}wasm/assembly/${file}`);
    const stores = [...text.matchAll(/store<u32>\(r, ([^,]+), RT_MTU\)/g)].map((m) => m[1]);
    assert.deepEqual(stores, ["mtu"], `${file}: the route's MTU as encoded`);
  }
});

/**
 * Issue 29's IPv6 services: a service has a VIP per family, each a compiler service of its own
 * with the backends' addresses of its family. Only agent/dataplane/service_model.ts
 * (`serviceVips`) reads a service's VIPs for the data plane or a trace, so every reader splits
 * them the same way (a VIP handed with backends of another family fails the node's whole
 * compile); only manager/service/service_families.ts chooses a service's families.
 */
Deno.test("architecture: a service's VIPs reach the flows through serviceVips only, its families are chosen in service_families.ts only", async () => {
  const readers: string[] = [];
  // The compiler's own `vip` (a FlowService's, in wasm/) is one serviceVips gave.
  for (const dir of ["agent", "knitctl"]) {
    for await (const file of tsFiles(`${ROOT}${dir}`)) {
      const path = file.slice(ROOT.length);
      if (isTest(path)) continue;
      if (/\b(s|service|svc)\.vips?\b/.test(await Deno.readTextFile(file))) readers.push(path);
    }
  }
  assert.deepEqual(readers, ["agent/dataplane/service_model.ts"]);
  const choosers: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    if (/"RequireDualStack"/.test(await Deno.readTextFile(file))) choosers.push(path);
  }
  assert.deepEqual(choosers.sort(), ["manager/schemas.ts", "manager/service/service_families.ts"]);
});

/**
 * IPv6 floating addresses (issue 29): the manager decides which port field a floating address of
 * each family goes to in one table (model.ts FLOATING_FIELD), used by the one module that binds and
 * the one that copies into new ports; the agent's NAT rules name no address family of their own
 * (each takes its table's, so no IPv4 match lands in the ip6 table or the other way round).
 */
Deno.test("architecture: IPv6 floating: one table maps a family to its port field, used by the binder and the copier only; the floating NAT rules take their table's family", async () => {
  const users: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    if (/FLOATING_FIELD\[/.test(await Deno.readTextFile(file))) users.push(path);
  }
  assert.deepEqual(users.sort(), [
    "manager/service/floating_ips.ts",
    "manager/service/ports/floating.ts",
  ]);
  const rules = await Deno.readTextFile(`${ROOT}agent/dataplane/floating_nft.ts`);
  assert.doesNotMatch(rules, /\bip6? [sd]addr\b/);
});

/**
 * The feed over WebSockets (issue 32): an upgrade through the connection guard is closed by Deno as
 * soon as it is made (conn_guard_test.ts), so the one module that upgrades is the feed's socket,
 * which refuses requests the guard served; no other route may upgrade behind its back.
 */
Deno.test("architecture: WebSocket upgrades in the manager happen in feed_sockets.ts only, which asks the guard first", async () => {
  const upgraders: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    if (/upgradeWebSocket\(/.test(await Deno.readTextFile(file))) upgraders.push(path);
  }
  assert.deepEqual(upgraders, ["manager/feed_sockets.ts"]);
  const socket = await Deno.readTextFile(`${ROOT}manager/feed_sockets.ts`);
  assert.ok(
    socket.indexOf("servedPerConnection(req)") < socket.indexOf("upgradeWebSocket("),
    "the guard is asked before any upgrade",
  );
});

Deno.test("architecture: a switch port is plugged before the manager's answer by early_plug.ts only, made by the wiring, once ip has made the pair", async () => {
  const found = { pairMade: [] as string[], early: [] as string[] };
  for await (const file of tsFiles(`${ROOT}agent`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path) || path.endsWith("_fake.ts")) continue;
    const text = await Deno.readTextFile(file);
    if (/\.pairMade\(/.test(text)) found.pairMade.push(path);
    if (/new EarlyPlug\(/.test(text)) found.early.push(path);
  }
  assert.deepEqual(found, {
    pairMade: ["agent/interfaces/early_plug.ts"],
    early: ["agent/interfaces/wiring.ts"],
  });
  const plug = await Deno.readTextFile(`${ROOT}agent/interfaces/early_plug.ts`);
  const made = plug.indexOf("await this.d.links.pairMade(");
  assert.ok(made > 0 && made < plug.indexOf("await this.d.ports.add([this.spec])"), "pair first");
});

/**
 * The feed's socket port (issue 32, manager/feed_listener.ts): its connections never reach Deno's
 * HTTP server (which would close their sockets), and it spends the guard's budget of new
 * connections, not one of its own: only conn_guard.ts makes the budget and accepts budgeted, and
 * the manager hands the same budget to both ports. WebSocket frames are written in ws_frames.ts
 * only (a page's frame made once, for every socket of its group).
 */
Deno.test("architecture: the feed's socket port is served without Deno's HTTP server, on the guard's own budget, its frames made in ws_frames.ts only", async () => {
  const read = (path: string) => Deno.readTextFile(`${ROOT}${path}`);
  for (const path of ["manager/feed_listener.ts", "manager/ws_conn.ts", "manager/ws_frames.ts"]) {
    const text = await read(path);
    for (
      const http of ["Deno.serve", "serveHttpOnConnection", "serveOnConnection", "upgradeWebSocket"]
    ) {
      assert.ok(!text.includes(http), `${path} uses ${http}`);
    }
  }
  const budgets: string[] = [];
  const framers: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path)) continue;
    const text = await Deno.readTextFile(file);
    if (/new TokenBuckets\b/.test(text)) budgets.push(path);
    if (/0x80 \| op\b/.test(text)) framers.push(path);
  }
  assert.deepEqual(budgets, ["manager/conn_guard.ts"]);
  assert.deepEqual(framers, ["manager/ws_frames.ts"]);
  assert.match(await read("manager/feed_listener.ts"), /acceptBudgeted\(/);
  const server = await read("manager/server.ts");
  assert.equal([...server.matchAll(/\bbudget,/g)].length, 2, "one budget, handed to both ports");
});

/**
 * One way to carry the feed's sockets (the feed socket port): the guard runs on Deno's newer
 * per-connection server only. Deno's older, deprecated `Deno.serveHttp` (on which an upgraded socket
 * lived on, at about twice the CPU a request) is named nowhere in the manager, tests and benches
 * included, so no second way comes back by the side door.
 */
Deno.test("architecture: nothing in manager/ calls Deno.serveHttp", async () => {
  const users: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    if (/\bserveHttp\b/.test(await Deno.readTextFile(file))) users.push(file.slice(ROOT.length));
  }
  assert.deepEqual(users, []);
});

/**
 * Issue 32, the allocation path: an allocation's commit writes no key of address history (the port
 * record is the live holding, `stintFrom`). History keys are named in manager/service/history.ts
 * only, and there written (tx.set) only by the functions that end a holding; the modules that make
 * a port take only the holding's start (stintStart) from it, so no new port's commit stores one.
 */
Deno.test("architecture: history keys are written only where a holding ends; making a port takes only its start", async () => {
  const naming: string[] = [];
  for await (const path of tsFiles(`${ROOT}manager`)) {
    if (/_test\.ts$|test_support\.ts$/.test(path)) continue;
    if ((await Deno.readTextFile(path)).includes("keys.historyOf(")) {
      naming.push(path.slice(ROOT.length));
    }
  }
  assert.deepEqual(naming, ["manager/service/history.ts"], "history keys are history.ts's");
  const history = await Deno.readTextFile(`${ROOT}manager/service/history.ts`);
  const writers = [
    ...history.matchAll(/\n(?:export )?(?:async )?function (\w+)\(([\s\S]*?)\n\}\n/g),
  ]
    .filter(([, , body]) => /tx\.set\((k|e\.key|keys\.history(Of|Expiry))\b/.test(body))
    .map(([, name]) => name);
  assert.deepEqual(writers.sort(), ["closeStored", "storeEnded"]);
  for (const f of ["allocation.ts", "claimed.ts"]) {
    const text = await Deno.readTextFile(`${ROOT}manager/service/ports/${f}`);
    const taken = /import \{([^}]*)\} from "\.\.\/history\.ts"/.exec(text)?.[1] ?? "";
    const names = taken.split(",").map((s) => s.trim()).filter((s) => s !== "");
    assert.ok(names.includes("stintStart"), `${f} dates a new port's holding with stintStart`);
    assert.deepEqual(
      names.filter((n) => n !== "stintStart" && n !== "rebindStint"),
      [],
      `${f}: a new port's commit stores no holding`,
    );
  }
});

/**
 * Issue 32, the allocation path without a second inserted key: no node index key is made (a node's
 * ports are listed and filtered; older keys are only deleted), and "who holds this address now" is
 * answered from this manager's index in memory (service/history_holders.ts), caught up from the
 * change feed, never by reading a network's ports per query nor by a key an allocation writes.
 */
Deno.test("architecture: no node index key is made; a held address is found through history_holders.ts, caught up from the feed", async () => {
  const naming: string[] = [];
  for await (const file of tsFiles(`${ROOT}manager`)) {
    const path = file.slice(ROOT.length);
    if (isTest(path) || path.startsWith("manager/bench/")) continue;
    const text = await Deno.readTextFile(file);
    if (!text.includes("keys.portOfNode(")) continue;
    naming.push(path);
    for (const line of text.split("\n").filter((l) => l.includes("keys.portOfNode("))) {
      assert.match(line, /tx\.delete\(keys\.portOfNode\(|op === "delete"/, `${path}: ${line}`);
    }
  }
  assert.deepEqual(naming.sort(), [
    "manager/service/ports/records.ts",
    "manager/service/upgrade.ts",
  ]);
  const history = await Deno.readTextFile(`${ROOT}manager/service/history.ts`);
  assert.ok(!history.includes("keys.ports("), "history.ts reads no network's ports");
  assert.match(history, /await holdersOf\(ctx, net\.id, address\)/);
  const holders = await Deno.readTextFile(`${ROOT}manager/service/history_holders.ts`);
  assert.match(holders, /ctx\.feed\.since\(all\.cursor, 0\)/);
  assert.ok(!/\.publish\(|tx\.set\(|\.commit\(/.test(holders), "the index writes nothing");
});
