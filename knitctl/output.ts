/** Printing answers: aligned tables (kubectl's look) or the manager's JSON as it is. */
import type { Column } from "./resources.ts";

/** Rows under a header, each column as wide as its widest cell, two spaces apart. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => i === cells.length - 1 ? c : c.padEnd(widths[i])).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n") + "\n";
}

/** Objects as a table of the resource's columns (wide ones only with `wide`). */
export function objectTable(columns: Column[], objects: unknown[], wide: boolean): string {
  const shown = columns.filter((c) => wide || !c.wide);
  return table(
    shown.map((c) => c.header),
    objects.map((o) => shown.map((c) => c.value(o))),
  );
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + "\n";
}
