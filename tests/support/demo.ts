/**
 * The demo as its tests see it: `make demo` run as a person runs it, the matrix read back from
 * what it printed, and what of its stack is still on the machine.
 */
import { run, type RunResult } from "@knitter/common";
import type { DemoSummary } from "../../scripts/demo.ts";
import { pidAlive } from "../../devstack/cleanup.ts";

export const ROOT = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** `make demo DEMO_DIR=dir DEMO_FLAGS=...`, from the repository root. */
export function makeDemo(dir: string, flags: string[], env: Record<string, string> = {}) {
  return run([
    "make",
    "--no-print-directory",
    "-C",
    ROOT,
    "demo",
    `DEMO_DIR=${dir}`,
    `DEMO_FLAGS=${flags.join(" ")}`,
  ], { check: false, env: { NO_COLOR: "1", ...env }, timeoutMs: 180_000 });
}

export async function readSummary(path: string): Promise<DemoSummary> {
  return JSON.parse(await Deno.readTextFile(path));
}

/** "from>to" -> the printed mark: "✓" replied, "·" no reply, "✗" not as expected. */
export function printedMatrix(stdout: string): Map<string, string> {
  const lines = stdout.split("\n").map((l) => [...l]);
  const head = lines.findIndex((l) => /^\s+FROM\s+NETWORK\s+ADDRESS\s+1\b/.test(l.join("")));
  if (head < 0) throw new Error(`no matrix in the demo's output:\n${stdout}`);
  // The column of each "#" in the header, read at the same place in every row.
  const header = lines[head].join("");
  const after = header.indexOf("ADDRESS") + "ADDRESS".length;
  const columns = [...header.slice(after).matchAll(/\d+/g)].map((m) => after + m.index);
  const rows: { label: string; chars: string[] }[] = [];
  for (const chars of lines.slice(head + 1)) {
    const m = /^\s+\d+\s+(\S+)\s/.exec(chars.join(""));
    if (!m) break;
    rows.push({ label: m[1], chars });
  }
  if (rows.length !== columns.length) {
    throw new Error(`the matrix has ${rows.length} rows but ${columns.length} columns:\n${stdout}`);
  }
  const out = new Map<string, string>();
  for (const row of rows) {
    rows.forEach((col, i) => {
      const mark = row.chars[columns[i]] ?? " ";
      if (mark !== " ") out.set(`${row.label}>${col.label}`, mark);
    });
  }
  return out;
}

export async function netnsWithPrefix(prefix: string): Promise<string[]> {
  const r = await run(["ip", "netns", "list"]);
  return r.stdout.split("\n").map((l) => l.split(" ")[0]).filter((n) => n.startsWith(`${prefix}-`));
}

/** A stack as the demo's summary and the launcher's manifest both describe it. */
export interface StackTrace {
  dir: string;
  prefix: string;
  processes: { role: string; pid: number; cmdline: string[] }[];
}

/** What of a demo's stack remains: its netns, live processes, any process naming its dir. */
export async function stackRemains(s: StackTrace): Promise<string[]> {
  const left: string[] = (await netnsWithPrefix(s.prefix)).map((n) => `netns ${n}`);
  for (const p of s.processes) {
    if ((await pidAlive(p.pid)) && (await cmdline(p.pid)) === p.cmdline.join(" ")) {
      left.push(`${p.role} pid ${p.pid}`);
    }
  }
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const c = await cmdline(Number(e.name));
    if (c?.includes(s.dir) && (await pidAlive(Number(e.name)))) left.push(`pid ${e.name}: ${c}`);
  }
  if (await Deno.stat(s.dir).then(() => true, () => false)) left.push(`directory ${s.dir}`);
  return left;
}

async function cmdline(pid: number): Promise<string | null> {
  try {
    return (await Deno.readTextFile(`/proc/${pid}/cmdline`)).replace(/\0$/, "").replaceAll(
      "\0",
      " ",
    );
  } catch {
    return null;
  }
}

/** The run's output, for assertion messages. */
export function output(r: RunResult): string {
  return `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
}
