/**
 * A reader of the Prometheus text exposition format (what `/metrics` answers), for tests and
 * tools that check what a component exports: each metric family with its type and help, and each
 * sample with its labels and value.
 */

export interface MetricSample {
  /** The sample's own name: a histogram's `_bucket`, `_sum`, `_count` included. */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface MetricFamily {
  name: string;
  type: string;
  help: string;
  samples: MetricSample[];
}

const SUFFIXES = ["_bucket", "_sum", "_count"];

/** The families of an exposition text, by name; throws on a line that is not the format. */
export function parseExposition(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const family = (name: string) => {
    let f = families.get(name);
    if (!f) families.set(name, f = { name, type: "untyped", help: "", samples: [] });
    return f;
  };
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "") continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) ?(.*)$/.exec(line);
    if (meta) {
      if (meta[1] === "TYPE") family(meta[2]).type = meta[3];
      else family(meta[2]).help = meta[3];
      continue;
    }
    if (line.startsWith("#")) continue;
    const sample = parseSample(line);
    if (!sample) throw new SyntaxError(`Cannot parse line ${i + 1} of the exposition: ${line}`);
    const base = SUFFIXES.find((s) =>
      sample.name.endsWith(s) && families.has(sample.name.slice(0, -s.length))
    );
    family(base ? sample.name.slice(0, -base.length) : sample.name).samples.push(sample);
  }
  return families;
}

function parseSample(line: string): MetricSample | undefined {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$/.exec(line);
  if (!m) return undefined;
  const labels: Record<string, string> = {};
  const body = m[3] ?? "";
  const re = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;
  let at = 0;
  while (at < body.length) {
    re.lastIndex = at;
    const l = re.exec(body);
    if (!l) return undefined;
    labels[l[1]] = l[2].replace(/\\(["\\n])/g, (_, c) => (c === "n" ? "\n" : c));
    at = re.lastIndex;
  }
  // As Prometheus reads them (Go's ParseFloat): NaN and Inf in any case (prom-client writes Nan).
  const special = /^([+-]?)(inf|nan)$/i.exec(m[4]);
  const value = special
    ? (special[2].toLowerCase() === "nan" ? NaN : special[1] === "-" ? -Infinity : Infinity)
    : Number(m[4]);
  if (Number.isNaN(value) && !special) return undefined;
  return { name: m[1], labels, value };
}

/** The samples named `name` whose labels include `labels`. */
export function samplesOf(
  families: Map<string, MetricFamily>,
  name: string,
  labels: Record<string, string> = {},
): MetricSample[] {
  const base = SUFFIXES.reduce(
    (n, s) => (n.endsWith(s) && families.has(n.slice(0, -s.length)) ? n.slice(0, -s.length) : n),
    name,
  );
  return (families.get(base)?.samples ?? []).filter((s) =>
    s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)
  );
}
