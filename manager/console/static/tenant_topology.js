// A tenant's whole topology as one SVG picture: its pods, their interfaces, the networks those are
// on (its own, and public ones of others its pods use) and its routers, each linked to what it
// connects. Four columns, left to right; links are drawn first so the boxes cover their ends.
import { s } from "./dom.js";

const ROW = 56;
const BOX_H = 44;
const COLUMNS = { pod: 10, iface: 210, net: 420, router: 640 };
const BOX_W = 180;
const WIDTH = 830;

const netKey = (tenant, name) => `${tenant}/${name}`;
const podKey = (p) => `${p.pod.namespace}/${p.pod.name}`;

/** What the picture holds for `tenant`: each column's items, in order, and the links between them. */
export function tenantGraph(tenant, { ports, networks, routers }) {
  const own = ports.filter((p) => p.tenant === tenant && p.pod)
    .sort((a, b) =>
      podKey(a).localeCompare(podKey(b)) || (a.interface ?? a.id).localeCompare(b.interface ?? b.id)
    );
  const ownRouters = routers.filter((r) => r.tenant === tenant).sort((a, b) =>
    a.name.localeCompare(b.name)
  );
  const nets = new Set(
    networks.filter((n) => n.tenant === tenant).map((n) => netKey(n.tenant, n.name)),
  );
  for (const p of own) nets.add(netKey(p.networkTenant, p.network));
  const ifaceKey = (p) => `${podKey(p)}/${p.interface ?? p.id}`;
  return {
    pods: [...new Set(own.map(podKey))],
    ifaces: own.map((p) => ({ key: ifaceKey(p), port: p })),
    nets: [...nets].sort(),
    routers: ownRouters.map((r) => r.name),
    links: [
      ...own.map((p) => ({ kind: "pod", from: podKey(p), to: ifaceKey(p) })),
      ...own.map((p) => ({
        kind: "net",
        from: ifaceKey(p),
        to: netKey(p.networkTenant, p.network),
      })),
      ...ownRouters.flatMap((r) =>
        r.networks.map((n) => ({ kind: "router", from: netKey(tenant, n.name), to: r.name }))
      ),
    ],
  };
}

function box(column, i, lines, attrs) {
  const x = COLUMNS[column];
  const y = 10 + i * ROW;
  return s(
    "g",
    attrs,
    s("rect", { x, y, width: BOX_W, height: BOX_H, rx: 6 }),
    lines.map((line, n) =>
      s("text", { x: x + 8, y: y + 17 + n * 16, class: n === 0 ? "title" : "" }, line)
    ),
  );
}

/** The columns each kind of link joins, and how to find a row in them. */
const LINK_ENDS = {
  pod: ["pod", "iface"],
  net: ["iface", "net"],
  router: ["net", "router"],
};

function linkLine(link, rowOf) {
  const [left, right] = LINK_ENDS[link.kind];
  const middle = (column, key) => 10 + rowOf[column](key) * ROW + BOX_H / 2;
  return s("line", {
    class: `link ${link.kind}-link`,
    x1: COLUMNS[left] + BOX_W,
    y1: middle(left, link.from),
    x2: COLUMNS[right],
    y2: middle(right, link.to),
    "data-from": link.from,
    "data-to": link.to,
  });
}

/** The picture of `tenant`'s topology. */
export function tenantPicture(tenant, data) {
  const g = tenantGraph(tenant, data);
  const byNet = new Map(data.networks.map((n) => [netKey(n.tenant, n.name), n]));
  const rowOf = {
    pod: (k) => g.pods.indexOf(k),
    iface: (k) => g.ifaces.findIndex((i) => i.key === k),
    net: (k) => g.nets.indexOf(k),
    router: (k) => g.routers.indexOf(k),
  };
  const rows = Math.max(g.pods.length, g.ifaces.length, g.nets.length, g.routers.length, 1);
  const height = rows * ROW + 20;
  return s(
    "svg",
    {
      class: "topology tenant-topology",
      viewBox: `0 0 ${WIDTH} ${height}`,
      width: WIDTH,
      height,
      role: "img",
      "aria-label": `Pods, interfaces, networks and routers of tenant ${tenant}`,
    },
    g.links.map((l) => linkLine(l, rowOf)),
    g.pods.map((k, i) => box("pod", i, [k], { class: "pod-box", "data-pod": k })),
    g.ifaces.map(({ key, port }, i) =>
      box("iface", i, [port.interface ?? port.id, port.address ?? ""], {
        class: "iface",
        "data-interface": key,
      })
    ),
    g.nets.map((k, i) => {
      const n = byNet.get(k);
      return box("net", i, [k, n ? `${n.type} ${n.cidr ?? n.cidr6}` : ""], {
        class: "net",
        "data-network": k,
      });
    }),
    g.routers.map((name, i) =>
      box("router", i, [name, "router"], { class: "router-box", "data-router": name })
    ),
  );
}
