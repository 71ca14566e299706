/**
 * A small etcd v3 client over etcd's JSON gateway (POST /v3/...): no gRPC stack, TLS with client
 * certificates through Deno's HTTP client, user/password auth, and fail-over between endpoints.
 * Keys and values travel as base64; 64-bit numbers as decimal strings.
 */
import { StoreUnavailableError } from "./store.ts";

export interface EtcdOptions {
  endpoints: string[];
  /** PEM texts (not paths): the CA that signed etcd's certificate, and a client certificate. */
  ca?: string;
  cert?: string;
  key?: string;
  username?: string;
  password?: string;
  /** Per operation, across all endpoints tried. */
  timeoutMs?: number;
}

/** An error etcd answered (as opposed to not answering). */
export class EtcdError extends Error {
  constructor(readonly endpoint: string, readonly code: number, message: string) {
    super(message);
    this.name = "EtcdError";
  }
}

/** gRPC codes etcd uses when it cannot serve right now (no leader, leader changed, timeouts). */
const UNAVAILABLE = 14;
const DEADLINE = 4;
const UNAUTHENTICATED = 16;

export interface Header {
  cluster_id?: string;
  member_id?: string;
  revision?: string;
}

export interface RawKv {
  key: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  version?: string;
}

export class EtcdClient {
  private preferred = 0;
  private token: string | undefined;
  private readonly http: Deno.HttpClient | undefined;
  readonly timeoutMs: number;

  constructor(readonly options: EtcdOptions) {
    if (options.endpoints.length === 0) throw new Error("etcd needs at least one endpoint");
    this.timeoutMs = options.timeoutMs ?? 5000;
    const tls: Deno.CreateHttpClientOptions & Partial<Deno.TlsCertifiedKeyPem> = {};
    if (options.ca) tls.caCerts = [options.ca];
    if (options.cert && options.key) Object.assign(tls, { cert: options.cert, key: options.key });
    this.http = Object.keys(tls).length ? Deno.createHttpClient(tls) : undefined;
  }

  /**
   * One unary call, failing over to the next endpoint when one cannot serve it, and going round
   * the endpoints again until the deadline: a leader election (a member died) makes every member
   * refuse or stall for a while, and a request that outlasts it should not fail. Each try gets a
   * slice of the deadline, so one stalled member cannot use it all.
   */
  // deno-lint-ignore no-explicit-any
  async call<T = any>(path: string, body: unknown): Promise<T> {
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const slice = Math.max(250, Math.floor(this.timeoutMs / 3));
    const n = this.options.endpoints.length;
    /** What the last round that tried anything met, for the message. */
    let reported: string[] = [];
    for (let pass = 0; !deadline.aborted; pass++) {
      if (pass > 0) await pause(Math.min(100 * pass, 500), deadline);
      const failures: string[] = [];
      for (let i = 0; i < n && !deadline.aborted; i++) {
        const index = (this.preferred + i) % n;
        const endpoint = this.options.endpoints[index];
        try {
          const signal = AbortSignal.any([deadline, AbortSignal.timeout(slice)]);
          const res = await this.post(endpoint, path, body, signal, true);
          const json = await res.json();
          if (!res.ok) throw errorOf(endpoint, json, res.status);
          this.preferred = index;
          return json as T;
        } catch (err) {
          if (err instanceof EtcdError && !canFailOver(err)) throw err;
          failures.push(`${endpoint}: ${describe(err)}`);
        }
      }
      if (failures.length > 0) reported = failures;
    }
    const failures = [...reported, `no answer within ${this.timeoutMs} ms`];
    throw new StoreUnavailableError(
      `etcd cannot serve the request (${failures.join("; ")}); check that etcd runs, that ` +
        "store.etcd.endpoints name its members, and that a majority of members is up",
    );
  }

