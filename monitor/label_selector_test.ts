import assert from "node:assert/strict";
import { matchesSelector, selectorProblem } from "./label_selector.ts";

Deno.test("label selectors: matchLabels and every operator; empty selects all", () => {
  const labels = { role: "client", tier: "web" };
  assert.ok(matchesSelector({}, labels));
  assert.ok(matchesSelector({}, {}));
  assert.ok(matchesSelector({ matchLabels: { role: "client" } }, labels));
  assert.ok(!matchesSelector({ matchLabels: { role: "server" } }, labels));
  const expr = (operator: string, values?: string[]) => ({
    matchExpressions: [{ key: "tier", operator, ...(values ? { values } : {}) }],
  });
  assert.ok(matchesSelector(expr("In", ["web", "db"]), labels));
  assert.ok(!matchesSelector(expr("In", ["db"]), labels));
  assert.ok(!matchesSelector(expr("In", ["web"]), {}));
  assert.ok(matchesSelector(expr("NotIn", ["db"]), labels));
  assert.ok(matchesSelector(expr("NotIn", ["db"]), {}), "NotIn holds without the key");
  assert.ok(matchesSelector(expr("Exists"), labels));
  assert.ok(!matchesSelector(expr("DoesNotExist"), labels));
  assert.ok(matchesSelector(expr("DoesNotExist"), {}));
  assert.ok(
    !matchesSelector({ matchLabels: { role: "client" }, ...expr("In", ["db"]) }, labels),
    "both parts must hold",
  );
});

Deno.test("label selectors: malformed ones are a problem, and match nothing", () => {
  assert.equal(selectorProblem({ matchLabels: { a: "b" } }), null);
  assert.match(
    selectorProblem({ matchExpressions: [{ key: "k", operator: "Gt", values: ["1"] }] })!,
    /"Gt" on "k" is not one of In, NotIn, Exists, DoesNotExist/,
  );
  assert.match(
    selectorProblem({ matchExpressions: [{ key: "k", operator: "In" }] })!,
    /In on "k" needs values/,
  );
  assert.match(
    selectorProblem({ matchExpressions: [{ key: "k", operator: "Exists", values: ["x"] }] })!,
    /takes no values/,
  );
  assert.ok(
    !matchesSelector({ matchExpressions: [{ key: "k", operator: "Gt", values: ["1"] }] }, {
      k: "2",
    }),
  );
});
