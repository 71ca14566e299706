/**
 * The test runs behind `deno task test` (`make test`, CI) and `deno task test:quick`
 * (`make test-quick`).
 *
 *   deno run -A tests/run.ts all|quick [deno test flags...]
 *
 * A run is one or more groups, each a `deno test --parallel` of its own, all at once: `all` is the
 * end-to-end files of tests/ (mostly waiting), the etcd suites of tests/ (mostly computing) and the
 * members' own tests, `quick` the members' tests without those that need root, Open vSwitch or
 * etcd. Within a group the slowest files start first, so that the short ones fill the gaps at the
 * end (Deno keeps the order of files named one by one within a workspace member, but takes the
 * members in an order of its own). The run fails when a group fails. At the end each group
 * prints its slowest files (from its JUnit report, kept in .state/test/): the figures that keep
 * {@link SLOWEST} true.
 */

const ROOT = new URL("../", import.meta.url).pathname;

/**
 * The slowest files, started first, slowest first. A file that grows long is split rather than
 * added here when its tests need not share one stack.
 */
export const SLOWEST = [
  "tests/etcd_replicas_test.ts",
  "tests/e2e_egress_test.ts",
  "tests/e2e_bandwidth_test.ts",
  "tests/e2e_security_groups_test.ts",
  "tests/e2e_routed_policy_test.ts",
  "tests/etcd_api_1_test.ts",
  "tests/etcd_api_2_test.ts",
  "tests/etcd_api_3_test.ts",
  "tests/etcd_api_4_test.ts",
  "tests/etcd_api_5_test.ts",
  "tests/k8s_watch_faults_test.ts",
  "manager/quarantine_expiry_test.ts",
  "manager/bounded_commits_test.ts",
  "manager/fuzz_test.ts",
  "manager/fairness_test.ts",
  "deploy/build_test.ts",
];

/**
 * Members' tests that need root, Open vSwitch or etcd (network namespaces, nft, tc, simulated
 * nodes, etcd processes): in `all`, not in `quick`.
 */
export const NEEDS_SYSTEM = [
  "agent/bgp/bird_config_test.ts",
  "agent/dataplane/host_nft_test.ts",
  "agent/dataplane/mirrors_test.ts",
  "agent/dataplane/ofwatch_test.ts",
  "agent/dataplane/ovs_test.ts",
  "agent/dataplane/ovsdb_qos_test.ts",
  "agent/dataplane/ovsdb_test.ts",
  "agent/dataplane/trace_test.ts",
  "agent/interfaces/ip_links_test.ts",
  "agent/punt/router_slow_path_test.ts",
  "agent/interfaces/link_deleter_test.ts",
  "agent/interfaces/shaper_test.ts",
  "agent/interfaces/tx_checksum_test.ts",
  "common/run_test.ts",
  "devstack/sim_node_test.ts",
  "devstack/stale_test.ts",
  "manager/conflicts_scale_test.ts",
  "manager/quarantine_count_test.ts",
  "manager/quarantine_expiry_test.ts",
  "manager/store/etcd_store_test.ts",
  "wasm/flows_ovs_test.ts",
];

interface Group {
  name: string;
  /** Which of the workspace's test files. */
  files(all: string[]): string[];
  /** Files at once, when the caller sets no DENO_JOBS. */
  jobs: number;
}

const isEtcd = (f: string) => f.startsWith("tests/etcd_");
const isUnit = (f: string) => !f.startsWith("tests/");

/**
 * Six files at once on two cores. Eight starved the tests that measure (a bandwidth limit within
 * 10 %, a tenant's share of the manager's time) when the machine had other work.
 */
export const RUNS: Record<string, Group[]> = {
  all: [
    // Most of an end-to-end file's time is waiting (on processes, namespaces, timeouts, paced
    // traffic), not a core's.
    { name: "end-to-end", files: (all) => all.filter((f) => !isUnit(f) && !isEtcd(f)), jobs: 3 },
    // Manager replicas and the manager's API suite on etcd: a core's time each. The replicas
    // take longest; the other worker runs the rest meanwhile.
    { name: "etcd", files: (all) => all.filter(isEtcd), jobs: 2 },
    // Short files, mostly computing; they fit within the etcd group's time one at a time.
    { name: "unit", files: (all) => all.filter(isUnit), jobs: 1 },
  ],
  quick: [
    // Without end-to-end work beside it: a unit test waits on Deno KV's file writes too.
    {
      name: "quick",
      files: (all) => all.filter((f) => isUnit(f) && !NEEDS_SYSTEM.includes(f)),
      jobs: 4,
    },
  ],
};

