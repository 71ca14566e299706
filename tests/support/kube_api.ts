/**
 * A stand-in Kubernetes API server for tests: real HTTP on loopback, the real wire protocol, so that
 * the monitor and the agent run through the real `@kubernetes/client-node` against it. It keeps
 * namespaces, nodes, pods, events and Knitter's two custom resources in memory and serves what the
 * components use: list with a resourceVersion, watch streams (ADDED / MODIFIED / DELETED / BOOKMARK,
 * an ERROR with 410 Gone for a resourceVersion older than the bounded history), GET, POST, PUT,
 * PATCH (merge and strategic merge of maps) of objects and of the status subresource, DELETE with
 * finalizers, bearer tokens, lists in pages (`limit`, `continue`, `remainingItemCount`), lists and
 * watches by `fieldSelector` (equality: an agent follows its own node's pods). Tests
 * inject what real API servers do: a watch closed cleanly, cut abruptly, dropped without a close
 * (half-open: nothing more is sent, the socket stays open), stalled and resumed, ended with an
 * ERROR 410 Expired; refused watches; an expired (compacted) history; a restart of the server.
 */

export interface ResourceDef {
  group: string;
  version: string;
  kind: string;
  namespaced: boolean;
  /** PATCH / PUT of the object leave .status alone; the status subresource changes only it. */
  statusSubresource: boolean;
  /** metadata.generation counts spec changes (custom resources). */
  generation: boolean;
}

const core = (kind: string, namespaced: boolean, statusSubresource = false): ResourceDef => ({
  group: "",
  version: "v1",
  kind,
  namespaced,
  statusSubresource,
  generation: false,
});
const knitter = (kind: string): ResourceDef => ({
  group: "knitter.io",
  version: "v1alpha1",
  kind,
  namespaced: true,
  statusSubresource: true,
  generation: true,
});

/** What the stand-in serves, by plural name. */
export const RESOURCES: Record<string, ResourceDef> = {
  namespaces: core("Namespace", false),
  nodes: core("Node", false, true),
  pods: core("Pod", true, true),
  events: core("Event", true),
  networks: knitter("Network"),
  ipgroups: knitter("IPGroup"),
  routers: knitter("Router"),
  mirrors: knitter("Mirror"),
  services: core("Service", true),
  endpointslices: {
    group: "discovery.k8s.io",
    version: "v1",
    kind: "EndpointSlice",
    namespaced: true,
    statusSubresource: false,
    generation: false,
  },
  // The Network Plumbing Working Group's policy for secondary networks (monitor/mnp_types.ts).
  "multi-networkpolicies": {
    group: "k8s.cni.cncf.io",
    version: "v1beta1",
    kind: "MultiNetworkPolicy",
    namespaced: true,
    statusSubresource: false,
    generation: true,
  },
  // The Network Plumbing Working Group's persistent address (monitor/ipam_claims.ts).
  ipamclaims: {
    group: "k8s.cni.cncf.io",
    version: "v1alpha1",
    kind: "IPAMClaim",
    namespaced: true,
    statusSubresource: true,
    generation: true,
  },
  // KubeVirt's live migration (monitor/kubevirt_migrations.ts); its status is KubeVirt's to write.
  virtualmachineinstancemigrations: {
    group: "kubevirt.io",
    version: "v1",
    kind: "VirtualMachineInstanceMigration",
    namespaced: true,
    statusSubresource: false,
    generation: true,
  },
};

// deno-lint-ignore no-explicit-any
export type KubeObject = { metadata: Record<string, any>; [key: string]: any };

export type WatchType = "ADDED" | "MODIFIED" | "DELETED";

interface Change {
  rv: number;
  resource: string;
  type: WatchType;
  object: KubeObject;
}

interface Watcher {
  resource: string;
  namespace?: string;
  /** Its `fieldSelector`: only objects with these field values. */
  fields: FieldSelector;
  send(line: unknown): void;
  /** A clean end: the response finishes (a stalled watch ends when resumed, unless `now`). */
  close(now?: boolean): void;
  /** An abrupt end: the response fails mid-stream, the connection is cut. */
  abort(): void;
  /** Half-open: nothing is sent any more, events and bookmarks included; the socket stays open. */
  drop(): void;
  /** Events and bookmarks are held back until resume(). */
  stall(): void;
  resume(): void;
}

