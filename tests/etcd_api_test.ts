/**
 * The manager's API test suite, unchanged, on etcd: the same test files run in a child `deno test`
 * whose test apps open their stores on a real etcd (manager/test_support.ts reads the endpoints
 * from the environment), each under a key prefix of its own.
 */
import assert from "node:assert/strict";
import { startEtcd } from "./support/etcd.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** Every manager test file built on the test app (the store's own tests excepted). */
async function suiteFiles(): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(`${ROOT}manager`)) {
    if (!entry.isFile || !entry.name.endsWith("_test.ts")) continue;
    const text = await Deno.readTextFile(`${ROOT}manager/${entry.name}`);
    if (text.includes("./test_support.ts")) files.push(`manager/${entry.name}`);
  }
  return files.sort();
}

Deno.test("the manager API suite passes on etcd", async () => {
  await using etcd = await startEtcd();
  const files = await suiteFiles();
  assert.ok(files.includes("manager/app_test.ts"), "the suite files were found");
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
});
