/**
 * The manager's API as its clients (agent, monitor, knitctl) call it: typed calls, and errors that
 * say who failed and why.
 */
import type {
  ErrorBody,
  MirrorInfo,
  NetworkDelegate,
  PodRef,
  Port,
  RouterInfo,
  ServiceInfo,
} from "./api_types.ts";
import type { SecurityGroup } from "./security_groups.ts";
import { type Clock, retry, systemClock } from "./backoff.ts";

export interface NodeInfo {
  name: string;
  underlayIp: string;
}

export type FeedEvent =
  | { seq: number; type: "port"; op: "put" | "delete"; port: Port }
  | { seq: number; type: "node"; op: "put" | "delete"; node: NodeInfo }
  | { seq: number; type: "router"; op: "put" | "delete"; router: RouterInfo }
  | { seq: number; type: "securityGroup"; op: "put" | "delete"; securityGroup: SecurityGroup }
  | { seq: number; type: "mirror"; op: "put" | "delete"; mirror: MirrorInfo }
  | { seq: number; type: "service"; op: "put" | "delete"; service: ServiceInfo };

export interface PortRequest {
  ip?: string;
  ipGroup?: string;
  mac?: string;
  node?: string;
  pod?: PodRef;
  interface?: string;
  securityGroups?: string[];
  /** A claim of the port's tenant on the network: its address and MAC (manager/README.md). */
  claim?: string;
}

/** The manager answered with an error. */
export class ManagerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = "ManagerError";
  }
}

/**
 * The manager refused the request before any work because its caller is over a budget (429,
 * manager/README.md "Fairness"), still after the client waited out its Retry-After and tried
 * again: the message is the manager's, naming the limit.
 */
export class ManagerThrottledError extends ManagerError {
  constructor(message: string, readonly retryAfterMs: number, readonly attempts: number) {
    super(429, "too_many_requests", message);
    this.name = "ManagerThrottledError";
  }
}

/**
 * How the client meets a 429: it waits what the manager's Retry-After asks (at least the backoff,
 * from `firstMs` doubling, at most `maxMs` a wait) and tries again, `attempts` in all. A 429 is
 * refused before any work, so even a POST is safe to send again.
 */
export const THROTTLE_RETRY = { attempts: 4, firstMs: 500, maxMs: 10_000 } as const;

/** The manager could not be reached at all: retry later. */
export class ManagerUnavailableError extends Error {
  /** The connection failed, so the request certainly made nothing at the manager. */
  readonly notSent: boolean;

  constructor(message: string, options?: ErrorOptions & { notSent?: boolean }) {
    super(message, options);
    this.name = "ManagerUnavailableError";
    this.notSent = options?.notSent ?? false;
  }
}

export class ManagerClient {
  private readonly client?: Deno.HttpClient;
  private readonly socket?: string;
  private readonly clock: Clock;

  constructor(
    private readonly url: string,
    private readonly token: string,
    options: { caPem?: string; socket?: string; clock?: Clock } = {},
  ) {
    this.socket = options.socket;
    this.clock = options.clock ?? systemClock;
    if (options.socket) {
      this.client = Deno.createHttpClient({ proxy: { transport: "unix", path: options.socket } });
    } else if (options.caPem) {
      this.client = Deno.createHttpClient({ caCerts: [options.caPem] });
    }
  }

  registerNode(name: string, underlayIp: string): Promise<NodeInfo> {
    return this.call("PUT", `/api/v1/nodes/${enc(name)}`, { underlayIp });
  }

  putPort(tenant: string, network: string, id: string, body: PortRequest): Promise<Port> {
    return this.call("PUT", portPath(tenant, network, id), body);
  }

  /** How a network's interfaces are made: its data plane and delegate (a tenant's, else public). */
  networkPlane(
    tenant: string,
    network: string,
  ): Promise<{ dataPlane?: "external"; delegate?: NetworkDelegate }> {
    return this.call("GET", `/api/v1/tenants/${enc(tenant)}/networks/${enc(network)}`);
  }

  /** Releases a port; false when the manager no longer knew it (already released). */
  async deletePort(tenant: string, network: string, id: string): Promise<boolean> {
    try {
      await this.call("DELETE", portPath(tenant, network, id));
      return true;
    } catch (err) {
      if (err instanceof ManagerError && err.status === 404) return false;
      throw err;
    }
  }

