import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { FlowJournal, resumable } from "./flow_journal.ts";
import type { Ovs } from "./ovs.ts";

const log = createLogger("test", "error");
const A = "cookie=0x0000000000000000,table=0,priority=0,actions=drop";
const B = "cookie=0x0000000100000001,table=10,priority=100,ip,in_port=1,actions=goto_table:20";
const C = "cookie=0x0000000100000002,table=10,priority=100,ip,in_port=2,actions=goto_table:20";

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "flow-journal-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("flow journal: a snapshot and the applied changes since make the set; aborted ones do not", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(dir, log);
    assert.equal(await j.load(), null, "nothing recorded yet");
    await j.snapshot([A, B]);
    await j.begin([C], [B]);
    await j.end(true, new Set([A, C]));
    await j.begin([B], []);
    await j.end(false, new Set([A, C]));
    assert.deepEqual(await new FlowJournal(dir, log).load(), new Set([A, C]));
  }));

Deno.test("flow journal: a change begun and never closed, or a replacement under way, is unknown", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(dir, log);
    await j.snapshot([A]);
    await j.begin([B], []);
    assert.equal(await new FlowJournal(dir, log).load(), null, "the bundle may or may not be in");
    await j.snapshot([A, B]);
    assert.deepEqual(await new FlowJournal(dir, log).load(), new Set([A, B]));
    await j.invalidate();
    assert.equal(await new FlowJournal(dir, log).load(), null);
    // Not written again until the next snapshot.
    await j.begin([C], []);
    await j.end(true, new Set([C]));
    assert.equal(await new FlowJournal(dir, log).load(), null);
    await Deno.writeTextFile(`${dir}/flows.snapshot`, A);
    await Deno.writeTextFile(`${dir}/flows.log`, "B\n+x\nZ\n");
    assert.equal(await new FlowJournal(dir, log).load(), null, "a line it cannot read");
  }));

Deno.test("flow journal: a long log is folded into a new snapshot", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(dir, log);
    await j.snapshot([]);
    const big = "x".repeat(1 << 20);
    const installed = new Set<string>();
    for (let i = 0; i < 9; i++) {
      const flow = `${i}${big}`;
      await j.begin([flow], []);
      installed.add(flow);
      await j.end(true, installed);
    }
    await j.settled();
    const logSize = (await Deno.stat(`${dir}/flows.log`).catch(() => ({ size: 0 }))).size;
    assert.ok(logSize < 2 << 20, `the log was folded (${logSize} bytes left)`);
    assert.deepEqual(await new FlowJournal(dir, log).load(), installed);
  }));

Deno.test("flow journal: believed only when the switch holds as many flows", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(dir, log);
    await j.snapshot([A, B]);
    const ovs = (count: number | Error) =>
      ({
        flowCount: () => count instanceof Error ? Promise.reject(count) : Promise.resolve(count),
      }) as unknown as Ovs;
    assert.deepEqual(await resumable(j, ovs(2), "br-int"), new Set([A, B]));
    assert.equal(await resumable(j, ovs(0), "br-int"), "empty", "a restarted switch");
    assert.equal(await resumable(j, ovs(3), "br-int"), null, "a flow added by hand");
    assert.equal(await resumable(j, ovs(new Error("no switch")), "br-int"), null);
  }));

Deno.test("flow journal: a snapshot that cannot be written leaves the journal unusable, never stuck", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(`${dir}/missing`, log);
    await j.snapshot([A, B]);
    await j.begin([C], []);
    await j.end(true, new Set([A, B, C]));
    await j.settled();
    assert.equal(await j.load(), null, "the next start replaces the table");
  }));

Deno.test("flow journal: the old log replayed over a newer snapshot gives the same set (a fold stopped before the log was cut)", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(dir, log);
    await j.snapshot([A, B]);
    await j.begin([C], [B]);
    await j.end(true, new Set([A, C]));
    await j.begin([B], [C]);
    await j.end(true, new Set([A, B]));
    await j.begin([C], [A]);
    await j.end(true, new Set([B, C]));
    await j.begin([A], []);
    await j.end(false, new Set([B, C]));
    // The fold's new snapshot is in, the log it folded is still there.
    await Deno.writeTextFile(`${dir}/flows.snapshot`, [B, C].join("\n"));
    assert.deepEqual(await new FlowJournal(dir, log).load(), new Set([B, C]));
  }));

Deno.test("flow journal: changes made while a snapshot is written are kept", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(dir, log);
    await j.invalidate();
    const written = j.snapshot([A, B]);
    await j.begin([C], [B]);
    await j.end(true, new Set([A, C]));
    await written;
    await j.begin([B], []);
    await j.end(true, new Set([A, B, C]));
    await j.settled();
    assert.deepEqual(await new FlowJournal(dir, log).load(), new Set([A, B, C]));
  }));

Deno.test("flow journal: a fold runs in the background and keeps the changes made meanwhile", () =>
  withDir(async (dir) => {
    const j = new FlowJournal(dir, log);
    await j.snapshot([]);
    const installed = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const flow = `${i}${"x".repeat(1 << 20)}`;
      await j.begin([flow], []);
      installed.add(flow);
      await j.end(true, new Set(installed));
    }
    await j.settled();
    assert.deepEqual(await new FlowJournal(dir, log).load(), installed);
  }));
