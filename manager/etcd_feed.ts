/**
 * The change feed of manager replicas on etcd. Events are not kept in a replica's memory: they are
 * etcd's own history of the port and node keys, read with a watch from the follower's cursor. So a
 * follower may continue on any replica, a replica restart loses nothing, and the cursor (the
 * store revision) is only too old once etcd compacted that history (410, list again).
 *
 * To answer "everything up to now" without waiting, a poll first writes a marker key inside the
 * watched range and reads the watch until the marker's revision: every earlier event is in.
 */
import type { NodeRecord, PortRecord, SecurityGroupRecord, ServiceRecord } from "./model.ts";
import { keys, type MirrorRecord, type NetworkRecord, type RouterRecord } from "./model.ts";
import { ChangeFeed, type FeedEvent, type FeedPage } from "./feed.ts";
import { carriedChange, portView } from "./service/ports/mod.ts";
import { routerView } from "./service/routers.ts";
import { serviceView } from "./service/services.ts";
import { groupView } from "./service/security_group_refs.ts";
import { EtcdError, fromB64, type RawKv, toB64 } from "./store/etcd_client.ts";
import type { EtcdStore } from "./store/etcd_store.ts";
import { concat, prefixRange } from "./store/key_codec.ts";
import { decodeValue } from "./store/value_codec.ts";
import { type Entry, type Key, StoreUnavailableError } from "./store/store.ts";

/** The marker: the key ["node"] itself, which holds no node (nodes are ["node", name]). */
export const FEED_MARKER: Key = ["node"];

interface WatchEvent {
  type?: "PUT" | "DELETE";
  kv: RawKv;
  prev_kv?: RawKv;
}

export class EtcdFeed extends ChangeFeed {
  private readonly stops = new Set<AbortController>();
  private closedFeed = false;

  constructor(private readonly store: EtcdStore) {
    super();
    // One epoch per etcd cluster: cursors stay valid across replicas and restarts.
    (this as { epoch: string }).epoch = store.clusterId.slice(-8).padStart(8, "0");
  }

  /** Events come from etcd's history; what services announce is already there. */
  override publish(): void {}

  override close(): void {
    super.close();
    this.closedFeed = true;
    for (const stop of this.stops) stop.abort();
  }

  override cursor(): string {
    return `${this.epoch}:${this.store.revision}`;
  }

