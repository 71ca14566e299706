/**
 * A cluster's tokens (its agents, its monitor) speak in their cluster's names: what they send is
 * scoped to it before any handler reads it, and what they are answered is filtered to what they
 * may see (auth.ts seesPort, seesOwned, clustersMeet) and made relative to their cluster again. app.ts runs
 * both around every route; handlers only ever see scoped names.
 */
import {
  isRemoteCollector,
  type MirrorInfo,
  type MirrorPort,
  type Port,
  type ServiceInfo,
} from "@knitter/common";
import type { z } from "zod";
import {
  type ClusterReach,
  clustersMeet,
  type Principal,
  seesOwned,
  seesPort,
  type TenantOwned,
} from "../auth.ts";
import { ApiError } from "../errors.ts";
import { keys, type NetworkRecord, type NodeRecord, type PortRecord } from "../model.ts";
import type { Ctx } from "./context.ts";
import type { PortConflict } from "../schemas.ts";
import type { FeedPage } from "../feed.ts";
import { EncodedJson } from "../encoded_json.ts";
import { FeedPages } from "../feed_pages.ts";
import { errorLine, type FeedSink, FeedStreams, lineOf, type StreamView } from "../feed_streams.ts";
import { listClusters, reachOf } from "./clusters.ts";
import {
  DEFAULT_CLUSTER,
  fromRelative,
  namesACluster,
  relativeTo,
  scoped,
} from "./cluster_names.ts";

type ClusterPrincipal = Extract<Principal, { cluster: string }>;

function ofCluster(p: Principal): p is ClusterPrincipal {
  return p.scope === "node" || p.scope === "monitor";
}

/** The principal with its cluster's reach loaded (403 when the cluster is not registered). */
export async function withReach(ctx: Ctx, p: Principal): Promise<Principal> {
  if (!ofCluster(p)) return p;
  return { ...p, reach: await reachOf(ctx, p.cluster) };
}

// deno-lint-ignore no-explicit-any
type Loose = any;

/** Scopes the node, port and pod names a cluster's token sent to its cluster (in place). */
export function scopeRequest(
  p: Principal,
  req: { params: Record<string, string>; query: Loose; body: Loose },
): void {
  if (!ofCluster(p)) return;
  const scope = (where: string, name: string) => {
    if (namesACluster(name)) {
      throw new ApiError(
        "forbidden",
        `${where} "${name}" names a cluster: a token of cluster "${p.cluster}" acts in its own cluster only, by bare names`,
        where,
      );
    }
    return scoped(name, p.cluster);
  };
  for (const k of ["node", "port"]) {
    if (req.params[k] !== undefined) req.params[k] = scope(k, req.params[k]);
  }
  if (typeof req.query?.node === "string") req.query.node = scope("query.node", req.query.node);
  if (typeof req.query?.pod === "string") {
    const [namespace, name] = req.query.pod.split("/");
    req.query.pod = `${scope("query.pod", namespace)}/${name}`;
  }
  if (typeof req.body?.node === "string") req.body.node = scope("node", req.body.node);
  // A conflict report names ports of the node's remote view, other clusters' ones included.
  if (Array.isArray(req.body?.items)) {
    for (const item of req.body.items) {
      if (typeof item?.id === "string") item.id = fromRelative(p.cluster, item.id);
      if (typeof item?.with?.id === "string") item.with.id = fromRelative(p.cluster, item.with.id);
    }
  }
}

/**
 * Whether a cluster's token may see a stored port: its own cluster's, or one on a network its
 * cluster may use (the record holds no network type: the network is read for that).
 */
export async function seesRecord(ctx: Ctx, p: Principal, port: PortRecord): Promise<boolean> {
  if (!ofCluster(p) || (port.cluster ?? DEFAULT_CLUSTER) === p.cluster) return true;
  const net = (await ctx.store.get<NetworkRecord>(keys.network(port.networkTenant, port.network)))
    .value;
  return net !== null && seesPort(p, { ...port, type: net.type, physnet: net.physnet });
}

/** The answer as a cluster's token may read it: filtered, names relative to its cluster. */
export async function viewFor(ctx: Ctx, p: Principal, body: unknown): Promise<unknown> {
  if (!ofCluster(p) || body === null || typeof body !== "object") return body;
  const view = new View(ctx, p);
  const b = body as Loose;
  if (Array.isArray(b.items)) return { ...b, items: await view.list(b.items) };
  if (Array.isArray(b.events)) return { ...b, events: await view.events(b.events) };
  return view.one(b);
}

/**
 * A feed cursor as a cluster's token is given it: with the time its cluster was last changed, so
 * that a change (what it may use) expires its cursors and its agents list again (feedFor).
 */
