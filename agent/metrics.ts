/**
 * The agent's Prometheus metrics (naming: ../common/metrics.ts), served at `/metrics` on the probe
 * listener (config `health`). What is counted as it happens: CNI calls (their time, and errors by
 * CNI code), flow syncs (their time) and the remote entries the flow compiler isolates. What is
 * read when scraped: the installed flows per table, the entries isolated now, the feed's lag, and
 * the healer's running totals (drift repairs, switch replays and reconnects).
 */
import {
  componentRegistry,
  Counter,
  Histogram,
  readGauge,
  SECONDS_BUCKETS,
  totalsCounter,
} from "@knitter/common/metrics";
import { CNI_COMMANDS } from "@knitter/plugin/contract";
import { CONFLICT_REASONS, FLOW_TABLES, type FlowConflict } from "@knitter/wasm";
import { NODE_KEYS, PREFIX } from "./bgp/node_keys.ts";

/** What the healer did since the agent started. */
export interface HealerStats {
  /** Heals run (a switch restart, a lost bridge, ...), and the last one's reason and duration. */
  heals: number;
  lastHeal?: { reason: string; at: string; ms: number };
  /** Periodic checks run, those that found drift, and the flows that differed in all of them. */
  checks: number;
  repairs: number;
  driftedFlows: number;
  /** ovs-vswitchd answering again after it went, and the OVSDB connection made again. */
  vswitchdReturns: number;
  ovsdbReconnects: number;
  lastRepair?: { at: string; missing: number; extra: number };
}

/** What became of the packets the flows hand to the router's slow path. */
const PUNT_OUTCOMES = ["answered", "fragmented", "limited", "ignored"] as const;

/** The CNI commands the agent answers (the contract's); anything else is counted as `other`. */
const KNOWN_COMMANDS: ReadonlySet<string> = new Set(CNI_COMMANDS);

/** What the agent's parts show of themselves, read at each scrape. */
export interface AgentMetricSources {
  /** The flows installed on the integration bridge (canonical lines), null before the first sync. */
  installedFlows(): ReadonlySet<string> | null;
  /** The remote entries the flow compiler leaves out now. */
  conflicts(): readonly FlowConflict[];
  healer: HealerStats;
  /** Milliseconds since the manager's change feed last answered; undefined before it started. */
  feedLastAliveMsAgo?(): number | undefined;
  /** What the router's slow path did (punt/router_slow_path.ts); absent: not running. */
  slowPath?: Readonly<Record<(typeof PUNT_OUTCOMES)[number], number>>;
  /** The BGP sessions (agent/bgp/bgp_speaker.ts), and the prefixes advertised; absent: no BGP. */
  bgp?: {
    sessions(): Promise<{ name: string; established: boolean }[]>;
    advertised: { v4: string[]; v6: string[] };
    /** The Node's BGP keys that are wrong now (agent/bgp/node_keys.ts); absent: not followed. */
    configErrors?(): readonly { key: string }[];
  };
}

/** Told by the dataplane of each flow sync and each change in the isolated entries. */
export interface DataplaneObserver {
  synced(seconds: number, ok: boolean): void;
  conflicts(now: readonly FlowConflict[]): void;
}

export class AgentMetrics implements DataplaneObserver {
  readonly registry = componentRegistry();
  readonly cniDuration: Histogram<"command">;
  readonly cniErrors: Counter<"command" | "code">;
  readonly flowSyncDuration: Histogram<"result">;
  readonly conflictsFound: Counter<"reason">;
  private sources: AgentMetricSources | null = null;
  /** The isolated entries of the last change, by identity (new ones are counted once). */
  private isolated = new Set<string>();