  /** Takes a port off its pod and node, keeping its address (a stable port whose pod is gone). */
  unbindPort(tenant: string, network: string, id: string): Promise<Port> {
    return this.call("POST", `${portPath(tenant, network, id)}/unbind`);
  }

  /**
   * Makes a claim's port the active one (a live migration's target whose guest runs on its node)
   * and the claim's other port inactive, in one step at the manager; idempotent.
   */
  activatePort(tenant: string, network: string, id: string): Promise<Port> {
    return this.call("POST", `${portPath(tenant, network, id)}/activate`);
  }

  /**
   * Ports across networks; the manager filters them: those bound to a node, of a pod
   * ("namespace/name"), of a tenant.
   */
  async listPorts(query: { node?: string; pod?: string; tenant?: string } = {}): Promise<Port[]> {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, v);
    const search = params.size > 0 ? `?${params}` : "";
    return (await this.call<{ items: Port[] }>("GET", `/api/v1/ports${search}`)).items;
  }

  /** Every tenant's routers (nodes and admins). */
  async listRouters(): Promise<RouterInfo[]> {
    return (await this.call<{ items: RouterInfo[] }>("GET", "/api/v1/routers")).items;
  }

  /** Every tenant's port mirrors (nodes and admins). */
  async listMirrors(): Promise<MirrorInfo[]> {
    return (await this.call<{ items: MirrorInfo[] }>("GET", "/api/v1/mirrors")).items;
  }

  /** Every tenant's services (nodes and admins). */
  async listServices(): Promise<ServiceInfo[]> {
    return (await this.call<{ items: ServiceInfo[] }>("GET", "/api/v1/services")).items;
  }

  async listNodes(): Promise<NodeInfo[]> {
    return (await this.call<{ items: NodeInfo[] }>("GET", "/api/v1/nodes")).items;
  }

  /** Every tenant's security groups (admin and node tokens). */
  async listSecurityGroups(): Promise<SecurityGroup[]> {
    return (await this.call<{ items: SecurityGroup[] }>("GET", "/api/v1/security-groups")).items;
  }

  async feedCursor(signal?: AbortSignal): Promise<string> {
    return (await this.call<{ cursor: string }>("GET", "/api/v1/feed", undefined, signal)).cursor;
  }

  /** Events after `cursor`, waiting up to `timeoutS`; "expired" when the follower must list again. */
  async feedSince(
    cursor: string,
    timeoutS: number,
    signal?: AbortSignal,
  ): Promise<{ cursor: string; events: FeedEvent[] } | "expired"> {
    try {
      return await this.call(
        "GET",
        `/api/v1/feed?after=${enc(cursor)}&timeout=${timeoutS}`,
        undefined,
        signal,
      );
    } catch (err) {
      if (err instanceof ManagerError && err.status === 410) return "expired";
      throw err;
    }
  }

  /**
   * Follows the feed from `cursor` as one streamed answer (`stream=ndjson`, a page a line, an
   * empty page at least every `heartbeatS`), calling `page` with each page as it comes. Resolves
   * "ended" when the manager ended the stream (follow on from the last page's cursor), "expired"
   * when the cursor expired (list again), "unsupported" when the manager predates streams (it
   * refused the parameter: long-poll instead); throws as any call does.
   */
  async feedStream(
    cursor: string,
    heartbeatS: number,
    page: (page: { cursor: string; events: FeedEvent[] }) => void,
    signal?: AbortSignal,
  ): Promise<"ended" | "expired" | "unsupported"> {
    const path = `/api/v1/feed?after=${enc(cursor)}&timeout=${heartbeatS}&stream=ndjson`;
    const res = await this.send("GET", path, undefined, signal);
    if (!res.ok) {
      try {
        return await this.answer(res, "GET", path, 1);
      } catch (err) {
        if (err instanceof ManagerError && err.status === 410) return "expired";
        if (err instanceof ManagerError && err.field === "query.stream") return "unsupported";
        throw err;
      }
    }
    const read = ndjsonLines(res.body!);
    try {
      return await this.followLines(read, page, signal);
    } finally {
      await read.return(undefined);
    }
  }

  /** Each page of a stream's lines to `page`, until an error line or the stream's end. */
  private async followLines(
    read: AsyncGenerator<string>,
    page: (page: { cursor: string; events: FeedEvent[] }) => void,
    signal?: AbortSignal,
  ): Promise<"ended" | "expired"> {
    for (;;) {
      let line: string;
      try {
        const next = await read.next();
        if (next.done) return "ended";
        line = next.value;
      } catch (err) {
        if (signal?.aborted) throw err;
        throw new ManagerUnavailableError(
          `The feed stream from the manager at ${this.url} broke off (${(err as Error).message})`,
          { cause: err },
        );
      }
      const parsed = this.pageOf(line, "stream");
      if (parsed === "expired") return parsed;
      page(parsed);
    }
  }

  /** A feed line: a page, "expired", or the error the manager ended the feed with (thrown). */
  private pageOf(line: string, what: string): { cursor: string; events: FeedEvent[] } | "expired" {
    const parsed = JSON.parse(line);
    if (parsed.error?.code === "feed_expired") return "expired";
    if (parsed.error) {
      throw new ManagerUnavailableError(
        `The manager at ${this.url} ended the feed ${what}: ${parsed.error.code}: ${parsed.error.message}`,
      );
    }
    return parsed;
  }

  /**
   * Follows the feed from `cursor` over a WebSocket (`stream=websocket`, a page a message, an empty
   * page at least every `heartbeatS`), as feedStream does. "refused" when no socket opened: a
   * manager that predates sockets refuses the parameter, one behind its connection guard answers
   * 501, one that is down refuses the connection; the caller follows the NDJSON stream instead
   * (which says which). A client through a Unix socket or with its own CA is always "refused":
   * Deno's WebSocket takes neither.
   */
  feedSocket(
    cursor: string,
    heartbeatS: number,
    page: (page: { cursor: string; events: FeedEvent[] }) => void,
    signal?: AbortSignal,
  ): Promise<"ended" | "expired" | "refused"> {
    if (this.client) return Promise.resolve("refused");
    return this.feedSocketBase(signal).then((base) =>
      this.followSocket(base, cursor, heartbeatS, page, signal)
    );
  }

  /**
   * Where the manager serves the feed's sockets: its feed socket port (GET /feed/socket), or its
   * API's own port when it has none (404; a manager served without its guard takes sockets there,
   * a guarded one refuses them: 501, "refused").
   */
  private async feedSocketBase(signal?: AbortSignal): Promise<string> {
    let port: number;
    try {
      ({ port } = await this.call<{ port: number }>(
        "GET",
        "/api/v1/feed/socket",
        undefined,
        signal,
      ));
    } catch (err) {
      if (err instanceof ManagerError && err.status === 404) return this.url;
      throw err;
    }
    const url = new URL(this.url);
    url.port = String(port);
    return url.origin;
  }

  private followSocket(
    base: string,
    cursor: string,
    heartbeatS: number,
    page: (page: { cursor: string; events: FeedEvent[] }) => void,
    signal?: AbortSignal,
  ): Promise<"ended" | "expired" | "refused"> {
    const path = `/api/v1/feed?after=${enc(cursor)}&timeout=${heartbeatS}&stream=websocket`;
    // Stopped while the port was asked: an abort listener added now would never run.
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${base.replace(/^http/, "ws")}${path}`, {
        headers: { authorization: `Bearer ${this.token}` },
      });
      ws.binaryType = "arraybuffer";
      let opened = false;
      let outcome: "expired" | Error | undefined;
      const stop = () => ws.close();
      signal?.addEventListener("abort", stop, { once: true });
      ws.onopen = () => (opened = true);
      ws.onmessage = (e) => {
        if (outcome) return;
        try {
          const parsed = this.pageOf(DECODER.decode(e.data as ArrayBuffer), "socket");
          if (parsed === "expired") outcome = parsed;
          else page(parsed);
        } catch (err) {
          outcome = err as Error;
        }
        if (outcome) ws.close();
      };
      // An error is followed by a close, which says what it meant.
      ws.onerror = () => {};
      ws.onclose = (e) => {
        signal?.removeEventListener("abort", stop);
        if (signal?.aborted) reject(signal.reason);
        else if (outcome instanceof Error) reject(outcome);
        else if (outcome) resolve(outcome);
        else if (!opened) resolve("refused");
        // 1000: the manager ended it (its feed closed); 1001: it went away (a shutdown).
        else if (e.code === 1000 || e.code === 1001) resolve("ended");
        else {
          reject(
            new ManagerUnavailableError(
              `The feed socket from the manager at ${this.url} broke off (close ${e.code}${
                e.reason ? `: ${e.reason}` : ""
              })`,
            ),
          );
        }
      };
    });
  }

  close(): void {
    this.client?.close();
  }

  /** Any API call: the JSON answer, or ManagerError / ManagerUnavailableError. */
  request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    return this.call(method, path, body, signal);
  }

  /** One call, tried again while the manager answers 429 (THROTTLE_RETRY). */
  private call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    return retry((attempt) => this.once<T>(method, path, body, signal, attempt), {
      ...THROTTLE_RETRY,
      retryable: (err) => err instanceof ManagerThrottledError,
      waitAfter: (err, backoffMs) =>
        Math.min(
          Math.max((err as ManagerThrottledError).retryAfterMs, backoffMs),
          THROTTLE_RETRY.maxMs,
        ),
      clock: this.clock,
      signal,
    });
  }

  private async once<T>(
    method: string,
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    attempt: number,
  ): Promise<T> {
    return this.answer(await this.send(method, path, body, signal), method, path, attempt);
  }

  /** Sends one request; ManagerUnavailableError when the manager cannot be reached. */
  private async send(
    method: string,
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    try {
      return await fetch(`${this.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        client: this.client,
        signal,
      });
    } catch (err) {
      if (signal?.aborted) throw err;
      // fetch only says "fetch failed"; the cause says why, and "(Connect)" when no connection was made.
      const why = ((err as Error).cause as Error | undefined)?.message ?? (err as Error).message;
      throw new ManagerUnavailableError(
        `The manager at ${this.socket ?? this.url} is not reachable (${why})`,
        { cause: err, notSent: /client error \(Connect\)/.test(why) },
      );
    }
  }

  /** The answer's JSON, or the error it says (ManagerError, ManagerUnavailableError, 429). */
  private async answer<T>(
    res: Response,
    method: string,
    path: string,
    attempt: number,
  ): Promise<T> {
    const text = await res.text();
    if (res.ok) return (text ? JSON.parse(text) : undefined) as T;
    let parsed: ErrorBody | undefined;
    try {
      parsed = JSON.parse(text);
    } catch { /* not our error shape */ }
    const e = parsed?.error;
    if (res.status >= 500 && res.status !== 501) {
      throw new ManagerUnavailableError(
        `The manager at ${this.url} failed ${method} ${path}: ${res.status} ${
          e?.message ?? text.slice(0, 200)
        }`,
      );
    }
    if (res.status === 429) {
      throw new ManagerThrottledError(
        `The manager at ${this.url} refused ${method} ${path} ${attempt} ${
          attempt === 1 ? "time" : "tries in a row"
        }, its caller over a limit: ${e?.message ?? text.slice(0, 200)}`,
        retryAfterMs(res.headers.get("retry-after")),
        attempt,
      );
    }
    throw new ManagerError(
      res.status,
      e?.code ?? "unknown",
      e?.message ?? `${res.status} ${text.slice(0, 200)}`,
      e?.field,
    );
  }
}

