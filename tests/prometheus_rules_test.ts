/**
 * The alerting rules of deploy/monitoring/: `promtool check rules` accepts them, their unit tests
 * (`promtool test rules`: input series, expected alerts) pass, every alert is unit-tested and
 * documented in docs/operating.md, and the PrometheusRule for the operator is what
 * deploy/prometheus_rule.ts makes of the plain rules file.
 */
import assert from "node:assert/strict";
import { parse } from "yaml";
import { run } from "@knitter/common";
import { PROMETHEUS_RULE_FILE, prometheusRule, RULES_FILE } from "../deploy/prometheus_rule.ts";

const TESTS_FILE = RULES_FILE.replace(/\.yaml$/, "_test.yaml");
const OPERATING = new URL("../docs/operating.md", import.meta.url).pathname;

interface Rule {
  alert: string;
  expr: string;
  labels: { severity: string };
  annotations: { summary: string; description: string };
}

async function alertRules(): Promise<Rule[]> {
  const { groups } = parse(await Deno.readTextFile(RULES_FILE));
  return groups.flatMap((g: { rules: Rule[] }) => g.rules);
}

Deno.test("alerting rules: promtool check rules accepts them, each has a severity, a summary and a description", async () => {
  const check = await run(["promtool", "check", "rules", RULES_FILE], { check: false });
  assert.equal(check.code, 0, `${check.stdout}${check.stderr}`);
  const rules = await alertRules();
  assert.match(check.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
  for (const r of rules) {
    assert.ok(["critical", "warning"].includes(r.labels.severity), `${r.alert}: severity`);
    assert.ok(r.annotations.summary && r.annotations.description, `${r.alert}: annotations`);
  }
});

Deno.test("alerting rules: promtool test rules passes, and every alert fires in some unit test", async () => {
  // rule_files in the tests file are found beside it.
  const t = await run(["promtool", "test", "rules", TESTS_FILE], { check: false });
  assert.equal(t.code, 0, `${t.stdout}${t.stderr}`);
  const { tests } = parse(await Deno.readTextFile(TESTS_FILE));
  const fired = new Set<string>();
  for (const test of tests) {
    for (const a of test.alert_rule_test) if (a.exp_alerts?.length) fired.add(a.alertname);
  }
  const untested = (await alertRules()).map((r) => r.alert).filter((a) => !fired.has(a));
  assert.deepEqual(untested, [], "alerts no unit test sees fire");
});

Deno.test("alerting rules: the PrometheusRule is made from the plain rules file (deploy/prometheus_rule.ts), and docs/operating.md names every alert", async () => {
  const made = prometheusRule(await Deno.readTextFile(RULES_FILE));
  assert.equal(
    await Deno.readTextFile(PROMETHEUS_RULE_FILE),
    made,
    "prometheusrule.yaml is out of date: deno run --allow-read --allow-write --allow-env deploy/prometheus_rule.ts",
  );
  const object = parse(made);
  assert.deepEqual(object.spec.groups, parse(await Deno.readTextFile(RULES_FILE)).groups);
  const doc = await Deno.readTextFile(OPERATING);
  const undocumented = (await alertRules()).map((r) => r.alert).filter((a) =>
    !doc.includes(`\`${a}\``)
  );
  assert.deepEqual(undocumented, [], "alerts docs/operating.md does not explain");
});
