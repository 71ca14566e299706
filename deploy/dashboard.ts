/**
 * The Grafana dashboard of deploy/monitoring/ as data: its panels' queries, and the Knitter
 * metrics they name (deploy/monitoring_test.ts and tests/metrics_test.ts check each is exported).
 */
import { DEPLOY_DIR } from "./manifests.ts";

export const DASHBOARD_FILE = `${DEPLOY_DIR}/monitoring/grafana-dashboard.json`;

/** Every `knitter_…` name the dashboard's queries and variables use, with where it is used. */
export async function dashboardMetrics(file = DASHBOARD_FILE): Promise<Map<string, string>> {
  const dash = JSON.parse(await Deno.readTextFile(file));
  const exprs: [string, string][] = [];
  for (const p of dash.panels ?? []) {
    for (const t of p.targets ?? []) exprs.push([p.title, t.expr]);
  }
  for (const v of dash.templating?.list ?? []) {
    if (v.definition) exprs.push([`variable ${v.name}`, v.definition]);
  }
  const used = new Map<string, string>();
  for (const [where, expr] of exprs) {
    for (const m of String(expr).matchAll(/\bknitter_[a-z0-9_]+/g)) used.set(m[0], where);
  }
  return used;
}