  override async since(
    cursor: string,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<FeedPage | "expired"> {
    const [epoch, text] = cursor.split(":");
    const after = Number(text);
    if (epoch !== this.epoch || !Number.isInteger(after) || after < 0) return "expired";
    const mark = await this.store.commit([], [{
      type: "set",
      key: FEED_MARKER,
      value: { at: new Date().toISOString() },
    }]);
    if (!mark.ok) throw new StoreUnavailableError("etcd refused the feed marker");
    const markRev = Number(mark.version);
    if (after > markRev) return "expired";

    const stop = new AbortController();
    this.stops.add(stop);
    signal?.addEventListener("abort", () => stop.abort(), { once: true });
    const syncTimer = setTimeout(() => stop.abort(), this.store.client.timeoutMs);
    let waitTimer: ReturnType<typeof setTimeout> | undefined;
    const events: FeedEvent[] = [];
    const networks = new Map<string, Entry<NetworkRecord>>();
    let synced = false;
    let last = after;
    try {
      for await (
        const msg of this.store.client.stream("/v3/watch", this.watchRequest(after), stop.signal)
      ) {
        if (msg.canceled) {
          if (Number(msg.compact_revision ?? 0) > 0) return "expired";
          throw new StoreUnavailableError(
            `etcd ended the feed watch: ${msg.cancel_reason ?? "canceled"}`,
          );
        }
        for (const ev of (msg.events ?? []) as WatchEvent[]) {
          const rev = Number(ev.kv.mod_revision);
          last = Math.max(last, rev);
          const key = this.store.unkey(ev.kv.key);
          if (sameKey(key, FEED_MARKER)) {
            if (rev >= markRev) synced = true;
            continue;
          }
          if (key[0] === "network" && key.length === 3) {
            events.push(...await this.republished(ev, rev));
            continue;
          }
          const e = await this.toEvent(key, ev, rev, networks);
          if (e) events.push(e);
        }
        if (!synced) continue;
        if (events.length > 0 || timeoutMs <= 0 || this.closedFeed) break;
        if (waitTimer === undefined) {
          clearTimeout(syncTimer);
          waitTimer = setTimeout(() => stop.abort(), timeoutMs);
        }
      }
    } catch (err) {
      if (!(stop.signal.aborted && synced)) throw unavailable(err);
    } finally {
      clearTimeout(syncTimer);
      clearTimeout(waitTimer);
      stop.abort();
      this.stops.delete(stop);
    }
    if (!synced) throw new StoreUnavailableError("etcd did not deliver the change feed in time");
    return { cursor: `${this.epoch}:${Math.max(last, markRev)}`, events };
  }

  /**
   * Watches the range from the first network to the last security group: networks (whose default
   * security groups their ports carry), nodes, ports, routers and security groups; what lies
   * between (physnets, indexes, quarantine, quotas) is skipped.
   */
  private watchRequest(after: number): unknown {
    const start = concat(this.store.prefix, prefixRange(keys.networks()).start);
    const end = concat(this.store.prefix, prefixRange(keys.securityGroups()).end);
    return {
      create_request: {
        key: toB64(start),
        range_end: toB64(end),
        start_revision: String(after + 1),
        prev_kv: true,
      },
    };
  }

  /**
   * A network whose default security groups, DSCP or node settings (egress, hostAccess) changed:
   * its ports again, as they now read.
   */
  private async republished(ev: WatchEvent, rev: number): Promise<FeedEvent[]> {
    if (ev.type === "DELETE" || !ev.prev_kv) return [];
    const net = decode(ev.kv) as NetworkRecord | null;
    const before = decode(ev.prev_kv) as NetworkRecord | null;
    if (!net || !before || net.id !== before.id) return [];
    if (!carriedChange(before, net)) return [];
    const out: FeedEvent[] = [];
    for await (const e of this.store.list<PortRecord>(keys.ports(net.id))) {
      if (e.value) out.push({ seq: rev, type: "port", op: "put", port: portView(net, e.value) });
    }
    return out;
  }

  private async toEvent(
    key: Key,
    ev: WatchEvent,
    rev: number,
    networks: Map<string, Entry<NetworkRecord>>,
  ): Promise<FeedEvent | null> {
    const op = ev.type === "DELETE" ? "delete" : "put";
    const value = op === "put" ? decode(ev.kv) : decode(ev.prev_kv);
    if (value === null) return null;
    if (key[0] === "node" && key.length === 2) {
      return { seq: rev, type: "node", op, node: value as NodeRecord };
    }
    if (key[0] === "port_mirror" && key.length === 3) {
      return { seq: rev, type: "mirror", op, mirror: value as MirrorRecord };
    }
    if (key[0] === "port_service" && key.length === 3) {
      return { seq: rev, type: "service", op, service: serviceView(value as ServiceRecord) };
    }
    if (key[0] === "router" && key.length === 3) {
      return { seq: rev, type: "router", op, router: routerView(value as RouterRecord) };
    }
    if (key[0] === "secgroup" && key.length === 3) {
      const group = groupView(value as SecurityGroupRecord);
      // A delete's mark (or its removal) changes nothing an agent reads.
      const before = op === "put" && ev.prev_kv ? decode(ev.prev_kv) : null;
      if (
        before && JSON.stringify(groupView(before as SecurityGroupRecord)) === JSON.stringify(group)
      ) {
        return null;
      }
      return { seq: rev, type: "securityGroup", op, securityGroup: group };
    }
    if (key[0] !== "port" || key.length !== 3) return null;
    const port = value as PortRecord;
    if (op === "put" && ev.prev_kv && !boundDifferently(decode(ev.prev_kv) as PortRecord, port)) {
      return null;
    }
    // The network as it was when the port changed (for a delete: just before).
    const net = await this.networkAt(port, op === "put" ? rev : rev - 1, networks);
    if (!net || net.id !== port.networkId) return null;
    return { seq: rev, type: "port", op, port: portView(net, port) };
  }

  /**
   * The latest record serves every event at or after its own revision; older events read the
   * network as it was then.
   */
  private async networkAt(
    port: PortRecord,
    at: number,
    latest: Map<string, Entry<NetworkRecord>>,
  ): Promise<NetworkRecord | null> {
    const key = keys.network(port.networkTenant, port.network);
    const id = JSON.stringify(key);
    let e = latest.get(id);
    if (!e) {
      e = await this.store.get<NetworkRecord>(key);
      latest.set(id, e);
    }
    if (e.value && e.version !== null && Number(e.version) <= at) return e.value;
    return (await this.store.getAt<NetworkRecord>(key, at).catch(() => null))?.value ?? null;
  }
}

/**
 * A port record put anew is news only when its binding, its security groups or whether it is its
 * claim's active port changed.
 */
function boundDifferently(before: PortRecord, after: PortRecord): boolean {
  return before.node !== after.node || before.interface !== after.interface ||
    before.active !== after.active ||
    JSON.stringify(before.pod) !== JSON.stringify(after.pod) ||
    JSON.stringify(before.securityGroups) !== JSON.stringify(after.securityGroups);
}

function decode(kv: RawKv | undefined): unknown {
  if (!kv?.value) return null;
  return decodeValue(fromB64(kv.value));
}

function sameKey(a: Key, b: Key): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

function unavailable(err: unknown): Error {
  if (err instanceof StoreUnavailableError) return err;
  if (err instanceof EtcdError) return new StoreUnavailableError(`etcd feed watch: ${err.message}`);
  return err as Error;
}
