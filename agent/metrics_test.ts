import assert from "node:assert/strict";
import { conventionProblems } from "@knitter/common/metrics";
import { parseExposition, samplesOf } from "@knitter/common/metrics_text";
import { CONFLICT_REASONS, type FlowConflict } from "@knitter/wasm";
import { CNI_COMMANDS } from "@knitter/plugin/contract";
import type { HealerStats } from "./dataplane/healer.ts";
import { AgentMetrics } from "./metrics.ts";

const EXPECTED: Record<string, string> = {
  knitter_agent_cni_duration_seconds: "histogram",
  knitter_agent_cni_errors_total: "counter",
  knitter_agent_flow_sync_duration_seconds: "histogram",
  knitter_agent_flow_conflicts_total: "counter",
  knitter_agent_installed_flows: "gauge",
  knitter_agent_isolated_entries: "gauge",
  knitter_agent_feed_lag_seconds: "gauge",
  knitter_agent_bgp_established_sessions: "gauge",
  knitter_agent_bgp_advertised_prefixes: "gauge",
  knitter_agent_bgp_invalid_keys: "gauge",
  knitter_agent_flow_checks_total: "counter",
  knitter_agent_drift_repairs_total: "counter",
  knitter_agent_drifted_flows_total: "counter",
  knitter_agent_ovs_replays_total: "counter",
  knitter_agent_ovs_reconnects_total: "counter",
  knitter_agent_router_punts_total: "counter",
};

function conflict(mac: string, reason: FlowConflict["reason"]): FlowConflict {
  return {
    remote: 0,
    network: 1,
    mac,
    ips: ["10.0.0.9"],
    nodeIp: "192.0.2.2",
    reason,
    detail: "",
    collisions: [],
  };
}

Deno.test("agent metrics: every name and type, within the naming convention", async () => {
  const m = new AgentMetrics();
  const f = parseExposition(await m.render());
  assert.deepEqual(
    Object.fromEntries([...f.values()].map((x) => [x.name, x.type])),
    EXPECTED,
  );
  assert.deepEqual(await conventionProblems(m.registry), []);
});

Deno.test("agent metrics: CNI calls by command and code, flow syncs, conflicts counted once, and what the parts show when scraped", async () => {
  const m = new AgentMetrics();
  const healer: HealerStats = {
    heals: 2,
    checks: 5,
    repairs: 1,
    driftedFlows: 3,
    vswitchdReturns: 1,
    ovsdbReconnects: 4,
  };
  let conflicts: FlowConflict[] = [];
  let flows: Set<string> | null = null;
  m.connect({
    installedFlows: () => flows,
    conflicts: () => conflicts,
    healer,
    feedLastAliveMsAgo: () => 1500,
    slowPath: { answered: 7, fragmented: 2, limited: 990, ignored: 1 },
  });
  m.cniCall("ADD", 0.2);
  m.cniCall("ADD", 3, 11);
  m.cniCall("DEL", 0.05);
  m.cniCall("bogus", null, 4);
  m.synced(0.02, true);
  m.synced(0.3, false);
  conflicts = [conflict("02:00:00:00:00:01", "local"), conflict("02:00:00:00:00:02", "remote")];
  m.conflicts(conflicts);
  m.conflicts(conflicts); // the same set again: nothing new
  conflicts = [conflicts[1], conflict("02:00:00:00:00:03", "remote")];
  m.conflicts(conflicts);
  flows = new Set([
    "cookie=0x0000000000000000,table=0,priority=0,actions=drop",
    "cookie=0x0000000000000001,table=0,priority=100,in_port=5,actions=goto_table:10",
    "cookie=0x0000000000000000,table=30,priority=0,actions=drop",
  ]);
  healer.repairs = 2;

  const f = parseExposition(await m.render());
  const one = (name: string, labels: Record<string, string> = {}) => {
    const s = samplesOf(f, name, labels);
    assert.equal(s.length, 1, `${name} ${JSON.stringify(labels)}`);
    return s[0].value;
  };
  assert.equal(one("knitter_agent_cni_duration_seconds_count", { command: "ADD" }), 2);
  assert.equal(one("knitter_agent_cni_duration_seconds_sum", { command: "ADD" }), 3.2);
  assert.equal(one("knitter_agent_cni_duration_seconds_bucket", { command: "ADD", le: "0.25" }), 1);
  assert.equal(one("knitter_agent_cni_duration_seconds_count", { command: "DEL" }), 1);
  assert.equal(
    samplesOf(f, "knitter_agent_cni_duration_seconds_count", { command: "other" }).length,
    0,
  );
  assert.equal(one("knitter_agent_cni_duration_seconds_count", { command: "CHECK" }), 0);
  assert.equal(one("knitter_agent_cni_errors_total", { command: "ADD", code: "11" }), 1);
  assert.equal(one("knitter_agent_cni_errors_total", { command: "other", code: "4" }), 1);
  assert.equal(one("knitter_agent_flow_sync_duration_seconds_count", { result: "ok" }), 1);
  assert.equal(one("knitter_agent_flow_sync_duration_seconds_count", { result: "error" }), 1);
  assert.equal(one("knitter_agent_flow_conflicts_total", { reason: "local" }), 1);
  assert.equal(one("knitter_agent_flow_conflicts_total", { reason: "remote" }), 2);
  assert.equal(one("knitter_agent_isolated_entries", { reason: "remote" }), 2);
  assert.equal(one("knitter_agent_isolated_entries", { reason: "local" }), 0);
  assert.equal(one("knitter_agent_installed_flows", { table: "0", name: "CLASSIFY" }), 2);
  assert.equal(one("knitter_agent_installed_flows", { table: "10", name: "SPOOF" }), 0);
  assert.equal(one("knitter_agent_installed_flows", { table: "30", name: "FORWARD" }), 1);
  assert.equal(one("knitter_agent_feed_lag_seconds"), 1.5);
  assert.equal(one("knitter_agent_flow_checks_total"), 5);
  assert.equal(one("knitter_agent_drift_repairs_total"), 2, "read when scraped");
  assert.equal(one("knitter_agent_drifted_flows_total"), 3);
  assert.equal(one("knitter_agent_ovs_replays_total"), 2);
  assert.equal(one("knitter_agent_ovs_reconnects_total", { what: "ovsdb" }), 4);
  assert.equal(one("knitter_agent_ovs_reconnects_total", { what: "openflow" }), 1);
  assert.equal(one("knitter_agent_router_punts_total", { outcome: "answered" }), 7);
  assert.equal(one("knitter_agent_router_punts_total", { outcome: "limited" }), 990);
});