export function cursorFor(p: Principal, cursor: string): string {
  return ofCluster(p) && p.reach ? `${cursor}:${Date.parse(p.reach.updatedAt)}` : cursor;
}

/**
 * The feed after `after` as `p` sees it, encoded. A cluster's token is not answered a page it sees
 * nothing of: it waits on for the rest of its timeout instead, so that a port of one cluster's
 * network does not wake every other cluster's agents for nothing. Its cursor expires when its
 * cluster changed since the cursor was given: what it may see changed, so it lists again.
 */
export async function feedFor(
  ctx: Ctx,
  p: Principal,
  poll: { after: string; timeoutMs: number },
): Promise<EncodedJson | "expired"> {
  const { timeoutMs } = poll;
  let after = feedCursorOf(p, poll.after);
  if (after === undefined) return "expired";
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const page = await ctx.feed.since(after, Math.max(0, deadline - performance.now()));
    if (page === "expired") return page;
    const answer = await pagesOf(ctx).answer(viewKey(p), after, page, () => seenPage(ctx, p, page));
    const done = answer.events > 0 || page.events.length === 0 || performance.now() >= deadline;
    if (done) return answer;
    after = page.cursor;
  }
}

/**
 * The feed after `after` streamed as `p` sees it (feed_streams.ts): first the page after the
 * cursor (empty too: it tells the follower the stream is open), then each page its view sees as it
 * comes, or an empty one every `heartbeatMs`. The stream ends with a feed_expired line when the
 * cursor expires or what the token's cluster may use changes (as feedFor's cursors expire).
 */
export async function feedStreamFor<S extends FeedSink>(
  ctx: Ctx,
  p: Principal,
  poll: {
    after: string;
    heartbeatMs: number;
    /** The follower's sink (a stream, a socket), with its first line queued. */
    sinkOf: (first: Uint8Array) => S;
  },
): Promise<S | "expired"> {
  const after = feedCursorOf(p, poll.after);
  if (after === undefined) return "expired";
  const page = await ctx.feed.since(after, 0);
  if (page === "expired") return page;
  const key = viewKey(p);
  const first = await pagesOf(ctx).answer(key, after, page, () => seenPage(ctx, p, page));
  const view: StreamView = {
    key,
    heartbeatMs: poll.heartbeatMs,
    render: (next) => seenPage(ctx, p, next),
    lapsed: () => lapsedReach(ctx, p),
  };
  const sink = poll.sinkOf(lineOf(first));
  streamsOf(ctx).join(sink, view, page.cursor);
  return sink;
}

/** The feed's own cursor in a cursor given to `p`; undefined when its cluster changed since. */
function feedCursorOf(p: Principal, given: string): string | undefined {
  if (!ofCluster(p)) return given;
  const [epoch, seq, stamp] = given.split(":");
  if (cursorFor(p, `${epoch}:${seq}`) !== `${epoch}:${seq}:${stamp}`) return undefined;
  return `${epoch}:${seq}`;
}

/**
 * Why a stream of `p` must end now: its cluster changed what it may use (it lists again, as a
 * long-poll's cursor would expire), or is gone. Read at each page and heartbeat.
 */
async function lapsedReach(ctx: Ctx, p: Principal): Promise<Uint8Array | undefined> {
  if (!ofCluster(p)) return undefined;
  try {
    const reach = await reachOf(ctx, p.cluster);
    if (JSON.stringify(reach) === JSON.stringify(p.reach)) return undefined;
  } catch (err) {
    return errorLine(err);
  }
  return errorLine(
    new ApiError(
      "feed_expired",
      `What cluster "${p.cluster}" may use changed: take a new cursor (the feed without 'after'), list ports and nodes again, then follow from that cursor`,
    ),
  );
}

/** The page as `p` reads it: the events it may see, in its names, with its cursor. */
async function seenPage(ctx: Ctx, p: Principal, page: FeedPage): Promise<EncodedJson> {
  if (!ofCluster(p)) return EncodedJson.of(page);
  const events = await new View(ctx, p).events(page.events);
  return EncodedJson.of({ cursor: cursorFor(p, page.cursor), events });
}

/**
 * What makes two principals read a feed page alike: a cluster's token reads it by its scope and
 * its cluster's reach (not by its node), every other token reads it whole.
 */
function viewKey(p: Principal): string {
  return ofCluster(p) ? `${p.scope}|${p.cluster}|${JSON.stringify(p.reach)}` : "whole";
}

const PAGES = new WeakMap<object, FeedPages>();