export interface KubeApiOptions {
  /** Bearer tokens and who they stand for; requests without one of them get 401. */
  tokens: Record<string, string>;
  /** Changes kept for watches to resume from; older resourceVersions get 410 Gone. */
  historyLimit?: number;
  /** How often a watch that allows bookmarks gets one; 0: never (servers need not send any). */
  bookmarkMs?: number;
  /**
   * Also serve on this unix socket (as `kubectl proxy --unix-socket` would): agents run in their
   * node's network namespace, where the loopback address is not this one's.
   */
  socket?: string;
}

export interface RequestRecord {
  user: string;
  method: string;
  path: string;
  query: string;
}

const encoder = new TextEncoder();

export class KubeApi implements AsyncDisposable {
  readonly url: string;
  /** The requests served, with who made them (the last 10,000). */
  readonly requests: RequestRecord[] = [];
  historyLimit: number;
  private readonly store = new Map<string, Map<string, KubeObject>>();
  private history: Change[] = [];
  /** Changes up to this resourceVersion are no longer in the history. */
  private compacted = 0;
  private rv = 1000;
  private refusals = 0;
  private listGate?: PromiseWithResolvers<void>;
  /** The one resource whose lists hang (all when undefined). */
  private listGateOf?: string;
  private readonly watchers = new Set<Watcher>();
  /** Watches dropped half-open: never written to again, closed only when the server stops. */
  private readonly dropped = new Set<Watcher>();
  private servers: Deno.HttpServer[] = [];
  private readonly port: number;

  private constructor(private readonly options: KubeApiOptions) {
    this.historyLimit = options.historyLimit ?? 100_000;
    for (const r of Object.keys(RESOURCES)) this.store.set(r, new Map());
    this.port = this.listen(0);
    this.url = `http://127.0.0.1:${this.port}`;
  }

  private listen(port: number): number {
    const handler = (req: Request) => this.handle(req);
    // A watch the stand-in cuts on purpose is not an error worth printing.
    const onError = (err: unknown) => {
      if (!(err instanceof WatchCut)) console.error("stand-in API server:", err);
      return status(500, "InternalError", String(err));
    };
    const tcp = Deno.serve({ hostname: "127.0.0.1", port, onListen: () => {}, onError }, handler);
    this.servers = [tcp];
    if (this.options.socket) {
      this.servers.push(
        Deno.serve({ path: this.options.socket, onListen: () => {}, onError }, handler),
      );
    }
    return (tcp.addr as Deno.NetAddr).port;
  }

  static start(options: KubeApiOptions): KubeApi {
    return new KubeApi(options);
  }

  /** A kubeconfig for the given token, as a file the components read. */
  async writeKubeconfig(path: string, token: string): Promise<string> {
    const doc = {
      apiVersion: "v1",
      kind: "Config",
      // Plain HTTP on loopback: the client library wants this said explicitly.
      clusters: [{
        name: "stand-in",
        cluster: { server: this.url, "insecure-skip-tls-verify": true },
      }],
      users: [{ name: "user", user: { token } }],
      contexts: [{ name: "stand-in", context: { cluster: "stand-in", user: "user" } }],
      "current-context": "stand-in",
    };
    // JSON is YAML: the client's loader reads it as is.
    await Deno.writeTextFile(path, JSON.stringify(doc, null, 2));
    return path;
  }

  // ---- what tests do directly (as the cluster's other controllers would)

  create(resource: string, obj: KubeObject): KubeObject {
    return structuredClone(this.doCreate(resource, obj.metadata.namespace, structuredClone(obj)));
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const o = this.objects(resource).get(key(namespace, name));
    return o && structuredClone(o);
  }

  list(resource: string, namespace?: string): KubeObject[] {
    return [...this.objects(resource).values()]
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .map((o) => structuredClone(o));
  }

  /** Changes an object as a controller would (a spec edit bumps the generation). */
  update(
    resource: string,
    namespace: string | undefined,
    name: string,
    edit: (o: KubeObject) => void,
  ): KubeObject {
    const current = this.mustGet(resource, namespace, name);
    const next = structuredClone(current);
    edit(next);
    return structuredClone(this.write(resource, current, next, "object"));
  }