Deno.test("agent metrics: before the parts are connected, the feed lag is unknown (NaN), totals 0, no tables", async () => {
  const f = parseExposition(await new AgentMetrics().render());
  assert.ok(Number.isNaN(samplesOf(f, "knitter_agent_feed_lag_seconds")[0].value));
  assert.equal(samplesOf(f, "knitter_agent_installed_flows").length, 0);
  assert.equal(samplesOf(f, "knitter_agent_drift_repairs_total")[0].value, 0);
});

Deno.test("agent metrics: before any call, every CNI command's time, both flow sync results and every conflict reason are exported at 0: a series born at its first observation hides that observation from rate() and increase()", async () => {
  const f = parseExposition(await new AgentMetrics().render());
  const zero = (name: string, labels: Record<string, string>) => {
    const s = samplesOf(f, name, labels);
    assert.equal(s.length, 1, `${name} ${JSON.stringify(labels)} exported`);
    assert.equal(s[0].value, 0, `${name} ${JSON.stringify(labels)}`);
  };
  for (const command of CNI_COMMANDS) {
    zero("knitter_agent_cni_duration_seconds_count", { command });
    zero("knitter_agent_cni_duration_seconds_bucket", { command, le: "+Inf" });
  }
  for (const result of ["ok", "error"]) {
    zero("knitter_agent_flow_sync_duration_seconds_count", { result });
  }
  for (const reason of CONFLICT_REASONS) {
    zero("knitter_agent_flow_conflicts_total", { reason });
    zero("knitter_agent_isolated_entries", { reason });
  }
});

Deno.test("agent metrics: each BGP session's state by peer, the prefixes advertised by family and the Node's invalid BGP keys, read when scraped", async () => {
  const m = new AgentMetrics();
  const healer: HealerStats = {
    heals: 0,
    checks: 0,
    repairs: 0,
    driftedFlows: 0,
    vswitchdReturns: 0,
    ovsdbReconnects: 0,
  };
  let up = true;
  let invalid = [{ key: "bgp.knitter.io/asn" }];
  m.connect({
    installedFlows: () => null,
    conflicts: () => [],
    healer,
    bgp: {
      sessions: () =>
        Promise.resolve([{ name: "peer_192_0_2_1", established: up }, {
          name: "peer_192_0_2_2",
          established: false,
        }]),
      advertised: { v4: ["10.1.0.0/24", "10.1.0.5/32"], v6: ["fd00:1::/64"] },
      configErrors: () => invalid,
    },
  });
  let f = parseExposition(await m.render());
  const one = (name: string, labels: Record<string, string>) => samplesOf(f, name, labels)[0].value;
  assert.equal(one("knitter_agent_bgp_established_sessions", { peer: "peer_192_0_2_1" }), 1);
  assert.equal(one("knitter_agent_bgp_established_sessions", { peer: "peer_192_0_2_2" }), 0);
  assert.equal(one("knitter_agent_bgp_advertised_prefixes", { family: "4" }), 2);
  assert.equal(one("knitter_agent_bgp_advertised_prefixes", { family: "6" }), 1);
  // A Node's bad BGP key: 1 while it is wrong; every known key exported from the start.
  assert.equal(one("knitter_agent_bgp_invalid_keys", { key: "bgp.knitter.io/asn" }), 1);
  assert.equal(one("knitter_agent_bgp_invalid_keys", { key: "bgp.knitter.io/peers" }), 0);
  up = false;
  invalid = [];
  f = parseExposition(await m.render());
  assert.equal(one("knitter_agent_bgp_established_sessions", { peer: "peer_192_0_2_1" }), 0);
  assert.equal(one("knitter_agent_bgp_invalid_keys", { key: "bgp.knitter.io/asn" }), 0);
});