/**
 * Files that time how fast a node recovers (traffic back within seconds of an Open vSwitch
 * restart or a deleted port): started last, when the iperf3 streams of the slowest files and the
 * etcd group no longer hold both cores. Beside them a heal once took 4 s instead of 0.1-0.2 s.
 */
export const LAST = ["tests/e2e_selfheal_test.ts"];

/** The files in the order they start: the slowest first, {@link LAST} last. */
export function ordered(files: string[]): string[] {
  const rest = files.filter((f) => !SLOWEST.includes(f) && !LAST.includes(f));
  return [
    ...SLOWEST.filter((f) => files.includes(f)),
    ...rest,
    ...LAST.filter((f) => files.includes(f)),
  ];
}

const SKIP_DIRS = new Set(["node_modules", "build", "assembly"]);

/** Every test file as `deno test` finds them (`*_test.ts`, `*.test.ts`, `test.ts`), sorted. */
export async function testFiles(dir = ROOT): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.name.startsWith(".") || SKIP_DIRS.has(e.name)) continue;
    const path = `${dir}${e.name}`;
    if (e.isDirectory) out.push(...await testFiles(`${path}/`));
    else if (/(^|[._])test\.[cm]?[jt]sx?$/.test(e.name)) out.push(path.slice(ROOT.length));
  }
  return out.sort();
}

/** The slowest files of a JUnit report: a test's time once, its steps (`a > b`) not again. */
export function slowest(junit: string, n: number): { file: string; seconds: number }[] {
  const perFile: { file: string; seconds: number }[] = [];
  for (const suite of junit.split("<testsuite ").slice(1)) {
    const file = /^name="\.?\/?([^"]*)"/.exec(suite)?.[1] ?? "?";
    let seconds = 0;
    for (const m of suite.matchAll(/<testcase name="([^"]*)"[^>]* time="([\d.]+)"/g)) {
      if (!m[1].includes(" &gt; ")) seconds += Number(m[2]);
    }
    perFile.push({ file, seconds });
  }
  return perFile.sort((a, b) => b.seconds - a.seconds).slice(0, n);
}

/** Runs one group to its end; its exit code. */
async function runGroup(group: Group, files: string[], flags: string[]): Promise<number> {
  const junit = `${ROOT}.state/test/${group.name}.xml`;
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-all", "--parallel", `--junit-path=${junit}`, ...flags, ...files],
    cwd: ROOT,
    env: { DENO_JOBS: Deno.env.get("DENO_JOBS") ?? String(group.jobs) },
    stdin: "null",
  }).spawn().status;
  const top = slowest(await Deno.readTextFile(junit).catch(() => ""), 6);
  if (top.length) {
    const list = top.map((s) => `${s.file} ${s.seconds.toFixed(0)} s`).join(", ");
    console.error(
      `tests/run.ts: ${group.name} ${code === 0 ? "passed" : "FAILED"}; slowest: ${list}`,
    );
  }
  return code;
}

async function main(args: string[]): Promise<number> {
  const [name = "", ...flags] = args;
  const groups = RUNS[name];
  if (!groups) {
    const runs = Object.keys(RUNS).join(", ");
    console.error(`tests/run.ts: which run? one of ${runs} (got "${name}")`);
    return 2;
  }
  const all = await testFiles();
  const missing = [...SLOWEST, ...LAST, ...NEEDS_SYSTEM].filter((f) => !all.includes(f));
  if (missing.length) {
    console.error(`tests/run.ts: no such test files: ${missing.join(", ")}; update tests/run.ts`);
    return 2;
  }
  await Deno.mkdir(`${ROOT}.state/test`, { recursive: true });
  const codes = await Promise.all(
    groups.map((g) => runGroup(g, ordered(g.files(all)), flags)),
  );
  return codes.find((c) => c !== 0) ?? 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
