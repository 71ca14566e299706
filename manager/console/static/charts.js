// The metrics section: pool usage and CNI ADD latency over time, as the manager reads them from
// Prometheus for this token (GET /console/metrics): a tenant's own networks' pools only. Without a
// Prometheus configured, it says so.
import { h, s } from "./dom.js";
import { empty, section } from "./views.js";

const W = 640;
const H = 200;
const PAD = { left: 56, right: 12, top: 12, bottom: 28 };

const clock = (t) => new Date(t * 1000).toISOString().slice(11, 16);
const num = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3).replace(/\.?0+$/, ""));

/** One chart: a line per series over the common time range, its values on the left. */
function lineChart(id, title, answer) {
  const series = answer.series.filter((x) => x.points.length > 0);
  if (series.length === 0) {
    return h("div", { class: "chart", id }, h("h3", null, title), empty("No samples yet."));
  }
  const all = series.flatMap((x) => x.points);
  // The range asked for, whatever part of it has samples.
  const [t0, t1] = [answer.start, answer.end];
  const top = Math.max(...all.map((p) => p[1]), 1e-9);
  const x = (t) => PAD.left + ((t - t0) / Math.max(t1 - t0, 1)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
  return h(
    "div",
    { class: "chart", id },
    h("h3", null, `${title} (${answer.unit})`),
    s(
      "svg",
      {
        class: "chart-plot",
        viewBox: `0 0 ${W} ${H}`,
        width: W,
        height: H,
        role: "img",
        "aria-label": `${title} over time`,
      },
      s("line", {
        class: "axis",
        x1: PAD.left,
        y1: H - PAD.bottom,
        x2: W - PAD.right,
        y2: H - PAD.bottom,
      }),
      s("line", { class: "axis", x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom }),
      s("text", { class: "tick", x: PAD.left - 6, y: PAD.top + 4, "text-anchor": "end" }, num(top)),
      s("text", { class: "tick", x: PAD.left - 6, y: H - PAD.bottom, "text-anchor": "end" }, "0"),
      s("text", { class: "tick", x: PAD.left, y: H - 8 }, clock(t0)),
      s(
        "text",
        { class: "tick", x: W - PAD.right, y: H - 8, "text-anchor": "end" },
        `${clock(t1)} UTC`,
      ),
      series.map((x_, i) => {
        const [tl, vl] = x_.points.at(-1);
        return [
          s("polyline", {
            class: `series series-${i % 6}`,
            "data-series": x_.name,
            points: x_.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" "),
          }),
          // The last sample marked: a line of one sample is a dot.
          s("circle", { class: `last series-${i % 6}`, cx: x(tl), cy: y(vl), r: 3 }),
        ];
      }),
    ),
    h(
      "ul",
      { class: "plain legend" },
      series.map((x_, i) =>
        h(
          "li",
          { class: `legend-item series-${i % 6}`, "data-series": x_.name },
          `${x_.name}: ${num(x_.points.at(-1)[1])} now`,
        )
      ),
    ),
  );
}

/** How far back the charts may reach, in minutes, and how the choice reads. */
const RANGES = [[5, "last 5 minutes"], [60, "last hour"], [1440, "last day"]];

function rangeChoice(minutes, onRange) {
  return h(
    "label",
    { class: "trace-field" },
    "Range ",
    h(
      "select",
      { id: "metrics-range", onchange: (e) => onRange(Number(e.target.value)) },
      RANGES.map(([m, text]) => h("option", { value: m, selected: m === minutes }, text)),
    ),
  );
}

/** `charts`: { minutes, pools, cni } answers of /console/metrics, or { error }. */
export function chartsView(charts, onRange) {
  if (charts.error) {
    return section("metrics", "Metrics", h("p", { class: "error" }, charts.error));
  }
  if (!charts.pools.configured) {
    return section(
      "metrics",
      "Metrics",
      h(
        "p",
        { class: "empty", id: "metrics-off" },
        "Metrics are not configured. ",
        charts.pools.hint,
      ),
    );
  }
  return section(
    "metrics",
    "Metrics",
    rangeChoice(charts.minutes, onRange),
    lineChart("chart-pools", "Pool usage", charts.pools),
    lineChart("chart-cni", "CNI ADD latency", charts.cni),
  );
}
