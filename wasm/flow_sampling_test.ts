/**
 * Flow records' sample actions (flow_sampling.ts): where they go, that both engines write them
 * alike, that a model without `sampling` keeps its lines, and that a bad section is refused.
 */
import assert from "node:assert/strict";
import { compileFlows, compileFlowsTs } from "./flows.ts";
import { sampleProbability } from "./flow_sampling.ts";
import { scenarios } from "./testdata/scenarios.ts";

const model = scenarios.flow_records;

Deno.test("sampling: each local port's CLASSIFY flow samples what it sends, the ACL defaults what they drop; nothing else changes", () => {
  const sampled = compileFlows(model);
  const plain = compileFlows({ ...model, sampling: undefined });
  assert.deepEqual(plain, compileFlows(scenarios.security_groups));
  const changed = sampled.filter((l) => l.includes("sample("));
  assert.equal(changed.length, model.localPorts.length + 2);
  for (const p of model.localPorts) {
    assert.ok(
      changed.some((l) =>
        l.includes(`,in_port=${p.ofport},`) &&
        l.includes(
          "actions=sample(probability=6553,collector_set_id=1,obs_domain_id=0,obs_point_id=1),",
        )
      ),
      `port ${p.ofport} sends sampled`,
    );
  }
  for (const table of [50, 51]) {
    assert.ok(changed.includes(
      `cookie=0x0000000000000000,table=${table},priority=0,actions=sample(probability=6553,collector_set_id=1,obs_domain_id=0,obs_point_id=2)`,
    ));
  }
  // Without the sample actions, the same lines.
  const stripped = sampled.map((l) =>
    l.replace(/sample\([^)]*\),?/, "").replace(/actions=$/, "actions=drop")
  ).sort();
  assert.deepEqual(stripped, plain);
});

Deno.test("sampling: the JavaScript build writes the same lines", () => {
  assert.deepEqual(compileFlowsTs(model), compileFlows(model));
  // And forgets the sampling of the call before.
  assert.deepEqual(
    compileFlowsTs(scenarios.security_groups),
    compileFlows(scenarios.security_groups),
  );
});

Deno.test("sampling: 1 in N is 65535 / N, at least 1", () => {
  assert.deepEqual([1, 10, 100, 65535, 1_000_000].map(sampleProbability), [65535, 6553, 655, 1, 1]);
});

Deno.test("sampling: a bad section is refused naming the field", () => {
  const bad = (sampling: unknown) => () => compileFlows({ ...model, sampling } as typeof model);
  assert.throws(
    bad({ probability: 0, collectorSetId: 1 }),
    /^Error: sampling.probability: expected an integer in \[1, 65535\], got 0$/,
  );
  assert.throws(bad({ probability: 10, collectorSetId: 0 }), /sampling.collectorSetId: expected/);
  assert.throws(bad("often"), /sampling: expected an object/);
});
