// The console's tables: tenants, networks with the usage of their pools, ports by node.
import { h } from "./dom.js";

export function table(headings, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("thead", null, h("tr", null, headings.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", null, rows),
  );
}

export function empty(text) {
  return h("p", { class: "empty" }, text);
}

/** A view of the page: a section with its heading, the target of the nav's link `#id`. */
export function section(id, title, ...content) {
  return h(
    "section",
    { id, "aria-labelledby": `${id}-h` },
    h("h2", { id: `${id}-h` }, title),
    content,
  );
}

/** Sorted by tenant, then name. */
export function byTenantAndName(list) {
  return [...list].sort((a, b) => a.tenant.localeCompare(b.tenant) || a.name.localeCompare(b.name));
}

export function tenantsView(tenants) {
  return h(
    "section",
    { id: "tenants", "aria-labelledby": "tenants-h" },
    h("h2", { id: "tenants-h" }, "Tenants"),
    tenants.length === 0 ? empty("No tenants.") : table(
      ["Tenant", "Networks", "IP groups", "Created"],
      tenants.map((t) =>
        h(
          "tr",
          { "data-tenant": t.name },
          h("td", null, t.name),
          h("td", { class: "num" }, t.networks),
          h("td", { class: "num" }, t.ipGroups),
          h("td", null, t.createdAt),
        )
      ),
    ),
  );
}

/** How many addresses of a network's pools are in quarantine: neither used nor free. */
export function quarantinedOf(usage) {
  return usage.total - usage.used - usage.free;
}

/** A bar of a network's pools: used, then quarantined, out of the capacity; the numbers beside. */
export function usageBar(usage) {
  const quarantined = quarantinedOf(usage);
  const part = (kind, count) => {
    const el = h("span", { class: `part ${kind}`, "data-count": count });
    // Widths go through the CSSOM: the policy allows no style attributes.
    el.style.width = `${usage.total > 0 ? (100 * count) / usage.total : 0}%`;
    return el;
  };
  const words =
    `${usage.used} used, ${quarantined} quarantined, ${usage.free} free of ${usage.total}`;
  return h(
    "div",
    {
      class: "usage",
      "data-total": usage.total,
      "data-used": usage.used,
      "data-quarantined": quarantined,
      "data-free": usage.free,
    },
    h(
      "div",
      { class: "bar", role: "img", "aria-label": words, title: words },
      part("used", usage.used),
      part("quarantined", quarantined),
    ),
    h(
      "span",
      { class: "usage-text" },
      `${usage.used} / ${usage.total} used`,
      quarantined > 0 ? `, ${quarantined} quarantined` : "",
    ),
  );
}

function segment(n) {
  if (n.type === "vxlan") return `VNI ${n.segmentId}`;
  if (n.type === "vlan") return `VLAN ${n.segmentId} on ${n.physnet}`;
  return `flat on ${n.physnet}`;
}

export function networksView(networks) {
  const sorted = byTenantAndName(networks);
  return h(
    "section",
    { id: "networks", "aria-labelledby": "networks-h" },
    h("h2", { id: "networks-h" }, "Networks"),
    h(
      "p",
      { class: "legend" },
      h("span", { class: "swatch used" }),
      " used ",
      h("span", { class: "swatch quarantined" }),
      " quarantined ",
      h("span", { class: "swatch free" }),
      " free",
    ),
    sorted.length === 0 ? empty("No networks.") : table(
      ["Tenant", "Network", "Type", "Segment", "CIDR", "Description", "Pool usage"],
      sorted.map((n) =>
        h(
          "tr",
          { class: "network", "data-tenant": n.tenant, "data-network": n.name },
          h("td", null, n.tenant),
          h(
            "td",
            { class: "name" },
            n.name,
            ...[
              ["public", n.public],
              ["egress", n.egress],
              ["host access", n.hostAccess],
              [n.advertisedBy ? `advertised by ${n.advertisedBy}` : "advertised", n.advertise],
              ["external data plane", n.dataPlane === "external"],
            ]
              .filter(([, on]) => on)
              .map(([label]) => h("span", { class: "tag" }, label)),
          ),
          h("td", null, n.type),
          h("td", null, segment(n)),
          h("td", { class: "addr" }, [n.cidr, n.cidr6].filter(Boolean).join(", ")),
          h("td", { class: "description" }, n.description ?? ""),
          h("td", null, usageBar(n.usage)),
        )
      ),
    ),
  );
}

function podName(p) {
  return p.pod ? `${p.pod.namespace}/${p.pod.name}` : "";
}

export function portsView(ports, nodes) {
  const byNode = new Map(nodes.map((n) => [n.name, []]));
  const unbound = [];
  for (const p of ports) {
    if (p.node === undefined) unbound.push(p);
    else if (byNode.has(p.node)) byNode.get(p.node).push(p);
    else byNode.set(p.node, [p]);
  }
  const groups = [...byNode.entries()].sort(([a], [b]) => a.localeCompare(b));
  if (unbound.length) groups.push([undefined, unbound]);
  return h(
    "section",
    { id: "ports", "aria-labelledby": "ports-h" },
    h("h2", { id: "ports-h" }, "Ports by node"),
    groups.length === 0 ? empty("No nodes and no ports.") : groups.map(([node, list]) =>
      h(
        "div",
        { class: "node", "data-node": node ?? "" },
        h("h3", null, node === undefined ? "Not on a node" : `Node ${node}`, ` (${list.length})`),
        list.length === 0 ? empty("No ports on this node.") : table(
          ["Port", "Tenant", "Network", "Address", "MAC", "Pod", "Interface"],
          list.sort((a, b) => a.id.localeCompare(b.id)).map((p) =>
            h(
              "tr",
              { class: "port", "data-port": p.id, "data-network": p.network },
              h("td", null, p.id),
              h("td", null, p.tenant),
              h("td", null, p.network),
              h("td", { class: "addr" }, [p.address, p.address6].filter(Boolean).join(", ")),
              h("td", { class: "addr" }, p.mac),
              h("td", { class: "pod" }, podName(p)),
              h("td", null, p.interface ?? ""),
            )
          ),
        ),
      )
    ),
  );
}