  delete(resource: string, namespace: string | undefined, name: string): void {
    this.doDelete(resource, this.mustGet(resource, namespace, name));
  }

  /** Ends every open watch cleanly, as a server-side timeout does; answers how many. */
  breakWatches(): number {
    const n = this.watchers.size;
    for (const w of [...this.watchers]) w.close(true);
    this.watchers.clear();
    return n;
  }

  /** Cuts every open watch mid-stream (an error, not a clean end); answers how many. */
  abortWatches(): number {
    const n = this.watchers.size;
    for (const w of [...this.watchers]) w.abort();
    this.watchers.clear();
    return n;
  }

  /**
   * Drops every open watch without closing it, as a load balancer or NAT that forgot the
   * connection does: the server stops sending (no event, no bookmark, ever), the client's socket
   * stays open and hears nothing. Answers how many.
   */
  dropWatches(): number {
    const n = this.watchers.size;
    for (const w of [...this.watchers]) w.drop();
    return n;
  }

  /** Holds back every event and bookmark of the open watches until resumeWatches(). */
  stallWatches(): number {
    for (const w of this.watchers) w.stall();
    return this.watchers.size;
  }

  resumeWatches(): void {
    for (const w of this.watchers) w.resume();
  }

  /**
   * Ends every open watch with an ERROR 410 Expired event, as an API server whose watch cache
   * fell behind does, and forgets the history so that resuming from any earlier version is 410 too.
   */
  expireWatches(): number {
    const n = this.watchers.size;
    const rv = this.rv;
    for (const w of [...this.watchers]) {
      w.send({
        type: "ERROR",
        object: statusBody(410, "Expired", `too old resource version: ${rv}`),
      });
      w.close(true);
    }
    this.watchers.clear();
    this.compact();
    return n;
  }

  /**
   * Restarts the server: every connection is cut (watches end abruptly, dropped ones too), nothing
   * answers for `downMs`, then it serves again on the same address with the same objects and
   * resourceVersions (etcd keeps them).
   */
  async restart(downMs = 0): Promise<void> {
    for (const w of [...this.watchers, ...this.dropped]) w.abort();
    this.watchers.clear();
    this.dropped.clear();
    await Promise.all(this.servers.map((s) => s.shutdown()));
    if (this.options.socket) await Deno.remove(this.options.socket).catch(() => {});
    await new Promise((r) => setTimeout(r, downMs));
    this.listen(this.port);
  }

  /**
   * While on, lists (GET of a collection, not a watch) get no answer at all, as from a server whose
   * connection dropped mid-request; turned off, the held ones are answered. With `resource`, only
   * that resource's lists (as "pods"), to make one watch list late.
   */
  hangLists(on: boolean, resource?: string): void {
    if (on) {
      this.listGate ??= Promise.withResolvers<void>();
      this.listGateOf = resource;
    } else {
      this.listGate?.resolve();
      this.listGate = undefined;
    }
  }

  /** The next `n` watch requests are refused with 503, as an overloaded API server does. */
  refuseWatches(n: number): void {
    this.refusals = n;
  }

  get openWatches(): number {
    return this.watchers.size;
  }

  /** Forgets the history: a watch resuming from any earlier resourceVersion gets 410 Gone. */
  compact(): void {
    this.history = [];
    this.compacted = this.rv;
  }

  get resourceVersion(): string {
    return String(this.rv);
  }

  async close(): Promise<void> {
    this.breakWatches();
    for (const w of [...this.dropped]) w.close(true);
    this.dropped.clear();
    await Promise.all(this.servers.map((s) => s.shutdown()));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  // ---- HTTP

  private async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const user = this.options.tokens[req.headers.get("authorization")?.replace(/^Bearer\s+/i, "")!];
    if (!user) return status(401, "Unauthorized", "Unauthorized");
    this.requests.push({ user, method: req.method, path: url.pathname, query: url.search });
    if (this.requests.length > 10_000) this.requests.splice(0, 1000);
    const path = parsePath(url.pathname);
    if (!path) return status(404, "NotFound", `the server could not find ${url.pathname}`);
    try {
      return await this.route(req, url, path);
    } catch (err) {
      if (err instanceof ApiStatus) return status(err.code, err.reason, err.message);
      throw err;
    }
  }