  constructor() {
    const registers = [this.registry];
    this.cniDuration = new Histogram({
      name: "knitter_agent_cni_duration_seconds",
      help: "Time the agent took to answer a CNI call, by command (failed calls included).",
      labelNames: ["command"] as const,
      buckets: SECONDS_BUCKETS.cni,
      registers,
    });
    this.cniErrors = new Counter({
      name: "knitter_agent_cni_errors_total",
      help: "CNI calls answered with an error, by command and CNI error code.",
      labelNames: ["command", "code"] as const,
      registers,
    });
    this.flowSyncDuration = new Histogram({
      name: "knitter_agent_flow_sync_duration_seconds",
      help: "Time of a flow sync (the model read, the flows computed, the difference applied), " +
        "by result (ok, error).",
      labelNames: ["result"] as const,
      buckets: SECONDS_BUCKETS.flowSync,
      registers,
    });
    this.conflictsFound = new Counter({
      name: "knitter_agent_flow_conflicts_total",
      help: "Remote entries the flow compiler started to isolate (left out of the flows), by " +
        "reason; each counted once while it stays isolated.",
      labelNames: ["reason"] as const,
      registers,
    });
    this.readAtScrape();
    this.readSlowPath();
    this.startAtZero();
  }

  /**
   * The series whose labels are known in advance, exported at 0 from the start: a series born at
   * its first observation has no earlier sample, so rate() and increase() never see that one.
   */
  private startAtZero(): void {
    for (const command of CNI_COMMANDS) this.cniDuration.zero({ command });
    for (const result of ["ok", "error"]) this.flowSyncDuration.zero({ result });
    for (const reason of CONFLICT_REASONS) this.conflictsFound.inc({ reason }, 0);
  }

  /** Where the scrape-time figures come from (the daemon, once its parts exist). */
  connect(sources: AgentMetricSources): void {
    this.sources = sources;
  }

  /**
   * One CNI call answered: its time (null for a request refused before it ran, which is counted
   * as an error only), and its CNI error code when it failed.
   */
  cniCall(command: string, seconds: number | null, errorCode?: number): void {
    const c = KNOWN_COMMANDS.has(command) ? command : "other";
    if (seconds !== null) this.cniDuration.observe({ command: c }, seconds);
    if (errorCode !== undefined) this.cniErrors.inc({ command: c, code: String(errorCode) });
  }

  synced(seconds: number, ok: boolean): void {
    this.flowSyncDuration.observe({ result: ok ? "ok" : "error" }, seconds);
  }

  conflicts(now: readonly FlowConflict[]): void {
    const next = new Set<string>();
    for (const c of now) {
      const id = JSON.stringify([c.network, c.mac, c.ips, c.nodeIp, c.reason]);
      next.add(id);
      if (!this.isolated.has(id)) this.conflictsFound.inc({ reason: c.reason });
    }
    this.isolated = next;
  }

