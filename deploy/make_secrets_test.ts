import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { loadConfig } from "@knitter/manager";
import { FILES, makeSecrets } from "./make_secrets.ts";

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-secrets-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("the tokens file is one the manager loads, with an admin and a token per node", async () => {
  await withDir(async (dir) => {
    await makeSecrets(dir, ["worker1", "worker2"]);
    const { config } = await loadConfig(
      [],
      (name) => name === "KNITTER_MANAGER_TOKENS_FILE" ? `${dir}/${FILES.tokens}` : undefined,
    );
    assert.deepEqual(config.tokens.map((t) => `${t.scope}:${t.node ?? ""}`), [
      "admin:",
      "node:worker1",
      "node:worker2",
    ]);
    const admin = await Deno.readTextFile(`${dir}/${FILES.admin}`);
    assert.equal(admin, config.tokens[0].token);
    const lines = (await Deno.readTextFile(`${dir}/${FILES.nodes}`)).trim().split("\n");
    assert.deepEqual(lines, config.tokens.slice(1).map((t) => `${t.node} ${t.token}`));
    for (const file of Object.values(FILES)) {
      assert.equal(Deno.statSync(`${dir}/${file}`).mode! & 0o777, 0o600, file);
    }
  });
});

Deno.test("adding a node keeps every token already handed out", async () => {
  await withDir(async (dir) => {
    const first = await makeSecrets(dir, ["worker1"]);
    const second = await makeSecrets(dir, ["worker1", "worker2"]);
    assert.deepEqual(second.slice(0, 2), first);
    assert.equal(second.length, 3);
    assert.notEqual(second[2].token, second[1].token);
    assert.deepEqual(
      [...Deno.readDirSync(dir)].map((e) => e.name).sort(),
      Object.values(FILES).sort(),
    );
  });
});

Deno.test("a bad node name or a broken tokens file is refused, saying which", async () => {
  await withDir(async (dir) => {
    const script = new URL("./make_secrets.ts", import.meta.url).pathname;
    const bad = await run([
      Deno.execPath(),
      "run",
      "-A",
      script,
      "--dir",
      dir,
      "--nodes",
      "Worker_1",
    ], {
      check: false,
      timeoutMs: 30_000,
    });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /Not a node name: "Worker_1"/);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
    await Deno.writeTextFile(`${dir}/${FILES.tokens}`, "{oops");
    await assert.rejects(makeSecrets(dir, ["worker1"]), /tokens.json is not valid JSON/);
  });
});