  private async route(req: Request, url: URL, p: ParsedPath): Promise<Response> {
    const { resource, namespace, name, sub } = p;
    const def = RESOURCES[resource];
    if (sub !== undefined && (sub !== "status" || !def.statusSubresource)) {
      throw new ApiStatus(404, "NotFound", `${resource} has no subresource "${sub}"`);
    }
    switch (req.method) {
      case "GET":
        if (name !== undefined) return json(200, this.mustGet(resource, namespace, name));
        if (["true", "1"].includes(url.searchParams.get("watch") ?? "")) {
          if (this.refusals > 0) {
            this.refusals--;
            throw new ApiStatus(503, "ServiceUnavailable", "the stand-in refuses this watch");
          }
          return this.watch(resource, namespace, url.searchParams);
        }
        if (this.listGate && (this.listGateOf ?? resource) === resource) {
          await this.listGate.promise;
        }
        return json(200, this.listBody(resource, namespace, url.searchParams));
      case "POST": {
        if (name !== undefined) throw new ApiStatus(405, "MethodNotAllowed", "POST to a name");
        const body = await readBody(req);
        if (def.namespaced && namespace === undefined) {
          throw new ApiStatus(404, "NotFound", `POST ${resource} needs a namespace in the path`);
        }
        return json(201, this.doCreate(resource, namespace, body));
      }
      case "PUT": {
        const current = this.mustGet(resource, namespace, name!);
        const body = await readBody(req);
        const rv = body.metadata?.resourceVersion;
        if (rv !== undefined && rv !== current.metadata.resourceVersion) {
          throw conflict(resource, name!);
        }
        return json(200, this.write(resource, current, body, sub === "status" ? "status" : "put"));
      }
      case "PATCH": {
        const current = this.mustGet(resource, namespace, name!);
        const type = req.headers.get("content-type") ?? "";
        if (!/merge-patch\+json|strategic-merge-patch\+json/.test(type)) {
          throw new ApiStatus(
            415,
            "UnsupportedMediaType",
            `the stand-in takes merge and strategic merge patches, not "${type}"`,
          );
        }
        const patch = await readBody(req);
        const rv = patch.metadata?.resourceVersion;
        if (rv !== undefined && rv !== current.metadata.resourceVersion) {
          throw conflict(resource, name!);
        }
        const next = mergePatch(structuredClone(current), patch) as KubeObject;
        return json(200, this.write(resource, current, next, sub === "status" ? "status" : "put"));
      }
      case "DELETE": {
        const current = this.mustGet(resource, namespace, name!);
        return json(200, this.doDelete(resource, current));
      }
    }
    throw new ApiStatus(405, "MethodNotAllowed", `${req.method} is not served`);
  }

