// The topology section: a tenant's whole picture (tenant_topology.js), then the topology of one
// pod: the pod, its interfaces (name, address, MAC) and the networks each one is on, drawn as SVG.
import { h, s } from "./dom.js";
import { tenantPicture } from "./tenant_topology.js";

const ROW = 72;
const WIDTH = 760;

/** The pods that have ports, each with its ports: key "namespace/name" → ports. */
export function podsOf(ports) {
  const pods = new Map();
  for (const p of ports) {
    if (!p.pod) continue;
    const key = `${p.pod.namespace}/${p.pod.name}`;
    if (!pods.has(key)) pods.set(key, []);
    pods.get(key).push(p);
  }
  return new Map([...pods.entries()].sort(([a], [b]) => a.localeCompare(b)));
}

function box(x, y, w, lines, attrs) {
  return s(
    "g",
    attrs,
    s("rect", { x, y, width: w, height: ROW - 12, rx: 6 }),
    lines.map((line, i) =>
      s("text", { x: x + 10, y: y + 20 + i * 17, class: i === 0 ? "title" : "" }, line)
    ),
  );
}

function diagram(podKey, ports, networks) {
  const ifaces = [...ports].sort((a, b) =>
    (a.interface ?? a.id).localeCompare(b.interface ?? b.id)
  );
  const netKeys = [...new Set(ifaces.map((p) => `${p.networkTenant}/${p.network}`))];
  const rows = Math.max(ifaces.length, netKeys.length, 1);
  const height = rows * ROW + 20;
  const byKey = new Map(networks.map((n) => [`${n.tenant}/${n.name}`, n]));
  const netY = (key) => 10 + netKeys.indexOf(key) * ROW;
  const node = ifaces.find((p) => p.node)?.node;
  return s(
    "svg",
    {
      class: "topology",
      viewBox: `0 0 ${WIDTH} ${height}`,
      width: WIDTH,
      height,
      role: "img",
      "aria-label": `Interfaces and networks of pod ${podKey}`,
    },
    // Links first, so that the boxes cover their ends.
    ifaces.map((p, i) => {
      const key = `${p.networkTenant}/${p.network}`;
      return s("line", {
        class: "link",
        x1: 430,
        y1: 10 + i * ROW + (ROW - 12) / 2,
        x2: 520,
        y2: netY(key) + (ROW - 12) / 2,
        "data-interface": p.interface ?? p.id,
        "data-network": key,
      });
    }),
    box(10, 10 + ((rows - 1) * ROW) / 2, 190, [podKey, node ? `on node ${node}` : "on no node"], {
      class: "pod-box",
    }),
    ifaces.map((_p, i) =>
      s(
        "line",
        {
          class: "wire",
          x1: 200,
          y1: 10 + ((rows - 1) * ROW) / 2 + (ROW - 12) / 2,
          x2: 240,
          y2: 10 + i * ROW + (ROW - 12) / 2,
        },
      )
    ),
    ifaces.map((p, i) =>
      box(240, 10 + i * ROW, 190, [p.interface ?? p.id, p.address, p.mac], {
        class: "iface",
        "data-interface": p.interface ?? p.id,
      })
    ),
    netKeys.map((key) => {
      const n = byKey.get(key);
      const detail = n ? `${n.type} ${n.cidr}` : "";
      return box(520, netY(key), 230, [key, detail], { class: "net", "data-network": key });
    }),
  );
}

/** A picker of `keys` (at least one), with `chosen` selected. */
function picker(id, keys, chosen, onChoose) {
  return h(
    "select",
    { id, onchange: (e) => onChoose(e.target.value) },
    keys.map((key) => h("option", { value: key, selected: key === chosen }, key)),
  );
}

/** A tenant's whole topology; an admin picks the tenant. */
function tenantPart({ tenants, ports, networks, routers, chosenTenant, onChooseTenant }) {
  const names = tenants.map((t) => t.name).sort();
  if (names.length === 0) return h("p", { class: "empty" }, "No tenants.");
  const tenant = names.includes(chosenTenant) ? chosenTenant : names[0];
  return [
    h("h3", null, "Tenant ", tenant),
    names.length > 1
      ? h("label", null, "Tenant ", picker("tenant-picker", names, tenant, onChooseTenant))
      : null,
    h("div", { class: "diagram" }, tenantPicture(tenant, { ports, networks, routers })),
  ];
}

/** The topology section: the tenant's picture, then a pod picker and the chosen pod's diagram. */
export function topologyView(view) {
  const { ports, networks, chosen, onChoose } = view;
  const pods = podsOf(ports);
  const podKey = pods.has(chosen) ? chosen : pods.keys().next().value;
  return h(
    "section",
    { id: "topology", "aria-labelledby": "topology-h" },
    h("h2", { id: "topology-h" }, "Topology"),
    tenantPart(view),
    h("h3", null, "One pod"),
    pods.size === 0 ? h("p", { class: "empty" }, "No pod has a port yet.") : [
      h("label", null, "Pod ", picker("pod-picker", [...pods.keys()], podKey, onChoose)),
      h("div", { class: "diagram" }, diagram(podKey, pods.get(podKey), networks)),
    ],
  );
}
