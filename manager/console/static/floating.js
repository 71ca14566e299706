// The floating addresses view: each of the token's floating addresses (its tenant's, or every
// tenant's for an admin) with its pool, what it is bound to and the node that answers for it now;
// and, for an admin, the pools with their usage.
import { h } from "./dom.js";
import { empty, section, table, usageBar } from "./views.js";

/** What the address is bound to, in words. */
function boundTo(f) {
  if (f.port) return `port ${f.port.network}/${f.port.id}`;
  if (f.claim) return `claim ${f.claim.network}/${f.claim.name}`;
  return "unbound";
}

/**
 * The node that answers for it: the node of the port that carries it and is active (a claim's
 * ports all carry it, the active one has its traffic); none while unbound or not on a node.
 */
function nodeOf(f, ports) {
  const carrier = ports.find((p) =>
    p.floating === f.address && p.tenant === f.tenant && p.active !== false && p.node
  );
  return carrier?.node;
}

function addressesTable(floatingIps, ports) {
  const sorted = [...floatingIps].sort((a, b) =>
    a.tenant.localeCompare(b.tenant) || a.address.localeCompare(b.address, "en", { numeric: true })
  );
  if (sorted.length === 0) return empty("No floating addresses.");
  return table(
    ["Tenant", "Address", "Pool", "Bound to", "Node"],
    sorted.map((f) => {
      const node = nodeOf(f, ports);
      return h(
        "tr",
        { class: "floating-ip", "data-tenant": f.tenant, "data-address": f.address },
        h("td", null, f.tenant),
        h("td", { class: "addr" }, f.address),
        h("td", { class: "pool" }, f.pool),
        h("td", { class: "bound" }, boundTo(f)),
        h("td", { class: "node" }, node ?? h("span", { class: "none" }, "none")),
      );
    }),
  );
}

function poolsTable(pools) {
  if (pools.length === 0) return empty("No floating pools.");
  return table(
    ["Pool", "Ranges", "Description", "Usage"],
    [...pools].sort((a, b) => a.name.localeCompare(b.name)).map((p) =>
      h(
        "tr",
        { class: "floating-pool", "data-pool": p.name },
        h("td", { class: "name" }, p.name),
        h("td", { class: "addr" }, p.cidrs.join(", ")),
        h("td", { class: "description" }, p.description ?? ""),
        // Held addresses are the bar's used part; quarantined ones beside them.
        h("td", null, usageBar({ total: p.usage.total, used: p.usage.held, free: p.usage.free })),
      )
    ),
  );
}

/** `pools`: the admin's pools with their usage; null for a tenant (it sees its addresses only). */
export function floatingView(floatingIps, pools, ports) {
  return section(
    "floating",
    "Floating addresses",
    addressesTable(floatingIps, ports),
    pools && [h("h3", null, "Pools"), poolsTable(pools)],
  );
}
