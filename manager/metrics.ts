/** Prometheus text exposition of the manager's counters, latencies and pool usage. */

type Labels = Record<string, string>;

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) =>
    `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`
  );
  return parts.length ? `{${parts.join(",")}}` : "";
}

export class Counter {
  private readonly values = new Map<string, { labels: Labels; value: number }>();

  constructor(readonly name: string, readonly help: string) {}

  inc(labels: Labels = {}, by = 1): void {
    const id = labelText(labels);
    const cur = this.values.get(id);
    if (cur) cur.value += by;
    else this.values.set(id, { labels, value: by });
  }

  get(labels: Labels = {}): number {
    return this.values.get(labelText(labels))?.value ?? 0;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const { labels, value } of this.values.values()) {
      lines.push(`${this.name}${labelText(labels)} ${value}`);
    }
    return lines.join("\n");
  }
}

export class Histogram {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number }>();

  constructor(readonly name: string, readonly help: string, readonly buckets: number[]) {}

  observe(labels: Labels, value: number): void {
    const id = labelText(labels);
    let s = this.series.get(id);
    if (!s) {
      s = { labels, counts: new Array(this.buckets.length + 1).fill(0), sum: 0 };
      this.series.set(id, s);
    }
    let i = 0;
    while (i < this.buckets.length && value > this.buckets[i]) i++;
    s.counts[i]++;
    s.sum += value;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const { labels, counts, sum } of this.series.values()) {
      let cumulative = 0;
      this.buckets.forEach((b, i) => {
        cumulative += counts[i];
        lines.push(`${this.name}_bucket${labelText({ ...labels, le: String(b) })} ${cumulative}`);
      });
      cumulative += counts[this.buckets.length];
      lines.push(`${this.name}_bucket${labelText({ ...labels, le: "+Inf" })} ${cumulative}`);
      lines.push(`${this.name}_sum${labelText(labels)} ${sum}`);
      lines.push(`${this.name}_count${labelText(labels)} ${cumulative}`);
    }
    return lines.join("\n");
  }
}

export interface GaugeSample {
  labels: Labels;
  value: number;
}

/** Gauges computed at scrape time. */
export interface GaugeSource {
  name: string;
  help: string;
  collect(): Promise<GaugeSample[]>;
}

export class Metrics {
  readonly requests = new Counter("knitter_http_requests_total", "HTTP requests answered.");
  readonly latency = new Histogram(
    "knitter_http_request_duration_seconds",
    "Time to answer an HTTP request.",
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  );
  readonly allocations = new Counter(
    "knitter_allocations_total",
    "Addresses and segment IDs handed out, by kind (ip, vni, vlan).",
  );
  readonly releases = new Counter(
    "knitter_releases_total",
    "Addresses and segment IDs given back, by kind (ip, vni, vlan).",
  );
  readonly allocationFailures = new Counter(
    "knitter_allocation_failures_total",
    "Allocations refused, by reason (exhausted, taken).",
  );
  readonly conflicts = new Counter(
    "knitter_store_conflicts_total",
    "Commits that lost a race with another writer and were retried.",
  );
  private readonly gauges: GaugeSource[] = [];

  addGauge(source: GaugeSource): void {
    this.gauges.push(source);
  }

  async render(): Promise<string> {
    const parts = [
      this.requests.render(),
      this.latency.render(),
      this.allocations.render(),
      this.releases.render(),
      this.allocationFailures.render(),
      this.conflicts.render(),
    ];
    for (const g of this.gauges) {
      const lines = [`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} gauge`];
      for (const s of await g.collect()) lines.push(`${g.name}${labelText(s.labels)} ${s.value}`);
      parts.push(lines.join("\n"));
    }
    return parts.join("\n") + "\n";
  }
}
