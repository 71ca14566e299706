// The trace section: a packet from one port to another, started from the page and shown step by
// step, node by node, as the manager computes it from its model (POST .../trace, the same trace as
// `knitctl trace --offline`). A tenant picks among its own ports only.
import { h } from "./dom.js";
import { empty, section } from "./views.js";

const keyOf = (p) => `${p.tenant}/${p.network}/${p.id}`;
/** A pod's port by its pod and interface (its ID is long), any other by tenant/network/ID. */
const labelOf = (p) =>
  `${
    p.pod
      ? `pod ${p.pod.namespace}/${p.pod.name} ${p.interface ?? p.id} on ${p.tenant}/${p.network}`
      : keyOf(p)
  } (${p.ip}${p.node ? `, node ${p.node}` : ""})`;

function options(ports, chosen) {
  return ports.map((p) =>
    h("option", { value: keyOf(p), selected: keyOf(p) === chosen }, labelOf(p))
  );
}

function field(label, control) {
  return h("label", { class: "trace-field" }, label, " ", control);
}

/** The form: from (a bound port), to (a port of the same tenant), protocol, destination port. */
function form(ports, ask, on) {
  const bound = [...ports].filter((p) => p.node && p.ip).sort((a, b) =>
    keyOf(a).localeCompare(keyOf(b))
  );
  const from = bound.find((p) => keyOf(p) === ask.from) ?? bound[0];
  const targets = ports.filter((p) => p.ip && p.tenant === from.tenant)
    .sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  const to = targets.find((p) => keyOf(p) === ask.to) ?? targets[0];
  on.set({ from: keyOf(from), to: keyOf(to) });
  const l4 = ask.proto === "tcp" || ask.proto === "udp";
  return h(
    "form",
    {
      id: "trace-form",
      class: "trace-form",
      onsubmit: (e) => {
        e.preventDefault();
        on.run();
      },
    },
    field(
      "From",
      h("select", {
        id: "trace-from",
        onchange: (e) => on.set({ from: e.target.value, to: undefined }, true),
      }, options(bound, keyOf(from))),
    ),
    field(
      "To",
      h("select", { id: "trace-to", onchange: (e) => on.set({ to: e.target.value }) }, [
        options(targets, keyOf(to)),
      ]),
    ),
    field(
      "Protocol",
      h(
        "select",
        { id: "trace-proto", onchange: (e) => on.set({ proto: e.target.value }, true) },
        ["icmp", "tcp", "udp"].map((p) => h("option", { value: p, selected: p === ask.proto }, p)),
      ),
    ),
    l4 && field(
      "Port",
      h("input", {
        id: "trace-dport",
        type: "number",
        min: 0,
        max: 65535,
        value: ask.dport ?? "",
        oninput: (e) => on.set({ dport: e.target.value }),
      }),
    ),
    h("button", { type: "submit", disabled: ask.busy }, ask.busy ? "Tracing…" : "Trace"),
  );
}

function step(s) {
  return h(
    "li",
    { class: "trace-step", "data-table": s.table },
    h("span", { class: "table" }, `table ${s.table} ${s.tableName}`),
    " ",
    h("span", { class: "prio" }, `priority ${s.priority}`),
    " ",
    h("span", { class: "kind" }, s.kind),
    ": ",
    h("span", { class: "what" }, s.what),
  );
}

function outcome(o) {
  const words = {
    local: () => `to ${o.port ?? "a local port"} (ofport ${o.ofport})`,
    tunnel: () => `through the tunnel to node ${o.node ?? o.nodeIp} (VNI ${o.vni})`,
    physnet: () => `out to physnet ${o.physnet}${o.vlan !== undefined ? `, VLAN ${o.vlan}` : ""}`,
    reply: () => `answered, back out of ofport ${o.ofport}`,
    drop: () => `dropped: ${o.reason}`,
  }[o.kind];
  return h("li", { class: `trace-outcome ${o.kind}` }, `⇒ ${words ? words() : o.kind}`);
}

function result(report) {
  return h(
    "div",
    { id: "trace-result", class: "trace-result" },
    h(
      "p",
      { class: `trace-verdict ${report.delivered ? "delivered" : "not-delivered"}` },
      report.result,
    ),
    report.hops.map((hop, i) =>
      h(
        "div",
        { class: "trace-hop", "data-node": hop.node },
        h("h3", null, `${i + 1}. node ${hop.node}: in from ${hop.ingress}`),
        h("ol", { class: "trace-steps" }, hop.steps.map(step)),
        h("ul", { class: "plain trace-outcomes" }, hop.outcomes.map(outcome)),
      )
    ),
  );
}

/** The section; `ask` is the page's state of the form, `on` sets it and runs the trace. */
export function traceView(ports, ask, on) {
  const bound = ports.filter((p) => p.node && p.ip);
  return section(
    "trace",
    "Trace",
    bound.length === 0 ? empty("No port bound to a node to trace from.") : [
      form(ports, ask, on),
      ask.error && h("p", { class: "error", role: "alert" }, ask.error),
      ask.report && result(ask.report),
    ],
  );
}
