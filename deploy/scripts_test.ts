/**
 * The shell steps inside the DaemonSet, run for real with sh: the init step that installs the
 * plugin and the conflist on the node, and the entrypoint that picks the node's token.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { makeSecrets } from "./make_secrets.ts";
import { DEPLOY_DIR, findObject, loadManifests } from "./manifests.ts";
import { expandReferences } from "./pod_env.ts";

// deno-lint-ignore no-explicit-any
type Obj = any;

const pod = findObject(loadManifests(), "DaemonSet", "knitter-agent").object.spec.template.spec;
const install = pod.initContainers.find((c: Obj) => c.name === "install-cni");
const agent = pod.containers.find((c: Obj) => c.name === "agent");

function literalEnv(container: Obj): Record<string, string> {
  return Object.fromEntries(
    container.env.filter((e: Obj) => e.value !== undefined).map((e: Obj) => [e.name, e.value]),
  );
}

/** The container's `sh -c SCRIPT NAME ARGS...` with the kubelet's `$(VAR)` expansion applied. */
function shellArgv(container: Obj, env: Record<string, string>, args?: string[]): string[] {
  const argv = [...container.command, ...(args ?? container.args ?? [])];
  assert.deepEqual(argv.slice(0, 2), ["/bin/sh", "-c"]);
  return argv.map((a) => expandReferences(a, env));
}

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-deploy-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** The init step against a fake node root: CNI dirs and the image's files redirected there. */
async function runInstall(dir: string, plugin: string) {
  const env = {
    ...literalEnv(install),
    KNITTER_PLUGIN_SRC: plugin,
    KNITTER_CONFLIST_SRC: `${DEPLOY_DIR}/cni/10-knitter.conflist`,
    CNI_BIN_DIR: `${dir}/opt/cni/bin`,
    CNI_CONF_DIR: `${dir}/etc/cni/net.d`,
  };
  return await run(shellArgv(install, env), { env, check: false, timeoutMs: 10_000 });
}

Deno.test("the init step installs the plugin and the conflist, and again over an old install", async () => {
  await withDir(async (dir) => {
    await Deno.mkdir(`${dir}/opt/cni/bin`, { recursive: true });
    await Deno.mkdir(`${dir}/etc/cni/net.d`, { recursive: true });
    const plugin = `${dir}/knitter-plugin`;
    for (const version of ["v1", "v2"]) {
      await Deno.writeTextFile(plugin, `#!/bin/sh\necho ${version}\n`);
      const result = await runInstall(dir, plugin);
      assert.equal(result.code, 0, result.stderr);
      const installed = `${dir}/opt/cni/bin/knitter`;
      assert.equal(Deno.statSync(installed).mode! & 0o777, 0o755);
      assert.equal((await run([installed])).stdout, `${version}\n`);
    }
    assert.equal(
      await Deno.readTextFile(`${dir}/etc/cni/net.d/10-knitter.conflist`),
      await Deno.readTextFile(`${DEPLOY_DIR}/cni/10-knitter.conflist`),
    );
    assert.deepEqual([...Deno.readDirSync(`${dir}/opt/cni/bin`)].map((e) => e.name), ["knitter"]);
    assert.deepEqual([...Deno.readDirSync(`${dir}/etc/cni/net.d`)].map((e) => e.name), [
      "10-knitter.conflist",
    ]);
  });
});

Deno.test("the init step fails without leaving a partial file or touching the old install", async () => {
  await withDir(async (dir) => {
    await Deno.mkdir(`${dir}/opt/cni/bin`, { recursive: true });
    await Deno.mkdir(`${dir}/etc/cni/net.d`, { recursive: true });
    await Deno.writeTextFile(`${dir}/opt/cni/bin/knitter`, "old");
    const result = await runInstall(dir, `${dir}/no-such-plugin`);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /no-such-plugin/);
    assert.deepEqual([...Deno.readDirSync(`${dir}/opt/cni/bin`)].map((e) => e.name), ["knitter"]);
    assert.equal(await Deno.readTextFile(`${dir}/opt/cni/bin/knitter`), "old");
    assert.deepEqual([...Deno.readDirSync(`${dir}/etc/cni/net.d`)], []);
  });
});

Deno.test("the init step takes the plugin from where the image puts it", () => {
  const containerfile = Deno.readTextFileSync(`${DEPLOY_DIR}/image/Containerfile`);
  assert.match(
    containerfile,
    new RegExp(`^COPY knitter ${literalEnv(install).KNITTER_PLUGIN_SRC}$`, "m"),
  );
  const mounts = install.volumeMounts.map((m: Obj) => m.mountPath);
  const env = literalEnv(install);
  for (const path of [env.CNI_BIN_DIR, env.CNI_CONF_DIR]) assert.ok(mounts.includes(path), path);
  assert.ok(mounts.some((m: string) => env.KNITTER_CONFLIST_SRC.startsWith(`${m}/`)));
});

/** The agent's entrypoint with `printenv` in place of the agent: what would the agent get? */
async function runEntrypoint(tokensFile: string, node: string) {
  const env = { ...literalEnv(agent), KNITTER_AGENT_TOKENS_FILE: tokensFile };
  const argv = shellArgv(agent, env, ["printenv", "KNITTER_AGENT_MANAGER_TOKEN"]);
  return await run(argv, {
    env: { ...env, KNITTER_AGENT_NODE_NAME: node },
    check: false,
    timeoutMs: 10_000,
  });
}

Deno.test("the agent's entrypoint hands the agent its own node's token", async () => {
  await withDir(async (dir) => {
    const tokens = await makeSecrets(dir, ["worker1", "worker2.example"]);
    for (const node of ["worker1", "worker2.example"]) {
      const result = await runEntrypoint(`${dir}/node-tokens`, node);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout.trim(), tokens.find((t) => t.node === node)!.token);
    }
  });
});

Deno.test("the agent's entrypoint refuses to start without a token, saying what to do", async () => {
  await withDir(async (dir) => {
    await makeSecrets(dir, ["worker1"]);
    const unknown = await runEntrypoint(`${dir}/node-tokens`, "worker9");
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no token for node "worker9"/);
    assert.match(unknown.stderr, /deno task deploy:secrets --nodes worker9/);
    assert.equal(unknown.stdout, "");
    const missing = await runEntrypoint(`${dir}/nothing-here`, "worker1");
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read .*nothing-here/);
  });
});