  /** A list, whole or in pages (`limit`, `continue`: ordered by namespace and name, as etcd). */
  private listBody(resource: string, namespace: string | undefined, q: URLSearchParams) {
    const def = RESOURCES[resource];
    const fields = fieldSelector(q);
    let items = [...this.objects(resource).values()].filter((o) =>
      (namespace === undefined || o.metadata.namespace === namespace) && hasFields(o, fields)
    );
    const limit = Number(q.get("limit") ?? 0);
    const token = q.get("continue");
    const metadata: Record<string, unknown> = { resourceVersion: String(this.rv) };
    if (limit > 0 || token) {
      const sorted = items.map((o) => [key(o.metadata.namespace, o.metadata.name), o] as const)
        .sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0);
      const after = token ? atob(token) : "";
      const rest = sorted.filter(([k]) => k > after);
      const page = limit > 0 ? rest.slice(0, limit) : rest;
      items = page.map(([, o]) => o);
      if (page.length < rest.length) {
        metadata.continue = btoa(page[page.length - 1][0]);
        metadata.remainingItemCount = rest.length - page.length;
      }
    }
    return { kind: `${def.kind}List`, apiVersion: apiVersion(def), metadata, items };
  }

  /** A watch: the changes after the given resourceVersion (all objects when none), then live. */
  private watch(resource: string, namespace: string | undefined, q: URLSearchParams): Response {
    const from = q.get("resourceVersion") ?? "";
    const bookmarks = q.get("allowWatchBookmarks") === "true";
    const timeout = Number(q.get("timeoutSeconds") ?? 0);
    const def = RESOURCES[resource];
    const fields = fieldSelector(q);
    let watcher!: Watcher;
    let timers: ReturnType<typeof setTimeout>[] = [];
    const stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        let open = true;
        let stalled = false;
        let closeWhenResumed = false;
        let dropped = false;
        let held: unknown[] = [];
        const finish = () => {
          open = false;
          for (const t of timers) clearInterval(t);
          timers = [];
          this.watchers.delete(watcher);
          this.dropped.delete(watcher);
        };
        const write = (line: unknown) => {
          try {
            controller.enqueue(encoder.encode(`${JSON.stringify(line)}\n`));
          } catch { /* the client went away */ }
        };
        watcher = {
          resource,
          namespace,
          fields,
          send: (line) => {
            if (!open) return;
            if (stalled) held.push(line);
            else write(line);
          },
          close: (now = false) => {
            if (!open) return;
            if (stalled && !dropped && !now) {
              // A stalled server does not end its watches either (its timeout included).
              closeWhenResumed = true;
              return;
            }
            finish();
            try {
              controller.close();
            } catch { /* already gone */ }
          },
          abort: () => {
            if (!open) return;
            finish();
            controller.error(new WatchCut());
          },
          drop: () => {
            // Never written to again, but the response stays open until the server stops.
            dropped = true;
            for (const t of timers) clearInterval(t);
            timers = [];
            this.watchers.delete(watcher);
            this.dropped.add(watcher);
            stalled = true;
            held = [];
            watcher.send = () => {};
          },
          stall: () => (stalled = true),
          resume: () => {
            if (dropped) return;
            stalled = false;
            const lines = held;
            held = [];
            for (const l of lines) write(l);
            if (closeWhenResumed) watcher.close();
          },
        };
        const fromRv = Number(from);
        if (from !== "" && from !== "0" && fromRv < this.compacted) {
          watcher.send({
            type: "ERROR",
            object: statusBody(
              410,
              "Expired",
              `too old resource version: ${from} (${this.compacted})`,
            ),
          });
          open = false;
          controller.close();
          return;
        }
        if (from === "" || from === "0") {
          for (const o of this.objects(resource).values()) {
            if (
              (namespace === undefined || o.metadata.namespace === namespace) &&
              hasFields(o, fields)
            ) {
              watcher.send({ type: "ADDED", object: o });
            }
          }
        } else {
          for (const c of this.history) {
            if (c.rv > fromRv && matches(c, resource, namespace, fields)) {
              watcher.send({ type: c.type, object: c.object });
            }
          }
        }
        this.watchers.add(watcher);
        const every = this.options.bookmarkMs ?? 5000;
        if (bookmarks && every > 0) {
          timers.push(setInterval(() =>
            watcher.send({
              type: "BOOKMARK",
              object: {
                kind: def.kind,
                apiVersion: apiVersion(def),
                metadata: { resourceVersion: String(this.rv) },
              },
            }), every));
        }
        if (timeout > 0) timers.push(setTimeout(() => watcher.close(), timeout * 1000));
      },
      cancel: () => watcher.close(true),
    });
    return new Response(stream, {
      status: 200,
      headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
    });
  }

  // ---- the store

  private objects(resource: string): Map<string, KubeObject> {
    const m = this.store.get(resource);
    if (!m) throw new ApiStatus(404, "NotFound", `the stand-in does not serve "${resource}"`);
    return m;
  }

  private mustGet(resource: string, namespace: string | undefined, name: string): KubeObject {
    const o = this.objects(resource).get(key(namespace, name));
    if (!o) {
      throw new ApiStatus(404, "NotFound", `${resource} "${name}" not found`);
    }
    return o;
  }

  private doCreate(resource: string, namespace: string | undefined, obj: KubeObject): KubeObject {
    const def = RESOURCES[resource];
    const meta = obj.metadata ??= {};
    if (!meta.name && meta.generateName) {
      meta.name = `${meta.generateName}${crypto.randomUUID().slice(0, 5)}`;
    }
    if (!meta.name) throw new ApiStatus(422, "Invalid", "metadata.name: Required value");
    if (def.namespaced) {
      meta.namespace = namespace ?? meta.namespace;
      const ns = this.objects("namespaces").get(key(undefined, meta.namespace));
      if (!ns) throw new ApiStatus(404, "NotFound", `namespaces "${meta.namespace}" not found`);
      if (ns.metadata.deletionTimestamp) {
        throw new ApiStatus(
          403,
          "Forbidden",
          `unable to create new content in namespace ${meta.namespace} because it is being terminated`,
        );
      }
    }
    const k = key(meta.namespace, meta.name);
    if (this.objects(resource).has(k)) {
      throw new ApiStatus(409, "AlreadyExists", `${resource} "${meta.name}" already exists`);
    }
    obj.kind = def.kind;
    obj.apiVersion = apiVersion(def);
    meta.uid = crypto.randomUUID();
    meta.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    if (def.generation) meta.generation = 1;
    if (resource === "namespaces") obj.status = { phase: "Active" };
    return this.commit(resource, "ADDED", obj);
  }

  /** Writes the next version of an object; `part` says what a request may change of it. */
  private write(
    resource: string,
    current: KubeObject,
    next: KubeObject,
    part: "object" | "put" | "status",
  ): KubeObject {
    const def = RESOURCES[resource];
    const out = structuredClone(current);
    if (part === "status") out.status = next.status;
    else {
      const keep = ["uid", "creationTimestamp", "deletionTimestamp", "generation", "namespace"];
      out.metadata = { ...next.metadata };
      for (const k of keep) {
        if (current.metadata[k] !== undefined) out.metadata[k] = current.metadata[k];
      }
      for (const [k, v] of Object.entries(next)) {
        if (k === "metadata" || (k === "status" && def.statusSubresource && part === "put")) {
          continue;
        }
        out[k] = v;
      }
      for (const k of Object.keys(out)) if (!(k in next) && k !== "status") delete out[k];
      if (def.generation && JSON.stringify(out.spec) !== JSON.stringify(current.spec)) {
        out.metadata.generation = (current.metadata.generation ?? 1) + 1;
      }
    }
    if (JSON.stringify(out) === JSON.stringify(current)) return current;
    if (out.metadata.deletionTimestamp && !(out.metadata.finalizers?.length > 0)) {
      return this.remove(resource, out);
    }
    return this.commit(resource, "MODIFIED", out);
  }

  private doDelete(resource: string, obj: KubeObject): KubeObject {
    if (resource === "namespaces") return this.deleteNamespace(obj);
    if (obj.metadata.finalizers?.length > 0) {
      if (obj.metadata.deletionTimestamp) return obj;
      const next = structuredClone(obj);
      next.metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
      return this.commit(resource, "MODIFIED", next);
    }
    return this.remove(resource, obj);
  }

  /** A namespace terminates: its objects go, then it does (once finalizers let them all go). */
  private deleteNamespace(ns: KubeObject): KubeObject {
    const name = ns.metadata.name;
    if (!ns.metadata.deletionTimestamp) {
      const next = structuredClone(ns);
      next.metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
      next.status = { phase: "Terminating" };
      ns = this.commit("namespaces", "MODIFIED", next);
    }
    for (const [r, def] of Object.entries(RESOURCES)) {
      if (!def.namespaced) continue;
      for (const o of [...this.objects(r).values()]) {
        if (o.metadata.namespace === name) this.doDelete(r, o);
      }
    }
    this.finishNamespace(name);
    return ns;
  }

  private finishNamespace(name: string): void {
    const ns = this.objects("namespaces").get(key(undefined, name));
    if (!ns?.metadata.deletionTimestamp) return;
    for (const [r, def] of Object.entries(RESOURCES)) {
      if (!def.namespaced) continue;
      for (const o of this.objects(r).values()) if (o.metadata.namespace === name) return;
    }
    this.remove("namespaces", ns);
  }

  private remove(resource: string, obj: KubeObject): KubeObject {
    this.objects(resource).delete(key(obj.metadata.namespace, obj.metadata.name));
    const gone = this.commit(resource, "DELETED", obj, false);
    if (obj.metadata.namespace) this.finishNamespace(obj.metadata.namespace);
    return gone;
  }

  /** Stamps a new resourceVersion, keeps the object, records the change and tells the watches. */
  private commit(resource: string, type: WatchType, obj: KubeObject, keep = true): KubeObject {
    const stamped = structuredClone(obj);
    stamped.metadata.resourceVersion = String(++this.rv);
    if (keep) {
      this.objects(resource).set(key(stamped.metadata.namespace, stamped.metadata.name), stamped);
    }
    const change = { rv: this.rv, resource, type, object: stamped };
    this.history.push(change);
    while (this.history.length > this.historyLimit) this.compacted = this.history.shift()!.rv;
    for (const w of this.watchers) {
      if (matches(change, w.resource, w.namespace, w.fields)) {
        w.send({ type, object: stamped });
      }
    }
    return stamped;
  }
}

