/**
 * The manager's metrics before anything happened: the series whose labels are known in advance
 * are there at 0, since a series born at its first increment hides that increment from
 * Prometheus's rate() and increase() (the dashboard's allocations and refusals, the alerts).
 */
import assert from "node:assert/strict";
import { parseExposition, samplesOf } from "@knitter/common/metrics_text";
import { Metrics } from "./metrics.ts";

Deno.test("manager metrics: allocations and releases of each kind, refusals of each reason, exported at 0 from the start", async () => {
  const f = parseExposition(await new Metrics().render());
  const zero = (name: string, labels: Record<string, string>) => {
    const s = samplesOf(f, name, labels);
    assert.equal(s.length, 1, `${name} ${JSON.stringify(labels)} exported`);
    assert.equal(s[0].value, 0, `${name} ${JSON.stringify(labels)}`);
  };
  for (const kind of ["ip", "vni", "vlan"]) {
    zero("knitter_manager_allocations_total", { kind });
    zero("knitter_manager_releases_total", { kind });
  }
  for (const reason of ["exhausted", "taken"]) {
    zero("knitter_manager_allocation_failures_total", { reason });
  }
});
