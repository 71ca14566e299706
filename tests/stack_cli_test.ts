/**
 * The local stack launcher (scripts/stack.ts) as people use it: `deno task stack up` returns with
 * the stack running, `deno task stack down` leaves nothing of it.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import type { Manifest } from "../scripts/stack.ts";
import { pidAlive } from "../devstack/cleanup.ts";

const ROOT = new URL("../", import.meta.url).pathname;

function task(args: string[]) {
  const config = `${ROOT}deno.json`;
  return run([Deno.execPath(), "task", "--quiet", "--config", config, "stack", ...args], {
    check: false,
  });
}

async function netnsNames(): Promise<string[]> {
  const r = await run(["ip", "netns", "list"]);
  return r.stdout.split("\n").map((l) => l.split(" ")[0]).filter((n) => n !== "");
}

async function cmdline(pid: number): Promise<string[] | null> {
  try {
    return (await Deno.readTextFile(`/proc/${pid}/cmdline`)).replace(/\0$/, "").split("\0");
  } catch {
    return null;
  }
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test("stack launcher: up returns with a manager and 2 nodes running, down leaves nothing", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "kt-stack-cli-" });
  const dir = `${tmp}/stack`;
  try {
    const up = await task(["up", "--nodes", "2", "--dir", dir, "--log-level", "warn", "--quiet"]);
    assert.equal(up.code, 0, `up failed: ${up.stderr}`);
    assert.equal(up.stdout.trim(), `${dir}/stack.json`);
    const m: Manifest = JSON.parse(await Deno.readTextFile(`${dir}/stack.json`));
    assert.equal(m.status, "up");
    assert.deepEqual(m.nodes.map((n) => n.name), ["n1", "n2"]);
    const roles = m.processes.map((p) => p.role).sort();
    assert.deepEqual(roles, [
      "agent",
      "agent",
      "manager",
      "ovs-vswitchd",
      "ovs-vswitchd",
      "ovsdb-server",
      "ovsdb-server",
    ]);

    // The launcher has exited; what it started has not.
    for (const p of m.processes) {
      assert.ok(await pidAlive(p.pid), `${p.role} (pid ${p.pid}) runs after up returned`);
      assert.deepEqual(await cmdline(p.pid), p.cmdline);
    }
    const r = await fetch(`${m.manager.url}/api/v1/nodes`, {
      headers: { authorization: `Bearer ${m.manager.adminToken}` },
    });
    assert.equal(r.status, 200);
    const nodes = (await r.json()).items.map((n: { name: string }) => n.name).sort();
    assert.deepEqual(nodes, ["n1", "n2"], "both agents registered with the manager");
    const names = await netnsNames();
    for (const n of m.netns) assert.ok(names.includes(n), `netns ${n} exists`);

    // A pod through the real plugin, left attached: down must take its netns too.
    const add = await run([m.nodes[0].cniScript, "ADD", "pod1"], { check: false });
    assert.equal(add.code, 0, `ADD: ${add.stdout} ${add.stderr}`);
    assert.match(JSON.parse(add.stdout).ips[0].address, /^10\.88\.0\.\d+\/24$/);
    assert.ok((await netnsNames()).includes(`${m.nodes[0].netns}-pod1`));

    const st = await task(["status", "--dir", dir]);
    assert.equal(st.code, 0, st.stderr);
    assert.doesNotMatch(st.stdout, /GONE/);

    const down = await task(["down", "--dir", dir]);
    assert.equal(down.code, 0, `down failed: ${down.stderr}`);
    const after = await netnsNames();
    const leftNetns = after.filter((n) => n.startsWith(`${m.prefix}-`) || m.netns.includes(n));
    assert.deepEqual(leftNetns, [], "no netns of the stack is left");
    for (const p of m.processes) {
      const now = await cmdline(p.pid);
      const alive = (await pidAlive(p.pid)) && JSON.stringify(now) === JSON.stringify(p.cmdline);
      assert.ok(!alive, `${p.role} (pid ${p.pid}) is stopped`);
    }
    assert.ok(!(await exists(dir)), `${dir} is gone`);

    const again = await task(["down", "--dir", dir]);
    assert.equal(again.code, 0, "down with no stack succeeds");
    assert.match(again.stderr, /no stack/);
  } finally {
    if (await exists(`${dir}/stack.json`)) await task(["down", "--dir", dir]);
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});
