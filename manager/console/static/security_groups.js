// The security groups view: each group's rules in words, and how many ports it applies to (those
// that name it, and those of networks naming it whose ports name none).
import { h } from "./dom.js";
import { byTenantAndName, empty, section, table } from "./views.js";

/** The groups a port is in: its own list, else its network's. */
export function groupsOf(port) {
  return port.securityGroups ?? port.networkSecurityGroups ?? [];
}

function peerText(peer) {
  if (!peer) return "any";
  if (peer.cidr && peer.network) return `network ${peer.network} (${peer.cidr})`;
  if (peer.group) return `group ${peer.group}`;
  return peer.cidr;
}

/** A rule as a line: "ingress tcp 80 from 10.0.0.0/8". */
export function ruleText(rule) {
  const towards = rule.direction === "ingress" ? "from" : "to";
  const ports = rule.ports ? ` ${rule.ports}` : "";
  return `${rule.direction} ${rule.protocol}${ports} ${towards} ${peerText(rule.peer)}`;
}

function members(group, ports) {
  return ports.filter((p) => p.tenant === group.tenant && groupsOf(p).includes(group.name)).length;
}

export function securityGroupsView(groups, ports) {
  return section(
    "security-groups",
    "Security groups",
    groups.length === 0 ? empty("No security groups.") : table(
      ["Tenant", "Group", "Rules", "Members", "Description"],
      byTenantAndName(groups).map((g) =>
        h(
          "tr",
          { class: "security-group", "data-tenant": g.tenant, "data-group": g.name },
          h("td", null, g.tenant),
          h("td", { class: "name" }, g.name),
          h(
            "td",
            null,
            g.rules.length === 0 ? h("span", { class: "none" }, "no rules: nothing allowed") : h(
              "ul",
              { class: "plain" },
              g.rules.map((r) => h("li", { class: "rule" }, ruleText(r))),
            ),
          ),
          h("td", { class: "num members" }, members(g, ports)),
          h("td", { class: "description" }, g.description ?? ""),
        )
      ),
    ),
  );
}
