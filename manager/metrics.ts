/**
 * The manager's Prometheus metrics, on prom-client (naming: ../common/metrics.ts): requests and
 * their latency per route, allocations, releases and refusals, store conflicts, and per network
 * the capacity, the usage and the quarantine of its pools, read at scrape time.
 */
import {
  componentRegistry,
  Counter,
  Gauge,
  Histogram,
  SECONDS_BUCKETS,
} from "@knitter/common/metrics";

/** What the manager hands out, and why it refuses to: label values known in advance. */
export const ALLOCATION_KINDS = ["ip", "vni", "vlan"] as const;
export const REFUSAL_REASONS = ["exhausted", "taken"] as const;

/** One network's pools, as scraped. */
export interface PoolUsage {
  tenant: string;
  network: string;
  /** Addresses the pools hand out (reserved ones not counted). */
  capacity: number;
  /** Addresses handed out now. */
  used: number;
  /** Addresses released a short while ago, held back from new ports (quarantineSeconds). */
  quarantined: number;
}

export class Metrics {
  readonly registry = componentRegistry();
  readonly requests = new Counter({
    name: "knitter_manager_http_requests_total",
    help: "HTTP requests answered, by method, route and status.",
    labelNames: ["method", "route", "status"] as const,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: "knitter_manager_http_request_duration_seconds",
    help: "Time to answer an HTTP request, by method and route.",
    labelNames: ["method", "route"] as const,
    buckets: SECONDS_BUCKETS.request,
    registers: [this.registry],
  });
  readonly allocations = new Counter({
    name: "knitter_manager_allocations_total",
    help: "Addresses and segment IDs handed out, by kind (ip, vni, vlan).",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly releases = new Counter({
    name: "knitter_manager_releases_total",
    help: "Addresses and segment IDs given back, by kind (ip, vni, vlan).",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly allocationFailures = new Counter({
    name: "knitter_manager_allocation_failures_total",
    help: "Allocations refused, by reason (exhausted, taken).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly conflicts = new Counter({
    name: "knitter_manager_store_conflicts_total",
    help: "Commits that lost a race with another writer and were retried.",
    registers: [this.registry],
  });
  private readonly poolCapacity = new Gauge({
    name: "knitter_manager_pool_capacity_addresses",
    help: "Addresses a network's pools hand out in all (reserved ones not counted).",
    labelNames: ["tenant", "network"] as const,
    registers: [this.registry],
  });
  private readonly poolUsed = new Gauge({
    name: "knitter_manager_pool_used_addresses",
    help: "Addresses of a network's pools handed out now.",
    labelNames: ["tenant", "network"] as const,
    registers: [this.registry],
  });
  private readonly poolQuarantined = new Gauge({
    name: "knitter_manager_pool_quarantined_addresses",
    help: "Addresses of a network's pools released a short while ago and held back from new " +
      "ports (neither used nor free).",
    labelNames: ["tenant", "network"] as const,
    registers: [this.registry],
  });
  readonly throttled = new Counter({
    name: "knitter_manager_throttled_requests_total",
    help: "Requests refused for their caller's budget or their body's bounds before any work, by " +
      "principal kind (tenant, node, monitor, admin, metrics) and reason (rate, concurrency, " +
      "lists, busy, body_size, body_depth).",
    labelNames: ["principal", "reason"] as const,
    registers: [this.registry],
  });
  readonly refusedConnections = new Counter({
    name: "knitter_manager_refused_connections_total",
    help: "Connections closed as soon as accepted, their client address over its budget of new " +
      "connections (limits.connectionsPerSecond).",
    registers: [this.registry],
  });
  private readonly inFlight = new Gauge({
    name: "knitter_manager_in_flight_requests",
    help: "API requests in progress, by principal kind.",
    labelNames: ["principal"] as const,
    registers: [this.registry],
  });
  private pools: (() => Promise<PoolUsage[]>) | null = null;
  private requestsInFlight: (() => Map<string, number>) | null = null;

  /** Where the requests in progress are read at each scrape (fairness.ts). */
  readInFlightFrom(source: () => Map<string, number>): void {
    this.requestsInFlight = source;
  }

  /**
   * The counters' known series at 0 from the start: a series born at its first increment has no
   * earlier sample, so rate() and increase() never see that increment.
   */
  constructor() {
    for (const kind of ALLOCATION_KINDS) {
      this.allocations.inc({ kind }, 0);
      this.releases.inc({ kind }, 0);
    }
    for (const reason of REFUSAL_REASONS) this.allocationFailures.inc({ reason }, 0);
  }

  /** Where the pools' usage is read at each scrape (usage_gauge.ts). */
  readPoolsFrom(source: () => Promise<PoolUsage[]>): void {
    this.pools = source;
  }

  /** The text exposition of every metric, the pools read now. */
  async render(): Promise<string> {
    // Read first, then set both gauges at once: a scrape never sees one network half updated.
    const pools = this.pools ? await this.pools() : [];
    this.poolCapacity.reset();
    this.poolUsed.reset();
    this.poolQuarantined.reset();
    for (const p of pools) {
      const labels = { tenant: p.tenant, network: p.network };
      this.poolCapacity.set(labels, p.capacity);
      this.poolUsed.set(labels, p.used);
      this.poolQuarantined.set(labels, p.quarantined);
    }
    if (this.requestsInFlight) {
      for (const [principal, n] of this.requestsInFlight()) this.inFlight.set({ principal }, n);
    }
    return await this.registry.metrics();
  }
}
