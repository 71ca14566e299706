import assert from "node:assert/strict";
import { createLogger, ManagerError, ManagerUnavailableError } from "@knitter/common";
import { ConflictReporter, type ReportedConflict } from "./conflict_report.ts";

const ONE: ReportedConflict = {
  networkId: "n1",
  tenant: "acme",
  id: "p1",
  field: "ip",
  value: "10.0.0.2",
  reason: "local",
  with: { tenant: "acme", id: "b1" },
};

/** A manager whose answers the test scripts: each call takes the next outcome ("ok" when none). */
function fakeManager(outcomes: ("ok" | "down" | "refuse")[] = []) {
  const calls: { method: string; path: string; body: unknown }[] = [];
  return {
    calls,
    request(method: string, path: string, body?: unknown) {
      calls.push({ method, path, body });
      const next = outcomes.shift() ?? "ok";
      if (next === "down") return Promise.reject(new ManagerUnavailableError("away"));
      if (next === "refuse") {
        return Promise.reject(new ManagerError(400, "invalid_request", "no"));
      }
      return Promise.resolve({});
    },
  };
}

const log = createLogger("test", "error");

Deno.test("conflict report: the whole set goes once per change, the latest after one in flight", async () => {
  const m = fakeManager();
  const r = new ConflictReporter(m, "worker 1", log);
  r.set([]);
  r.set([ONE]); // while the first is in flight: only the latest goes next
  r.set([ONE]);
  await r.settled();
  r.set([ONE]); // unchanged: nothing goes
  await r.settled();
  r.set([]);
  await r.settled();
  assert.deepEqual(m.calls, [
    { method: "PUT", path: "/api/v1/nodes/worker%201/conflicts", body: { items: [] } },
    { method: "PUT", path: "/api/v1/nodes/worker%201/conflicts", body: { items: [ONE] } },
    { method: "PUT", path: "/api/v1/nodes/worker%201/conflicts", body: { items: [] } },
  ]);
  await r.stop();
});

Deno.test("conflict report: a manager away gets the set once it answers; a refusal is not repeated", async () => {
  const m = fakeManager(["down", "down", "ok", "refuse"]);
  const r = new ConflictReporter(m, "w1", log);
  r.set([ONE]);
  await r.settled();
  assert.equal(m.calls.length, 3);
  assert.deepEqual(m.calls.map((c) => c.body), [{ items: [ONE] }, { items: [ONE] }, {
    items: [ONE],
  }]);
  r.set([]);
  await r.settled();
  r.set([]);
  await r.settled();
  assert.equal(m.calls.length, 4, "the refused set is not sent again");
  await r.stop();
});

Deno.test("conflict report: stop ends the retries at once", async () => {
  const m = fakeManager(Array(100).fill("down"));
  const r = new ConflictReporter(m, "w1", log);
  r.set([ONE]);
  await new Promise((resolve) => setTimeout(resolve, 10));
  await r.stop();
  const n = m.calls.length;
  r.set([]);
  await r.settled();
  assert.equal(m.calls.length, n, "nothing goes after stop");
});
