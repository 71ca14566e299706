/** What the demo prints: aligned tables, the matrix grid, colour only on a terminal. */
import type { NetworkType, Port, Usage } from "@knitter/common";
import { asExpected, type Cell } from "./demo_matrix.ts";
import { label } from "./demo_matrix.ts";
import type { DemoNetwork, Endpoint } from "./demo_plan.ts";

/** The fields of the manager's network record that the demo shows. */
export interface Network {
  tenant: string;
  name: string;
  type: NetworkType;
  cidr: string;
  mtu: number;
  physnet?: string;
  segmentId?: number;
  usage: Usage;
}

const COLOUR = Deno.stdout.isTerminal() && !Deno.env.get("NO_COLOR");

function paint(code: number, text: string): string {
  return COLOUR ? `\x1b[${code}m${text}\x1b[0m` : text;
}

export const red = (t: string) => paint(31, t);
export const green = (t: string) => paint(32, t);
export const bold = (t: string) => paint(1, t);
export const dim = (t: string) => paint(2, t);

/** Rows of cells, columns padded to their widest cell (colour codes do not count). */
export function table(rows: string[][], indent = "  "): string {
  // deno-lint-ignore no-control-regex
  const width = (s: string) => s.replace(/\x1b\[\d+m/g, "").length;
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => width(r[i] ?? ""))));
  return rows.map((r) =>
    indent + r.map((c, i) => c + " ".repeat(widths[i] - width(c))).join("  ").trimEnd()
  ).join("\n");
}

export function networksTable(
  networks: Network[],
  plan: DemoNetwork[],
): string {
  const rows = [["TENANT", "NETWORK", "TYPE", "SEGMENT", "CIDR", "MTU", "USED", "WHAT"]];
  for (const n of networks) {
    const segment = n.type === "vxlan"
      ? `VNI ${n.segmentId}`
      : n.type === "vlan"
      ? `VLAN ${n.segmentId} on ${n.physnet}`
      : `flat on ${n.physnet}`;
    const role = plan.find((p) => p.tenant === n.tenant && p.name === n.name)?.role ?? "";
    rows.push([
      n.tenant,
      n.name,
      n.type,
      segment,
      n.cidr,
      String(n.mtu),
      `${n.usage.used}/${n.usage.total}`,
      dim(role),
    ]);
  }
  return table(rows);
}

/** One row per pod interface, from the ports the manager recorded, pods in the given order. */
export function podsTable(ports: Port[], pods: string[], netnsOf: (pod: string) => string): string {
  const rows = [["POD", "TENANT", "NODE", "INTERFACE", "NETWORK", "ADDRESS", "MAC", "NETNS"]];
  const rank = (p: Port) => pods.indexOf(p.pod?.name ?? "");
  const sorted = ports.toSorted((a, b) =>
    rank(a) - rank(b) || (a.interface ?? "").localeCompare(b.interface ?? "")
  );
  let last = "";
  for (const p of sorted) {
    const pod = p.pod?.name ?? "?";
    const first = pod !== last;
    last = pod;
    rows.push([
      first ? pod : "",
      first ? p.tenant : "",
      first ? p.node ?? "" : "",
      p.interface ?? "",
      p.network,
      p.address,
      p.mac,
      first ? dim(netnsOf(pod)) : "",
    ]);
  }
  return table(rows);
}

/**
 * The grid: a row per sending interface, a column per address. ✓ ICMP, TCP and UDP answered, ·
 * none did (both as expected); a red ✗ where the outcome differs from the expectation.
 */
export function matrixGrid(endpoints: Endpoint[], cells: Cell[]): string {
  const byPair = new Map(cells.map((c) => [`${c.from}>${c.to}`, c]));
  const head = ["", "FROM", "NETWORK", "ADDRESS", ...endpoints.map((_, i) => String(i + 1))];
  const rows = [head];
  endpoints.forEach((from, i) => {
    const marks = endpoints.map((to) => {
      const c = byPair.get(`${label(from)}>${label(to)}`);
      if (!c) return " ";
      if (!asExpected(c)) return red("✗");
      return c.reached ? green("✓") : dim("·");
    });
    rows.push([
      String(i + 1),
      label(from),
      `${from.tenant}/${from.network}`,
      from.address,
      ...marks,
    ]);
  });
  return table(rows);
}

export function mismatchLines(cells: Cell[]): string[] {
  return cells.filter((c) => !asExpected(c)).map((c) => {
    const through = (["icmp", "tcp", "udp"] as const).filter((p) => c[p]).map((p) =>
      p.toUpperCase()
    );
    const lost = (["icmp", "tcp", "udp"] as const).filter((p) => !c[p]).map((p) => p.toUpperCase());
    return c.expected
      ? `${c.from} -> ${c.to} (${c.address}): expected ICMP, TCP and UDP through, ${
        lost.join(", ")
      } failed`
      : `${c.from} -> ${c.to} (${c.address}): expected nothing through, ${
        through.join(", ")
      } answered (isolation broken)`;
  });
}
