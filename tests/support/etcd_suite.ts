/**
 * The manager's API test suite, unchanged, on etcd: the same test files run in a child `deno test`
 * whose test apps open their stores on a real etcd (manager/test_support.ts reads the endpoints
 * from the environment), each under a key prefix of its own. The suite is cut into shards, one
 * test file each (tests/etcd_api_N_test.ts) with an etcd of its own, so that they run at once.
 */
import assert from "node:assert/strict";
import { startEtcd } from "./etcd.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/**
 * The suite's slow files (on etcd, 8 to 23 s each), spread so that the shards take about as long;
 * the last shard runs every other file of the suite, new ones too.
 */
const SHARDS: string[][] = [
  ["manager/bounded_commits_test.ts"],
  ["manager/quarantine_expiry_test.ts", "manager/fuzz_test.ts"],
  ["manager/cluster_attacks_test.ts", "manager/conflicts_scale_test.ts"],
  [
    "manager/fairness_test.ts",
    "manager/security_groups_test.ts",
    "manager/quarantine_test.ts",
    "manager/quarantine_count_test.ts",
  ],
];

export const SHARD_COUNT = SHARDS.length + 1;

/** Every manager test file built on the test app (the store's own tests excepted). */
export async function suiteFiles(): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(`${ROOT}manager`)) {
    if (!entry.isFile || !entry.name.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(`${ROOT}manager/${entry.name}`);
    if (text.includes("./test_support.ts")) files.push(`manager/${entry.name}`);
  }
  return files.sort();
}

/** The files of shard `n` (1-based) of the suite. */
export function shardFiles(suite: string[], n: number): string[] {
  const named = SHARDS.flat();
  return n <= SHARDS.length ? SHARDS[n - 1] : suite.filter((f) => !named.includes(f));
}

/** How many tests/etcd_api_N_test.ts there are, checked to be numbered 1 to N. */
async function shardTests(): Promise<number> {
  const numbers: number[] = [];
  for await (const entry of Deno.readDir(`${ROOT}tests`)) {
    const m = /^etcd_api_(\d+)_test\.ts$/.exec(entry.name);
    if (m) numbers.push(Number(m[1]));
  }
  numbers.sort((a, b) => a - b);
  assert.deepEqual(numbers, numbers.map((_, i) => i + 1), "shard files are numbered from 1");
  return numbers.length;
}

/** The name of shard `n`'s test. */
export function shardTitle(n: number): string {
  return `the manager API suite passes on etcd, shard ${n} of ${SHARD_COUNT}`;
}

/**
 * Runs shard `n` of the suite on an etcd of its own. (Each shard's file registers its test, so
 * that reports name the file.)
 */
export async function runShard(n: number): Promise<void> {
  const suite = await suiteFiles();
  assert.ok(suite.includes("manager/app_test.ts"), "the suite files were found");
  const files = shardFiles(suite, n);
  const named = SHARDS.flat();
  assert.deepEqual(named.filter((f) => !suite.includes(f)), [], "shards name suite files only");
  assert.equal(new Set(named).size, named.length, "no file is in two shards");
  assert.equal(await shardTests(), SHARD_COUNT, "a test file runs each shard");
  assert.ok(files.length > 0, `shard ${n} has files`);
  await using etcd = await startEtcd();
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["test", "--allow-all", ...files],
    cwd: ROOT,
    env: { KNITTER_TEST_ETCD_ENDPOINTS: etcd.endpoints.join(","), NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.ok(out.success, `the suite failed on etcd:\n${text.slice(-6000)}`);
  assert.match(text, /ok \| \d+ passed/);
}
