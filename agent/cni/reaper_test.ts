import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { goneReason, GraceClock, reapable, Reaper } from "./reaper.ts";
import { AgentState, type Attachment } from "../state.ts";

function record(containerId: string, netns: string, netnsId?: string): Attachment {
  return {
    containerId,
    ifName: "eth0",
    netns,
    netnsId,
    tenant: "t",
    status: "ready",
    interfaces: [],
    createdAt: "2026-11-25T00:00:00.000Z",
  };
}

Deno.test("goneReason: a missing path, or another namespace at it, is gone", () => {
  const a = record("c", "/var/run/netns/p", "4:100");
  assert.equal(goneReason(a, "4:100"), undefined);
  assert.match(goneReason(a, "missing")!, /no longer exists/);
  // Not readable (permission denied): the agent cannot tell, so it is not gone.
  assert.equal(goneReason(a, null), undefined);
  assert.match(goneReason(a, "4:101")!, /another network namespace/);
  // A record from before identities were kept: only a missing path counts.
  assert.equal(goneReason(record("c", "/var/run/netns/p"), "4:101"), undefined);
});

Deno.test("reapable: knitctl's extra interfaces are left alone", () => {
  assert.equal(reapable({ containerId: "abc" }), true);
  assert.equal(reapable({ containerId: "knitctl-1234" }), false);
});

Deno.test("GraceClock: due once gone for the grace, forgotten when seen no longer", () => {
  const clock = new GraceClock(1000);
  assert.deepEqual(clock.due(["a"], 0), []);
  assert.deepEqual(clock.due(["a", "b"], 999), []);
  assert.deepEqual(clock.due(["a", "b"], 1000), ["a"]);
  // b's netns came back: its clock starts again when it goes.
  assert.deepEqual(clock.due(["a"], 1500), ["a"]);
  assert.deepEqual(clock.due(["a", "b"], 2000), ["a"]);
  assert.deepEqual(clock.due(["b"], 3000), ["b"]);
});

Deno.test("Reaper: reaps gone attachments after the grace (none at start), skips the rest, survives failures", async () => {
  const state = await AgentState.open(":memory:");
  try {
    const ids: Record<string, string | null> = {
      "/ns/live": "1:1",
      "/ns/recreated": "1:9",
      "/ns/gone": "missing",
      "/ns/failing": "missing",
      "/ns/extra": "missing",
      "/ns/unreadable": null,
    };
    for (
      const a of [
        record("live", "/ns/live", "1:1"),
        record("recreated", "/ns/recreated", "1:2"),
        record("gone", "/ns/gone", "1:3"),
        record("failing", "/ns/failing", "1:4"),
        record("knitctl-x", "/ns/extra", "1:5"),
        record("unreadable", "/ns/unreadable", "1:6"),
      ]
    ) await state.putAttachment(a);
    const reaped: string[] = [];
    const reaper = new Reaper({
      state,
      attacher: {
        reap: (a: Attachment, why: string) => {
          if (a.containerId === "failing") return Promise.reject(new Error("manager down"));
          assert.match(why, /netns gone/);
          reaped.push(a.containerId);
          return Promise.resolve(true);
        },
      },
      graceSeconds: 3600,
      intervalSeconds: 0,
      log: createLogger("test", "error"),
      netnsId: (path) => Promise.resolve(ids[path]),
    });
    assert.equal(await reaper.pass(), 0, "nothing within the grace");
    assert.deepEqual(reaped, []);
    assert.equal(await reaper.pass(false), 2, "the start's pass has no grace");
    assert.deepEqual(reaped.sort(), ["gone", "recreated"]);
    await reaper.stop();
  } finally {
    state.close();
  }
});