  private readAtScrape(): void {
    const r = this.registry;
    const stats = () => this.sources?.healer;
    const tableName = new Map<number, string>(FLOW_TABLES.map((t) => [t.id, t.name]));
    readGauge(r, {
      name: "knitter_agent_installed_flows",
      help: "Flows the agent installed on the integration bridge, by table (number and name).",
      labelNames: ["table", "name"] as const,
      read: () =>
        [...this.flowsPerTable()].map(([table, n]) => ({
          labels: { table: String(table), name: tableName.get(table) ?? "" },
          value: n,
        })),
    });
    readGauge(r, {
      name: "knitter_agent_isolated_entries",
      help: "Remote entries left out of the flows now (conflicting or malformed), by reason.",
      labelNames: ["reason"] as const,
      read: () => {
        const by = new Map<string, number>(CONFLICT_REASONS.map((r) => [r, 0]));
        for (const c of this.sources?.conflicts() ?? []) {
          by.set(c.reason, (by.get(c.reason) ?? 0) + 1);
        }
        return [...by].map(([reason, value]) => ({ labels: { reason }, value }));
      },
    });
    readGauge(r, {
      name: "knitter_agent_feed_lag_seconds",
      help: "Seconds since the manager's change feed last answered (events, an empty long poll, " +
        "or a fresh list): what the agent knows of other nodes' ports is at most this old.",
      read: () => {
        // NaN, not 0, while unknown: 0 would claim a feed that just answered.
        const ms = this.sources?.feedLastAliveMsAgo?.();
        return [{ labels: {}, value: ms === undefined ? NaN : ms / 1000 }];
      },
    });
    readGauge(r, {
      name: "knitter_agent_bgp_established_sessions",
      help: "BGP sessions established, by peer (1 or 0; BIRD's protocol name, after the peer's " +
        "address: peer_192_0_2_1), as BIRD's `show protocols` says.",
      labelNames: ["peer"] as const,
      read: async () =>
        (await this.sources?.bgp?.sessions() ?? []).map((s) => ({
          labels: { peer: s.name },
          value: s.established ? 1 : 0,
        })),
    });
    readGauge(r, {
      name: "knitter_agent_bgp_invalid_keys",
      help: "1 while the Node's BGP key is wrong (its value is not applied: the last good " +
        "settings stay; the agent's log and a Warning Event on the Node say why), by key.",
      labelNames: ["key"] as const,
      read: () => {
        const by = new Map(Object.keys(NODE_KEYS).map((k) => [PREFIX + k, 0]));
        for (const e of this.sources?.bgp?.configErrors?.() ?? []) by.set(e.key, 1);
        return [...by].map(([key, value]) => ({ labels: { key }, value }));
      },
    });
    readGauge(r, {
      name: "knitter_agent_bgp_advertised_prefixes",
      help: "Prefixes the node's BGP speaker advertises (networks and its pods' host routes), " +
        "by IP family.",
      labelNames: ["family"] as const,
      read: () => {
        const a = this.sources?.bgp?.advertised;
        return a
          ? [{ labels: { family: "4" }, value: a.v4.length }, {
            labels: { family: "6" },
            value: a.v6.length,
          }]
          : [];
      },
    });
    totalsCounter(r, {
      name: "knitter_agent_flow_checks_total",
      help: "Periodic flow checks run (installed flows against the computed set).",
      read: () => total(stats()?.checks),
    });
    totalsCounter(r, {
      name: "knitter_agent_drift_repairs_total",
      help:
        "Flow checks that found drift (flows changed, added or deleted by hand) and repaired it.",
      read: () => total(stats()?.repairs),
    });
    totalsCounter(r, {
      name: "knitter_agent_drifted_flows_total",
      help: "Flows found missing or extra by the flow checks that repaired drift.",
      read: () => total(stats()?.driftedFlows),
    });
    totalsCounter(r, {
      name: "knitter_agent_ovs_replays_total",
      help: "Heals: bridges and ports made again where missing and the whole flow set replayed " +
        "(ovs-vswitchd or ovsdb-server restarted, a bridge or port deleted, flow-restore-wait set).",
      read: () => total(stats()?.heals),
    });
    totalsCounter(r, {
      name: "knitter_agent_ovs_reconnects_total",
      help: "Connections to Open vSwitch made again, by what (ovsdb: ovsdb-server, openflow: " +
        "ovs-vswitchd's management socket).",
      labelNames: ["what"] as const,
      read: () => {
        const s = stats();
        if (!s) return [];
        return [
          { labels: { what: "ovsdb" }, value: s.ovsdbReconnects ?? 0 },
          { labels: { what: "openflow" }, value: s.vswitchdReturns ?? 0 },
        ];
      },
    });
  }

  private readSlowPath(): void {
    totalsCounter(this.registry, {
      name: "knitter_agent_router_punts_total",
      help: "Packets the flows handed to the router's slow path, by outcome: answered (an ICMP " +
        "error or a router advertisement), fragmented (sent on in fragments), limited (over a " +
        "budget: dropped), ignored (nothing owed, e.g. an error about an error).",
      labelNames: ["outcome"] as const,
      read: () => {
        const counts = this.sources?.slowPath;
        return counts
          ? PUNT_OUTCOMES.map((outcome) => ({ labels: { outcome }, value: counts[outcome] }))
          : [];
      },
    });
  }

  /** Installed flows per table (about 10 ms for 100k flows, once per scrape). */
  private flowsPerTable(): Map<number, number> {
    const flows = this.sources?.installedFlows();
    if (!flows) return new Map();
    const counts = new Map<number, number>(FLOW_TABLES.map((t) => [t.id, 0]));
    for (const line of flows) {
      const at = line.indexOf("table=");
      if (at < 0) continue;
      const table = parseInt(line.slice(at + 6, at + 12), 10);
      counts.set(table, (counts.get(table) ?? 0) + 1);
    }
    return counts;
  }

  /** The registry's text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}

function total(n: number | undefined): { labels: Record<string, never>; value: number }[] {
  return n === undefined ? [] : [{ labels: {}, value: n }];
}