function pagesOf(ctx: Ctx): FeedPages {
  let pages = PAGES.get(ctx.feed);
  if (!pages) PAGES.set(ctx.feed, pages = new FeedPages());
  return pages;
}

const STREAMS = new WeakMap<object, FeedStreams>();

/** The feed's streams (one hub per feed, sharing its pages with the long-polls). */
export function streamsOf(ctx: Ctx): FeedStreams {
  let streams = STREAMS.get(ctx.feed);
  if (!streams) STREAMS.set(ctx.feed, streams = new FeedStreams(ctx.feed, pagesOf(ctx)));
  return streams;
}

class View {
  private meeting?: Promise<Set<string>>;

  constructor(private readonly ctx: Ctx, private readonly p: ClusterPrincipal) {}

  async list(items: Loose[]): Promise<Loose[]> {
    const out = [];
    for (const item of items) if (await this.sees(item)) out.push(this.one(item));
    return out;
  }

  async events(events: Loose[]): Promise<Loose[]> {
    const out = [];
    for (const e of events) {
      if (!(await this.seesEvent(e))) continue;
      const item = itemOf(e);
      out.push(item === undefined ? e : { ...e, [e.type]: this.one(item) });
    }
    return out;
  }

  /** An event of a type it does not know is not shown: a new type names what it is about. */
  seesEvent(e: Loose): Promise<boolean> | boolean {
    if (OWNED_EVENTS.has(e.type)) return seesOwned(this.p, e[e.type] as TenantOwned);
    const item = itemOf(e);
    return item !== undefined && this.sees(item);
  }

  one(item: Loose): Loose {
    const rel = (id: string) => relativeTo(this.p.cluster, id);
    if (isPort(item)) {
      const port: Marked = { ...item, id: rel(item.id) };
      if (item.node !== undefined) port.node = rel(item.node);
      // The nodes that mark it, and the other claimants they name, in the viewer's names too.
      const marks = (item as Marked).conflicts;
      if (marks) {
        port.conflicts = marks.map((c) => ({
          ...c,
          node: rel(c.node),
          ...(c.with ? { with: { ...c.with, id: rel(c.with.id) } } : {}),
        }));
      }
      return port;
    }
    if (isNode(item)) return { ...item, name: rel(item.name) };
    if (isMirror(item)) {
      // Its ports as the agent's port list names them (its collector may be an address).
      const port = (p: MirrorPort) => ({ ...p, id: rel(p.id) });
      const c = item.collector;
      return {
        ...item,
        sources: item.sources.map(port),
        collector: isRemoteCollector(c) ? c : port(c),
      };
    }
    // A service's backends as the agent's port list names them.
    if (isService(item)) return { ...item, backends: item.backends.map(rel) };
    return item;
  }

  private async sees(item: Loose): Promise<boolean> {
    if (isPort(item)) return seesPort(this.p, item);
    if (!isNode(item)) return true;
    const cluster = item.cluster ?? DEFAULT_CLUSTER;
    if (cluster === this.p.cluster) return true;
    if (this.p.scope === "monitor") return false;
    this.meeting ??= this.meetingClusters();
    return (await this.meeting).has(cluster);
  }

  /** The clusters whose nodes this agent may need as tunnel endpoints. */
  private async meetingClusters(): Promise<Set<string>> {
    const own = this.p.reach as ClusterReach;
    const all = await listClusters(this.ctx);
    return new Set(all.filter((c) => clustersMeet(own, c)).map((c) => c.name));
  }
}

/**
 * The feed events about an object a tenant owns, under its type's key (`{ type: "router", router }`):
 * a cluster's token sees them by seesOwned. A new such event type is added here.
 */
const OWNED_EVENTS: ReadonlySet<string> = new Set([
  "router",
  "securityGroup",
  "mirror",
  "service",
]);

/** The port, node, mirror or service a feed event is about (other events pass as they are). */
function itemOf(e: Loose): Loose {
  return ["port", "node", "mirror", "service"].includes(e.type) ? e[e.type] : undefined;
}

/** A port as answered with its conflict marks (service/conflicts.ts, not imported: it imports us). */
type Marked = Port & { conflicts?: z.infer<typeof PortConflict>[] };

function isPort(x: Loose): x is Port {
  return typeof x?.networkId === "string" && typeof x?.mac === "string";
}

function isMirror(x: Loose): x is MirrorInfo {
  return Array.isArray(x?.sources) && typeof x?.collector === "object";
}

function isService(x: Loose): x is ServiceInfo {
  return typeof x?.vip === "string" && Array.isArray(x?.backends);
}

function isNode(x: Loose): x is NodeRecord {
  return typeof x?.underlayIp === "string" && typeof x?.name === "string";
}