// ---- helpers

interface ParsedPath {
  resource: string;
  namespace?: string;
  name?: string;
  sub?: string;
}

/** /api/v1/... and /apis/GROUP/VERSION/...: namespaced or cluster-wide, name, subresource. */
function parsePath(pathname: string): ParsedPath | undefined {
  const segs = pathname.split("/").filter(Boolean).map(decodeURIComponent);
  let rest: string[];
  let group = "";
  if (segs[0] === "api" && segs[1] === "v1") rest = segs.slice(2);
  else if (segs[0] === "apis" && segs.length >= 3) {
    group = segs[1];
    rest = segs.slice(3);
  } else return undefined;
  let out: ParsedPath;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    out = { namespace: rest[1], resource: rest[2], name: rest[3], sub: rest[4] };
  } else out = { resource: rest[0], name: rest[1], sub: rest[2] };
  const def = RESOURCES[out.resource];
  if (!def || def.group !== group || rest.length > 5) return undefined;
  return out;
}

function matches(
  c: Change,
  resource: string,
  namespace?: string,
  fields: FieldSelector = [],
): boolean {
  return c.resource === resource &&
    (namespace === undefined || c.object.metadata.namespace === namespace) &&
    hasFields(c.object, fields);
}

/** `fieldSelector` as the API server takes it, equality only: `spec.nodeName=n1,metadata.name=x`. */
type FieldSelector = [path: string[], value: string][];

