/**
 * How straight one port PUT reads: the manager files one `putPort` passes through, how often it
 * moves from one file to another (hops), and how often it comes back to a file it had left.
 *
 *   deno run --allow-all manager/bench/call_path.ts [--trace FILE]
 *
 * It runs itself a second time under the inspector (loopback only), makes one port to warm the
 * caches, then sets a breakpoint on every line of every module of manager/ (bench/ excepted) and
 * records each line hit while one more port is made on the same network: a plain PUT, the path of
 * an agent's ADD. Files are counted from the hits in order; a run of hits in one file is one visit.
 */
import { benchContext, freePort, withTempDir } from "./support.ts";
import { putPort } from "../service/ports/mod.ts";

const SELF = new URL(import.meta.url).pathname;
const ROOT = new URL("../../", import.meta.url).pathname;
const MANAGER = `file://${ROOT}manager/`;

interface CallFrame {
  functionName: string;
  location: { scriptId: string; lineNumber: number; columnNumber: number };
}

interface Message {
  id?: number;
  method?: string;
  params?: { scriptId?: string; url?: string; callFrames?: CallFrame[] };
  result?: { locations?: CallFrame["location"][] };
}

/** The measured process: one warm-up PUT, then the PUT measured between two pauses. */
async function target(): Promise<void> {
  await withTempDir(async (dir) => {
    const ctx = await benchContext(`${dir}/manager.kv`);
    const req = { principal: { scope: "admin" }, tenant: "bench", network: "big" } as const;
    await putPort(ctx, { ...req, id: "warm", body: { node: "n1" } });
    // Let the warm-up's batch finish before the breakpoints go in.
    await new Promise((r) => setTimeout(r, 10));
    // deno-lint-ignore no-debugger
    debugger;
    await putPort(ctx, { ...req, id: "measured", body: { node: "n1" } });
    await new Promise((r) => setTimeout(r, 10));
    // deno-lint-ignore no-debugger
    debugger;
    ctx.store.close();
  });
}

/** A DevTools protocol session over the inspector's WebSocket. */
class Inspector {
  private next = 0;
  private answers = new Map<number, (m: Message) => void>();
  private pauses: CallFrame[][] = [];
  private waiter: ((frames: CallFrame[]) => void) | null = null;
  readonly urls = new Map<string, string>();

  private constructor(private ws: WebSocket) {
    ws.onmessage = (e) => this.receive(JSON.parse(e.data));
  }

  static async connect(port: number): Promise<Inspector> {
    for (let i = 0;; i++) {
      try {
        const list = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
        const ws = new WebSocket(list[0].webSocketDebuggerUrl);
        await new Promise((r, j) => (ws.onopen = r, ws.onerror = j));
        return new Inspector(ws);
      } catch (err) {
        if (i === 100) throw new Error(`no inspector on 127.0.0.1:${port}: ${err}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  private receive(m: Message): void {
    if (m.id !== undefined) {
      this.answers.get(m.id)?.(m);
      this.answers.delete(m.id);
    } else if (m.method === "Debugger.scriptParsed") {
      this.urls.set(m.params!.scriptId!, m.params!.url!);
    } else if (m.method === "Debugger.paused") {
      const frames = m.params!.callFrames!;
      if (this.waiter) this.waiter(frames);
      else this.pauses.push(frames);
    }
  }

  send(method: string, params: unknown = {}): Promise<Message> {
    const id = ++this.next;
    return new Promise((resolve) => {
      this.answers.set(id, resolve);
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** The next pause's top frame. */
  paused(): Promise<CallFrame> {
    const queued = this.pauses.shift();
    if (queued) return Promise.resolve(queued[0]);
    return new Promise((resolve) =>
      this.waiter = (frames) => {
        this.waiter = null;
        resolve(frames[0]);
      }
    );
  }

  close(): void {
    this.ws.close();
  }
}

/** A breakpoint on the first breakable place of every line of the manager's modules. */
async function breakEverywhere(inspector: Inspector): Promise<void> {
  for (const [scriptId, url] of inspector.urls) {
    if (!url.startsWith(MANAGER) || url.includes("/bench/")) continue;
    const r = await inspector.send("Debugger.getPossibleBreakpoints", {
      start: { scriptId, lineNumber: 0, columnNumber: 0 },
    });
    const lines = new Set<number>();
    for (const location of r.result?.locations ?? []) {
      if (lines.has(location.lineNumber)) continue;
      lines.add(location.lineNumber);
      await inspector.send("Debugger.setBreakpoint", { location });
    }
  }
}

/** The file of each line hit between the target's two pauses, in order. */
async function trace(): Promise<string[]> {
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", `--inspect-wait=127.0.0.1:${port}`, SELF, "--target"],
    cwd: ROOT,
    stdout: "null",
    stderr: "null",
  }).spawn();
  const inspector = await Inspector.connect(port);
  try {
    await inspector.send("Debugger.enable");
    await inspector.send("Runtime.runIfWaitingForDebugger");
    await inspector.paused();
    await breakEverywhere(inspector);
    const files: string[] = [];
    for (;;) {
      await inspector.send("Debugger.resume");
      const frame = await inspector.paused();
      const url = inspector.urls.get(frame.location.scriptId) ?? "";
      if (url.endsWith(SELF)) break;
      files.push(`${url.slice(`file://${ROOT}`.length)} ${frame.functionName}`);
    }
    await inspector.send("Debugger.setBreakpointsActive", { active: false });
    await inspector.send("Debugger.resume");
    return files;
  } finally {
    inspector.close();
    await child.status;
  }
}

/** Files passed through, moves between files, and moves back to a file left before. */
export function pathFigures(hits: string[]): { files: number; hops: number; comebacks: number } {
  const visits = hits.map((h) => h.split(" ")[0]).filter((f, i, all) => f !== all[i - 1]);
  const seen = new Set<string>();
  let comebacks = 0;
  for (const f of visits) {
    if (seen.has(f)) comebacks++;
    seen.add(f);
  }
  return { files: seen.size, hops: visits.length - 1, comebacks };
}

if (import.meta.main) {
  if (Deno.args.includes("--target")) {
    await target();
  } else {
    const hits = await trace();
    const at = Deno.args.indexOf("--trace");
    if (at >= 0) await Deno.writeTextFile(Deno.args[at + 1], hits.join("\n") + "\n");
    const service = hits.filter((h) => h.startsWith("manager/service/"));
    console.log(JSON.stringify({
      manager: pathFigures(hits),
      service: pathFigures(service),
      lineHits: hits.length,
    }));
  }
}
