/**
 * The node agent, unchanged, with a stopwatch around what it waits for: every command it runs
 * (through the runner's onRun hook), every HTTP call it makes (fetch: the manager), every Deno KV
 * operation (its state), every flow sync a caller waits for (Dataplane.prototype.sync), every OVSDB
 * port change (PortPlugger.prototype.add / remove) and every request it serves (Deno.serve: the plugin's calls). The agent's code is not touched: the
 * stopwatches wrap the built-ins and the prototype it calls. For the ADD profile of tests/bench;
 * not for production.
 *
 *   KNITTER_BENCH_TRACE=FILE deno run -A tests/bench/traced_agent.ts --config agent.json
 *
 * The trace (JSON lines of {@link TraceEvent}) is written when the agent stops (SIGTERM).
 */
import { onRun } from "@knitter/common";
import { loadAgentConfig } from "../../agent/config.ts";
import { startAgent } from "../../agent/daemon.ts";
import { Dataplane } from "../../agent/dataplane/dataplane.ts";
import { PortPlugger } from "../../agent/dataplane/port_plugger.ts";

export interface TraceEvent {
  kind: "exec" | "http" | "serve" | "kv" | "sync" | "ovsdb";
  /** exec: the command's words up to the first option-looking or path one; http/serve: METHOD path. */
  what: string;
  /** Epoch milliseconds (performance.timeOrigin + performance.now()). */
  start: number;
  end: number;
}

const events: TraceEvent[] = [];
const now = () => performance.timeOrigin + performance.now();

onRun((r) => {
  const end = now();
  events.push({ kind: "exec", what: r.argv.join(" "), start: end - r.ms, end });
});

const realFetch = globalThis.fetch;
globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit) => {
  const start = now();
  const res = await realFetch(input, init);
  const body = await res.arrayBuffer();
  const url = new URL(input instanceof Request ? input.url : String(input));
  events.push({
    kind: "http",
    what: `${init?.method ?? "GET"} ${url.pathname}`,
    start,
    end: now(),
  });
  const nullBody = [101, 204, 205, 304].includes(res.status) || body.byteLength === 0;
  return new Response(nullBody ? null : body, {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  });
};

/** Replaces `proto[name]` with the same method timed as `kind`/`what`. */
function timed(kind: TraceEvent["kind"], what: string, proto: object, name: string): void {
  const target = proto as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const real = target[name];
  target[name] = async function (this: unknown, ...args: unknown[]) {
    const start = now();
    try {
      return await real.apply(this, args);
    } finally {
      events.push({ kind, what, start, end: now() });
    }
  };
}
for (const m of ["get", "getMany", "set", "delete"]) timed("kv", `kv.${m}`, Deno.Kv.prototype, m);
timed("kv", "kv.atomic().commit", Deno.AtomicOperation.prototype, "commit");
timed("sync", "dataplane.sync", Dataplane.prototype, "sync");
timed("ovsdb", "add ports", PortPlugger.prototype, "add");
timed("ovsdb", "delete ports", PortPlugger.prototype, "remove");

const realServe = Deno.serve;
// deno-lint-ignore no-explicit-any
(Deno as any).serve = (options: any, handler: Deno.ServeHandler) =>
  // deno-lint-ignore no-explicit-any
  (realServe as any)(options, async (req: Request, info: any) => {
    const start = now();
    const res = await handler(req, info);
    events.push({
      kind: "serve",
      what: `${req.method} ${new URL(req.url).pathname}`,
      start,
      end: now(),
    });
    return res;
  });

const trace = Deno.env.get("KNITTER_BENCH_TRACE");
if (!trace) throw new Error("set KNITTER_BENCH_TRACE to the trace file");
const { config } = await loadAgentConfig(Deno.args);
const agent = await startAgent(config);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(signal, async () => {
    await agent.stop();
    await Deno.writeTextFile(trace, events.map((e) => JSON.stringify(e)).join("\n") + "\n");
    Deno.exit(0);
  });
}
