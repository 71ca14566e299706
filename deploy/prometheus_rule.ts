/**
 * The PrometheusRule of deploy/monitoring/ (for the Prometheus operator), made from the plain rules
 * file beside it, the one source of the alerting rules:
 *
 *   deno run --allow-read --allow-write --allow-env deploy/prometheus_rule.ts
 *
 * writes deploy/monitoring/prometheusrule.yaml again; tests/prometheus_rules_test.ts checks that
 * the committed one is what this makes.
 */
import { parse, stringify } from "yaml";
import { DEPLOY_DIR } from "./manifests.ts";

export const RULES_FILE = `${DEPLOY_DIR}/monitoring/knitter.rules.yaml`;
export const PROMETHEUS_RULE_FILE = `${DEPLOY_DIR}/monitoring/prometheusrule.yaml`;

const HEADER =
  `# Made from knitter.rules.yaml by deploy/prometheus_rule.ts: change that file, then run
#   deno run --allow-read --allow-write --allow-env deploy/prometheus_rule.ts
# For the Prometheus operator (its CRDs must exist): kubectl apply -f deploy/monitoring/prometheusrule.yaml
# The operator's Prometheus picks it up when its ruleSelector matches these labels.
`;

/** The text of prometheusrule.yaml for the rules file's text. */
export function prometheusRule(rulesText: string): string {
  const { groups } = parse(rulesText);
  const object = {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: {
      name: "knitter",
      namespace: "knitter-system",
      labels: { "app.kubernetes.io/part-of": "knitter" },
    },
    spec: { groups },
  };
  return HEADER + stringify(object, { lineWidth: 0 });
}

if (import.meta.main) {
  await Deno.writeTextFile(
    PROMETHEUS_RULE_FILE,
    prometheusRule(await Deno.readTextFile(RULES_FILE)),
  );
  console.log(`wrote ${PROMETHEUS_RULE_FILE}`);
}