function fieldSelector(q: URLSearchParams): FieldSelector {
  const text = q.get("fieldSelector") ?? "";
  return text.split(",").filter(Boolean).map((term) => {
    const m = /^([\w.]+)==?(.*)$/.exec(term);
    if (!m) {
      throw new ApiStatus(400, "BadRequest", `the stand-in takes field = value, not "${term}"`);
    }
    return [m[1].split("."), m[2]];
  });
}

function hasFields(o: KubeObject, fields: FieldSelector): boolean {
  return fields.every(([path, value]) => {
    // deno-lint-ignore no-explicit-any
    const v = path.reduce((at: any, k) => at?.[k], o);
    return String(v ?? "") === value;
  });
}

function key(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

function apiVersion(def: ResourceDef): string {
  return def.group ? `${def.group}/${def.version}` : def.version;
}

/** RFC 7386, which is also what a strategic merge patch does to maps; lists are replaced. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target)
      ? target as Record<string, unknown>
      : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

class WatchCut extends Error {
  constructor() {
    super("the stand-in cut this watch");
  }
}

class ApiStatus extends Error {
  constructor(readonly code: number, readonly reason: string, message: string) {
    super(message);
  }
}

function conflict(resource: string, name: string): ApiStatus {
  return new ApiStatus(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
  );
}

function statusBody(code: number, reason: string, message: string) {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
}

function status(code: number, reason: string, message: string): Response {
  return json(code, statusBody(code, reason, message));
}

function json(code: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status: code,
    headers: { "content-type": "application/json" },
  });
}

async function readBody(req: Request): Promise<KubeObject> {
  try {
    return await req.json();
  } catch (err) {
    throw new ApiStatus(400, "BadRequest", `the body is not JSON: ${(err as Error).message}`);
  }
}
