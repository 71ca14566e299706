/**
 * The shell steps inside the DaemonSet, run for real with sh: the init step that installs the
 * plugin and the conflist on the node, and the entrypoint that picks the node's token.
 */
import assert from "node:assert/strict";
import { run, start } from "@knitter/common";
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

/** Where the image's ConfigMap mount puts the installer, and where it is in the repository. */
const INSTALLER = "/etc/knitter/cni/install-cni.sh";
const INSTALLER_SRC = `${DEPLOY_DIR}/cni/install-cni.sh`;

/** The installer's environment against a fake node root: CNI dirs and the image's files there. */
function installEnv(container: Obj, dir: string, plugin: string): Record<string, string> {
  assert.deepEqual(container.command, ["/bin/sh", INSTALLER]);
  return {
    ...literalEnv(container),
    KNITTER_PLUGIN_SRC: plugin,
    KNITTER_CONFLIST_SRC: `${DEPLOY_DIR}/cni/10-knitter.conflist`,
    CNI_BIN_DIR: `${dir}/opt/cni/bin`,
    CNI_CONF_DIR: `${dir}/etc/cni/net.d`,
  };
}

/** The init step against a fake node root. */
async function runInstall(dir: string, plugin: string) {
  const env = installEnv(install, dir, plugin);
  return await run(["/bin/sh", INSTALLER_SRC], { env, check: false, timeoutMs: 10_000 });
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

async function fakeNode(dir: string): Promise<string> {
  await Deno.mkdir(`${dir}/opt/cni/bin`, { recursive: true });
  await Deno.mkdir(`${dir}/etc/cni/net.d`, { recursive: true });
  const plugin = `${dir}/knitter-plugin`;
  await Deno.writeTextFile(plugin, "#!/bin/sh\necho knitter\n");
  return plugin;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test("the init step chains portmap, bandwidth and tuning after knitter, those the node has", async () => {
  await withDir(async (dir) => {
    const plugin = await fakeNode(dir);
    for (const p of ["portmap", "tuning"]) {
      await Deno.writeTextFile(`${dir}/opt/cni/bin/${p}`, "#!/bin/sh\n", { mode: 0o755 });
    }
    const result = await runInstall(dir, plugin);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /chained: portmap tuning/);
    const list = JSON.parse(await Deno.readTextFile(`${dir}/etc/cni/net.d/10-knitter.conflist`));
    const shipped = JSON.parse(await Deno.readTextFile(`${DEPLOY_DIR}/cni/10-knitter.conflist`));
    assert.deepEqual(list.plugins, [
      ...shipped.plugins,
      { type: "portmap", capabilities: { portMappings: true } },
      { type: "tuning" },
    ]);
    // bandwidth installed later: chained on the next install.
    await Deno.writeTextFile(`${dir}/opt/cni/bin/bandwidth`, "#!/bin/sh\n", { mode: 0o755 });
    assert.equal((await runInstall(dir, plugin)).code, 0);
    const again = JSON.parse(await Deno.readTextFile(`${dir}/etc/cni/net.d/10-knitter.conflist`));
    assert.deepEqual(again.plugins.map((p: Obj) => p.type), [
      "knitter",
      "portmap",
      "bandwidth",
      "tuning",
    ]);
  });
});

Deno.test("the cni-keeper container puts back a conflist or plugin someone else changed or deleted", async () => {
  const keeper = pod.containers.find((c: Obj) => c.name === "cni-keeper");
  assert.ok(keeper, "the DaemonSet has a cni-keeper container");
  assert.deepEqual(
    keeper.volumeMounts.map((m: Obj) => m.name).sort(),
    install.volumeMounts.map((m: Obj) => m.name).sort(),
  );
  assert.ok(Number(literalEnv(keeper).KNITTER_CNI_WATCH_SECONDS) > 0);
  await withDir(async (dir) => {
    const plugin = await fakeNode(dir);
    const env = { ...installEnv(keeper, dir, plugin), KNITTER_CNI_WATCH_SECONDS: "1" };
    const conf = `${dir}/etc/cni/net.d/10-knitter.conflist`;
    const bin = `${dir}/opt/cni/bin/knitter`;
    const shipped = await Deno.readTextFile(`${DEPLOY_DIR}/cni/10-knitter.conflist`);
    const keeping = start(["/bin/sh", INSTALLER_SRC], { env, check: false });
    try {
      const until = async (what: string, ok: () => Promise<boolean>) => {
        const end = Date.now() + 8_000;
        while (!(await ok())) {
          if (Date.now() > end) assert.fail(`the keeper did not ${what}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      await until("install", () => exists(conf));
      await Deno.remove(conf);
      await Deno.writeTextFile(bin, "#!/bin/sh\necho someone else\n");
      await until("put the conflist back", () => exists(conf));
      await until(
        "put the plugin back",
        async () => (await Deno.readTextFile(bin)) === (await Deno.readTextFile(plugin)),
      );
      await Deno.writeTextFile(conf, '{"cniVersion": "1.1.0", "name": "other", "plugins": []}');
      await until("undo the change", async () => (await Deno.readTextFile(conf)) === shipped);
      assert.deepEqual([...Deno.readDirSync(`${dir}/etc/cni/net.d`)].map((e) => e.name), [
        "10-knitter.conflist",
      ]);
    } finally {
      await keeping.abandon();
    }
  });
});

Deno.test("the installer is in the ConfigMap mounted where the containers run it", () => {
  const kustomization = Deno.readTextFileSync(`${DEPLOY_DIR}/kustomization.yaml`);
  assert.match(kustomization, /^ {6}- cni\/install-cni\.sh$/m);
  const mount = install.volumeMounts.find((m: Obj) => INSTALLER.startsWith(`${m.mountPath}/`));
  assert.equal(mount?.name, "cni-config");
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
