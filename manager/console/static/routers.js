// The routers view: what each router connects (its networks, with the gateway address it holds on
// each) and where its static routes send traffic.
import { h } from "./dom.js";
import { byTenantAndName, empty, section, table } from "./views.js";

function networkList(r) {
  return h(
    "ul",
    { class: "plain" },
    r.networks.map((n) =>
      h(
        "li",
        { class: "router-network", "data-network": n.name },
        `${n.name} (${n.cidr}), gateway ${n.gateway}`,
      )
    ),
  );
}

function routeList(r) {
  if (r.routes.length === 0) return h("span", { class: "none" }, "none");
  return h(
    "ul",
    { class: "plain" },
    r.routes.map((route) => h("li", { class: "route" }, `${route.dst} via ${route.via}`)),
  );
}

export function routersView(routers) {
  return section(
    "routers",
    "Routers",
    routers.length === 0 ? empty("No routers.") : table(
      ["Tenant", "Router", "Networks", "Static routes", "Description"],
      byTenantAndName(routers).map((r) =>
        h(
          "tr",
          { class: "router", "data-tenant": r.tenant, "data-router": r.name },
          h("td", null, r.tenant),
          h(
            "td",
            { class: "name" },
            r.name,
            r.advertise && h("span", { class: "tag" }, "advertised"),
          ),
          h("td", null, networkList(r)),
          h("td", null, routeList(r)),
          h("td", { class: "description" }, r.description ?? ""),
        )
      ),
    ),
  );
}