const enc = encodeURIComponent;
const DECODER = new TextDecoder();

/** Bytes one read of a streamed answer takes at most (a page of one change is under 1 KB). */
const STREAM_READ_BYTES = 16 * 1024;

/**
 * The lines of a streamed answer, as they arrive, read into one buffer of its own (the default
 * reader allocates 64 KiB a read: most of a follower's cost per page, measured in the
 * convergence benchmark).
 */
async function* ndjsonLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const reader = body.getReader({ mode: "byob" });
  let buffer = new Uint8Array(STREAM_READ_BYTES);
  let rest = "";
  try {
    for (;;) {
      const { done, value } = await reader.read(buffer);
      if (done || !value) return;
      buffer = new Uint8Array(value.buffer);
      rest += decoder.decode(value, { stream: true });
      for (let at = rest.indexOf("\n"); at >= 0; at = rest.indexOf("\n")) {
        const line = rest.slice(0, at);
        rest = rest.slice(at + 1);
        if (line.trim() !== "") yield line;
      }
    }
  } finally {
    // Left before its end (an error line, the follower stopping): the answer is let go.
    reader.cancel().catch(() => {});
  }
}

/** Retry-After's wait in milliseconds: seconds, or an HTTP date; 0 when absent or unreadable. */
function retryAfterMs(header: string | null): number {
  if (header === null) return 0;
  const seconds = /^\d+$/.test(header.trim()) ? Number(header) : NaN;
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - Date.now();
  return Number.isFinite(ms) ? Math.max(0, ms) : 0;
}

function portPath(tenant: string, network: string, id: string): string {
  return `/api/v1/tenants/${enc(tenant)}/networks/${enc(network)}/ports/${enc(id)}`;
}