  /**
   * A streaming call (watch): the messages as they come. Ends when etcd closes the stream or
   * `signal` aborts; the first endpoint that accepts the call serves the whole stream.
   */
  // deno-lint-ignore no-explicit-any
  async *stream(path: string, body: unknown, signal: AbortSignal): AsyncGenerator<any> {
    const res = await this.open(path, body, signal);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (err) {
          if (signal.aborted) return;
          throw new StoreUnavailableError(`etcd watch stream broke: ${describe(err)}`);
        }
        if (chunk.done) return;
        buffer += chunk.value;
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          const msg = JSON.parse(line);
          if (msg.error) throw errorOf("watch", msg.error, 0);
          yield msg.result;
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  private async open(path: string, body: unknown, signal: AbortSignal): Promise<Response> {
    const failures: string[] = [];
    const n = this.options.endpoints.length;
    for (let i = 0; i < n; i++) {
      const index = (this.preferred + i) % n;
      const endpoint = this.options.endpoints[index];
      try {
        const res = await this.post(endpoint, path, body, signal, true);
        if (!res.ok) throw errorOf(endpoint, await res.json(), res.status);
        return res;
      } catch (err) {
        if (signal.aborted) throw err;
        if (err instanceof EtcdError && !canFailOver(err)) throw err;
        failures.push(`${endpoint}: ${describe(err)}`);
      }
    }
    throw new StoreUnavailableError(`etcd cannot serve a watch (${failures.join("; ")})`);
  }

  private async post(
    endpoint: string,
    path: string,
    body: unknown,
    signal: AbortSignal,
    mayAuthenticate: boolean,
  ): Promise<Response> {
    if (this.options.username && !this.token) await this.authenticate(endpoint, signal);
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.token) headers.authorization = this.token;
    const res = await fetch(`${endpoint}${path}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal,
      client: this.http,
    });
    if (res.status === 401 && this.options.username && mayAuthenticate) {
      // The token expired (etcd's simple tokens live 5 minutes): sign in again, once.
      await res.body?.cancel();
      this.token = undefined;
      return this.post(endpoint, path, body, signal, false);
    }
    return res;
  }

  private async authenticate(endpoint: string, signal: AbortSignal): Promise<void> {
    const res = await fetch(`${endpoint}/v3/auth/authenticate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: this.options.username, password: this.options.password ?? "" }),
      signal,
      client: this.http,
    });
    const json = await res.json();
    if (!res.ok) {
      const err = errorOf(endpoint, json, res.status);
      throw new EtcdError(
        endpoint,
        err.code,
        `etcd refused user "${this.options.username}": ${err.message}; check store.etcd.username and password`,
      );
    }
    this.token = json.token;
  }

  close(): void {
    this.http?.close();
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

function canFailOver(err: EtcdError): boolean {
  return err.code === UNAVAILABLE || err.code === DEADLINE;
}

// deno-lint-ignore no-explicit-any
function errorOf(endpoint: string, json: any, status: number): EtcdError {
  const code = typeof json?.code === "number"
    ? json.code
    : status === 503
    ? UNAVAILABLE
    : status === 401
    ? UNAUTHENTICATED
    : 2;
  const message = String(json?.message ?? json?.error ?? `HTTP ${status}`);
  return new EtcdError(endpoint, code, message);
}

function describe(err: unknown): string {
  if (err instanceof DOMException && err.name === "TimeoutError") return "timed out";
  if (err instanceof EtcdError) return err.message;
  // fetch says "fetch failed"; the reason is in its cause.
  let msg = "";
  for (let e: unknown = err; e; e = (e as Error).cause) {
    msg += ` ${e instanceof Error ? e.message : String(e)}`;
  }
  if (/refused/i.test(msg)) return "connection refused";
  if (/reset|closed|broken pipe|connection error/i.test(msg)) return "connection lost";
  if (/certificate|tls|handshake/i.test(msg)) return `TLS failed:${msg}`;
  return msg.trim().split("\n")[0];
}

const b64 = (bytes: Uint8Array): string => bytes.toBase64();
export const toB64 = b64;
export const fromB64 = (text: string | undefined): Uint8Array =>
  text ? Uint8Array.fromBase64(text) : new Uint8Array();
