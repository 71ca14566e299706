/**
 * A test killed by hand (SIGKILL: its Cleanup never runs) leaves a simulated node behind: its netns,
 * its Open vSwitch daemons, a process inside the netns, its temporary directory. The next sweep
 * removes them all by the stale lease, and leaves the names of a live test alone. As root.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup, pidAlive } from "./cleanup.ts";
import { LEASES_DIR } from "./lease.ts";
import { sweepStale } from "./stale.ts";

/** A child test process that starts a node (and a sleeper in it), says what it made, and waits. */
const CHILD = `
import { Cleanup, startSimNode } from "${new URL("./mod.ts", import.meta.url).href}";
const cleanup = new Cleanup();
const node = await startSimNode({ name: "n1", cleanup });
const sleeper = new Deno.Command("ip", { args: ["netns", "exec", node.netns, "sleep", "600"] }).spawn();
const dir = await cleanup.tempDir();
console.log(JSON.stringify({ prefix: cleanup.prefix, netns: node.netns, sleeper: sleeper.pid, dir }));
await new Promise(() => {});
`;

interface Made {
  prefix: string;
  netns: string;
  sleeper: number;
  dir: string;
}

async function startChild(): Promise<{ child: Deno.ChildProcess; made: Made }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", CHILD],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the child ended before it said what it made: ${text}`);
    text += value;
  }
  reader.releaseLock();
  return { child, made: JSON.parse(text.slice(0, text.indexOf("\n"))) };
}

async function netnsList(): Promise<string[]> {
  return (await run(["ip", "netns", "list"])).stdout.split("\n").map((l) => l.split(" ")[0]);
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test("a killed test's node, daemons and directory are swept by its stale lease; a live test's are not", async () => {
  await using cleanup = new Cleanup();
  // Whatever happens, both children end and a sweep takes what they made.
  cleanup.defer(() => sweepStale().then(() => {}));
  const killed = await startChild();
  cleanup.defer(() => end(killed.child));
  const live = await startChild();
  cleanup.defer(() => end(live.child));
  const ovsPids = (await run(["ip", "netns", "pids", killed.made.netns])).stdout.trim().split("\n")
    .map(Number);
  assert.ok(ovsPids.length >= 3, `ovsdb-server, ovs-vswitchd and the sleeper: ${ovsPids}`);

  killed.child.kill("SIGKILL");
  await killed.child.status;
  assert.ok(await pidAlive(killed.made.sleeper), "killing the test left its sleeper running");

  const swept = await sweepStale();
  assert.ok(swept.includes(killed.made.prefix), `swept ${swept}`);
  assert.ok(!swept.includes(live.made.prefix), "a live test's lease is not stale");
  for (const pid of ovsPids) assert.equal(await pidAlive(pid), false, `pid ${pid} still runs`);
  assert.ok(!(await netnsList()).includes(killed.made.netns));
  assert.equal(await exists(killed.made.dir), false);
  assert.equal(await exists(`${LEASES_DIR}/${killed.made.prefix}`), false);
  // The live test keeps everything.
  assert.ok((await netnsList()).includes(live.made.netns));
  assert.ok(await exists(live.made.dir));
  assert.ok(await pidAlive(live.made.sleeper));
  // Once killed in turn, it is stale too.
  await end(live.child);
  assert.ok((await sweepStale()).includes(live.made.prefix));
  assert.ok(!(await netnsList()).includes(live.made.netns));
  assert.equal(await pidAlive(live.made.sleeper), false);
});

async function end(child: Deno.ChildProcess): Promise<void> {
  try {
    child.kill("SIGKILL");
  } catch {
    // already ended
  }
  await child.status;
}
