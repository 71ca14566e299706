// The clusters and nodes view, for admins: what each cluster may reach, and each node as the
// manager knows it (when its agent registered, when it last refreshed its record, how many ports
// it last reported leaving out of its flows). A tenant's token reads none of this.
import { h } from "./dom.js";
import { empty, section, table } from "./views.js";

const list = (names) => (names.length === 0 ? "none" : names.join(", "));

function clustersTable(clusters) {
  if (clusters.length === 0) {
    return empty("No clusters registered: every node is of the default cluster.");
  }
  return table(
    ["Cluster", "Tenants", "Other networks", "Physnets", "State"],
    [...clusters].sort((a, b) => a.name.localeCompare(b.name)).map((c) =>
      h(
        "tr",
        { class: "cluster", "data-cluster": c.name },
        h("td", { class: "name" }, c.name),
        h("td", null, list(c.tenants)),
        h("td", null, list(c.networks)),
        h("td", null, list(c.physnets)),
        h("td", null, c.deletingSince ? `deleting since ${c.deletingSince}` : "in use"),
      )
    ),
  );
}

/** A node's health as the manager knows it: ports its agent leaves out of its flows, or none. */
function health(conflicts) {
  if (!conflicts) return h("span", { class: "health ok", "data-conflicts": 0 }, "no conflicts");
  return h(
    "span",
    { class: "health warn", "data-conflicts": conflicts },
    `${conflicts} port${conflicts === 1 ? "" : "s"} left out of its flows`,
  );
}

function nodesTable(nodes, conflicts) {
  if (nodes.length === 0) return empty("No nodes registered.");
  return table(
    ["Node", "Cluster", "Underlay", "Registered", "Last refresh", "Health"],
    [...nodes].sort((a, b) => a.name.localeCompare(b.name)).map((n) =>
      h(
        "tr",
        { class: "cluster-node", "data-node": n.name },
        h("td", { class: "name" }, n.name),
        h("td", null, n.cluster ?? "default"),
        h("td", { class: "addr" }, n.underlayIp),
        h("td", null, n.registeredAt),
        h("td", { class: "last-refresh" }, n.updatedAt),
        h("td", null, health(conflicts[n.name])),
      )
    ),
  );
}

export function clustersView(infra, nodes) {
  return section(
    "clusters",
    "Clusters and nodes",
    h("h3", null, "Clusters"),
    clustersTable(infra.clusters),
    h("h3", null, "Nodes"),
    nodesTable(nodes, infra.conflicts),
  );
}
