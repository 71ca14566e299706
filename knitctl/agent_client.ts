/**
 * The node agent's extra-interface API over its unix socket (root only): attach and detach.
 * Answers are the agent's JSON; failures say whether the socket, the permission or the agent was
 * the problem.
 */
import type { ExtraInterfaceView } from "@knitter/common";
import type { TraceHop } from "@knitter/wasm";
import type { VerifyView } from "@knitter/agent";
import { CommandFailed } from "./errors.ts";

export type { ExtraInterfaceView };

export interface RouteSpec {
  dst: string;
  via?: string;
}

/** Which netns: exactly one of these. */
export interface NetnsTarget {
  netns?: string;
  pid?: number;
  pod?: string;
}

export interface AttachRequest extends NetnsTarget {
  ifName: string;
  network?: string;
  tenant?: string;
  bridge?: string;
  vlan?: number;
  ip?: string;
  mac?: string;
  mtu?: number;
  routes?: RouteSpec[];
}

export type DetachRequest = NetnsTarget & { ifName: string };

export const DEFAULT_AGENT_SOCKET = "/run/knitter/agent.sock";

export async function attachInterface(
  socket: string,
  req: AttachRequest,
): Promise<ExtraInterfaceView> {
  return await call(socket, "POST", req, `Cannot attach ${req.ifName}`);
}

export async function detachInterface(
  socket: string,
  req: DetachRequest,
): Promise<{ removed: boolean; netns: string; ifName: string }> {
  return await call(socket, "DELETE", req, `Cannot detach ${req.ifName}`);
}

/** The bridge's flows against the ones the agent computes, and what self-healing did. */
export interface FlowDiffView {
  bridge: string;
  computed: number;
  installed: number;
  missing: string[];
  extra: string[];
  heals: number;
  checks: number;
  repairs: number;
  driftedFlows: number;
  lastHeal?: { reason: string; at: string; ms: number };
  lastRepair?: { at: string; missing: number; extra: number };
}

export async function flowDiff(socket: string): Promise<FlowDiffView> {
  return await call(socket, "GET", undefined, "Cannot compare the flows", {
    path: "/v1/flows/diff",
    api: "flow API",
  });
}

/** What the node's switch does with a packet: one hop of `knitctl trace` (POST /v1/trace). */
export async function traceOnAgent(socket: string, req: unknown): Promise<TraceHop> {
  return await call(socket, "POST", req, "Cannot trace the packet", {
    path: "/v1/trace",
    api: "trace API",
  });
}

/** What `knitctl verify node` needs of the agent (GET /v1/verify). */
export async function verifyOnAgent(socket: string): Promise<AgentVerifyView> {
  return await call(socket, "GET", undefined, "Cannot verify the node", {
    path: "/v1/verify",
    api: "verify API",
  });
}

/** What `knitctl capture` asks of the agent (POST /v1/capture); the agent's bounds apply. */
export interface CaptureRequest {
  tenant: string;
  network?: string;
  port?: string;
  /** A mirror of the tenant's instead of a port: its copies where the node sends them. */
  mirror?: string;
  packets?: number;
  seconds?: number;
  filter?: string;
  direction?: "both" | "in" | "out";
}

/** A pcap file of the port's traffic, taken by its node's agent with the caller's `token`. */
export async function captureOnAgent(
  socket: string,
  token: string,
  req: CaptureRequest,
): Promise<Uint8Array> {
  const what = req.mirror !== undefined ? `mirror ${req.mirror}` : `port ${req.port}`;
  return await call(socket, "POST", req, `Cannot capture ${what}`, {
    path: "/v1/capture",
    api: "capture API",
  }, { token, bytes: true });
}

/** The agent's answer to GET /v1/verify (a type only: nothing of the agent is loaded). */
export type AgentVerifyView = VerifyView;

async function call<T>(
  socket: string,
  method: string,
  body: unknown,
  what: string,
  at = { path: "/v1/interfaces", api: "extra-interface API" },
  /** `token`: the caller's, for the agent to ask the manager with; `bytes`: a binary answer. */
  opts: { token?: string; bytes?: boolean } = {},
): Promise<T> {
  await requireSocket(socket);
  const client = Deno.createHttpClient({ proxy: { transport: "unix", path: socket } });
  let res: Response;
  try {
    res = await fetch(`http://agent${at.path}`, {
      method,
      headers: {
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      client,
    });
  } catch (err) {
    client.close();
    const why = ((err as Error).cause as Error | undefined)?.message ?? (err as Error).message;
    throw new CommandFailed(
      `${what}: the agent at ${socket} is not answering (${why}): is the agent running on this node?`,
    );
  }
  try {
    if (res.ok && opts.bytes) return new Uint8Array(await res.arrayBuffer()) as T;
    const text = await res.text();
    let parsed: { error?: { code?: string; message?: string } } | undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch { /* not JSON: quoted below */ }
    if (res.ok) return parsed as T;
    if (res.status === 404 && !parsed?.error) {
      throw new CommandFailed(
        `${what}: the agent at ${socket} has no ${at.api} (an older agent?): upgrade it`,
      );
    }
    const msg = parsed?.error?.message ?? text.slice(0, 300);
    throw new CommandFailed(`${what}: ${msg} (agent: ${res.status} ${parsed?.error?.code ?? ""})`);
  } finally {
    client.close();
  }
}

async function requireSocket(socket: string): Promise<void> {
  try {
    const st = await Deno.stat(socket);
    if (!st.isSocket) {
      throw new CommandFailed(`${socket} is not a unix socket: pass the agent's --agent-socket`);
    }
  } catch (err) {
    if (err instanceof CommandFailed) throw err;
    if (err instanceof Deno.errors.NotFound) {
      throw new CommandFailed(
        `No agent socket at ${socket}: run knitctl on the pod's node where the agent runs, or pass --agent-socket PATH (or KNITCTL_AGENT_SOCKET)`,
      );
    }
    if (err instanceof Deno.errors.PermissionDenied) {
      throw new CommandFailed(
        `Cannot use the agent socket ${socket}: permission denied; run knitctl as root (the socket is root-only)`,
      );
    }
    throw err;
  }
}
