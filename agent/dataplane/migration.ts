/**
 * Live migration on this node (agent/PIPELINE.md, "Inactive ports"): which of a claim's two ports
 * carries its traffic, and the moment the guest shows up at the inactive one here.
 *
 * The manager says which port is active (`active: false` on the other one). While this node has an
 * inactive port, its flows in CLASSIFY count what a running guest sends from the claim's MAC; the
 * counters are read every `pollMs` (only while such a port exists: no cost otherwise). The first
 * frame (a gratuitous ARP, a RARP, an unsolicited neighbour advertisement, anything) makes the port
 * active here at once, optimistically (the next flow sync delivers to it and sends the claim's
 * traffic from this node's pods to it), and the manager is asked to activate it, with the node's
 * token, for every other node to follow through the feed. A refusal undoes the local activation.
 *
 * Why a poll of the counter rather than packet-ins (`ovs-ofctl monitor BR 65534 -P nxt_packet_in`):
 * one short-lived ovs-ofctl per inactive port and poll reuses the runner as every other OVS call
 * does, needs no controller connection kept alive and re-established after an ovs-vswitchd
 * restart, and costs nothing when no migration is under way; docs/benchmarks.md has the loss
 * window it gives.
 */
import { type Logger, ManagerError, type Port } from "@knitter/common";
import { parseIp } from "@knitter/common/address";
import { portKey } from "./port_key.ts";

/** A local port of a claim that is not the active one: what the poll watches. */
export interface InactivePort {
  /** The manager's path of the port (the attachment's tenant and network). */
  tenant: string;
  network: string;
  id: string;
  /** portKey of the port. */
  key: string;
  /** The flows' cookie: network number << 32 | port number. */
  cookie: bigint;
  ofport: number;
  /** The claim's MAC and addresses, for the announcement. */
  mac: string;
  ipv4?: string;
  ipv6?: string;
  /**
   * Made inactive: the manager answered the port's ADD `active: false` (a migration's target). Only
   * a target activates by its guest's frames; this survives an agent restart (the attachment keeps
   * the answer), where wasActive does not.
   */
  target: boolean;
}

/** What the poll needs of OVS and of the manager. */
export interface MigrationDeps {
  ofctl(args: string[]): Promise<string>;
  bridge: string;
  activatePort(tenant: string, network: string, id: string): Promise<unknown>;
  /** Recomputes the flows (Dataplane.sync). */
  resync(): Promise<void>;
  log: Logger;
}

/** How often an inactive port's counter is read while one exists. */
export const MIGRATION_POLL_MS = 20;
/** After a failure to reach the manager, the next try. */
const RETRY_MS = 500;
/** After the manager refused to activate a port, how long its guest's frames are only dropped. */
const REFUSED_MS = 5000;

export class Migrations {
  /** Local ports activated here before the manager's feed says so, by port key. */
  private readonly activated = new Set<string>();
  /**
   * Local ports that have been active: a migration's source. Only a target (a port made inactive)
   * activates by its guest's frames; a source that lost the claim's traffic gets it back only by
   * the manager (a migration back makes a new target pod): stray frames at the old place must not
   * pull the traffic back from the guest's new one.
   */
  private readonly wasActive = new Set<string>();
  /** The local ports of the model being made (isActive), to forget the others' wasActive. */
  private seen = new Set<string>();
  /** Ports the manager refused to activate, and when: not asked again for REFUSED_MS. */
  private readonly refused = new Map<string, number>();
  private watched: InactivePort[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private polling = false;
  private stopped = false;

  constructor(private readonly deps: MigrationDeps, private readonly pollMs = MIGRATION_POLL_MS) {}

  /**
   * Whether a local port carries its claim's traffic here: the manager's word (`current`, the
   * feed's copy of the port, else the ADD's answer), or this node's activation not yet echoed.
   */
  isActive(current: Port): boolean {
    const key = portKey(current);
    this.seen.add(key);
    if (managerSaysActive(current)) {
      // The feed caught up: the manager's word from now on.
      this.activated.delete(key);
      this.wasActive.add(key);
      return true;
    }
    return this.activated.has(key);
  }

  /**
   * The inactive ports of the model just made (after isActive for each local port): the poll runs
   * while one of them is a target.
   */
  watch(ports: InactivePort[]): void {
    for (const key of this.wasActive) if (!this.seen.has(key)) this.wasActive.delete(key);
    this.seen = new Set();
    this.watched = ports.filter((p) => p.target && !this.wasActive.has(p.key));
    // One poll loop at a time: a running poll schedules the next itself.
    const idle = this.timer === null && !this.polling;
    if (ports.length > 0 && idle && !this.stopped) this.schedule(this.pollMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    while (this.polling) await new Promise((r) => setTimeout(r, 5));
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, ms);
  }

  private async poll(): Promise<void> {
    if (this.stopped || this.watched.length === 0) return;
    this.polling = true;
    try {
      for (const p of this.watched) {
        if (this.activated.has(p.key) || this.refusedLately(p.key)) continue;
        if (await this.sent(p)) this.activate(p);
      }
    } catch (err) {
      this.deps.log.warn("cannot read the counters of inactive ports", { error: String(err) });
    } finally {
      this.polling = false;
    }
    if (this.watched.length > 0 && !this.stopped) this.schedule(this.pollMs);
  }

  private refusedLately(key: string): boolean {
    const at = this.refused.get(key);
    if (at === undefined) return false;
    if (performance.now() - at < REFUSED_MS) return true;
    this.refused.delete(key);
    return false;
  }

  /** Whether the guest sent anything from the inactive port (its flows' packet counters). */
  private async sent(p: InactivePort): Promise<boolean> {
    const cookie = `cookie=0x${p.cookie.toString(16)}/-1,table=0`;
    const out = await this.deps.ofctl(["dump-flows", this.deps.bridge, cookie]);
    return [...out.matchAll(/n_packets=(\d+)/g)].some((m) => Number(m[1]) > 0);
  }

  /** Active here at once; then the manager, for every other node. */
  private activate(p: InactivePort): void {
    this.activated.add(p.key);
    this.deps.log.info("the guest announced itself: port activated here", { port: p.key });
    void this.deps.resync().then(() => this.announce(p)).catch((err) =>
      this.deps.log.error("flow sync failed", { error: String(err) })
    );
    void this.tell(p);
  }

  /**
   * Announces the guest from its new port, once its flows are in: a gratuitous ARP (and an
   * unsolicited neighbour advertisement for its IPv6 address) through the pipeline as if the guest
   * sent it (it floods the network). The guest's own announcement was
   * dropped as it activated the port; a physnet's learning switches learn the MAC's new place from
   * this one, instead of from the guest's next frame.
   */
  private async announce(p: InactivePort): Promise<void> {
    if (!this.activated.has(p.key)) return;
    const packets = [
      ...(p.ipv4 ? [gratuitousArp(p.mac, p.ipv4)] : []),
      ...(p.ipv6 ? [unsolicitedNa(p.mac, p.ipv6)] : []),
    ];
    for (const packet of packets) {
      await this.deps.ofctl(["packet-out", this.deps.bridge, String(p.ofport), "table", packet]);
    }
  }

  private async tell(p: InactivePort): Promise<void> {
    while (!this.stopped && this.activated.has(p.key)) {
      try {
        await this.deps.activatePort(p.tenant, p.network, p.id);
        return;
      } catch (err) {
        if (err instanceof ManagerError) {
          // Refused (the port or its claim is gone, or not this node's): back to inactive.
          this.deps.log.error("the manager refused to activate the port: left inactive", {
            port: p.key,
            error: err.message,
          });
          this.activated.delete(p.key);
          this.refused.set(p.key, performance.now());
          await this.deps.resync().catch(() => {});
          return;
        }
        this.deps.log.warn("cannot reach the manager to activate the port: trying again", {
          port: p.key,
          error: String(err),
        });
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  }
}

/**
 * Whether a remote port goes into this node's flows: not when the manager says it is inactive, nor
 * when it is the other end of a claim whose port here is active (this node's activation, before the
 * feed turns the remote one inactive).
 */
export function carried(remote: Port, localClaims: ReadonlySet<string>): boolean {
  if (!managerSaysActive(remote)) return false;
  return remote.claim === undefined || !localClaims.has(claimKey(remote));
}

/** A gratuitous ARP from `mac` for `ipv4`, as hex (the frame padded to 60 bytes). */
export function gratuitousArp(mac: string, ipv4: string): string {
  const m = mac.toLowerCase().replaceAll(":", "");
  const ip = ipv4.split(".").map((b) => Number(b).toString(16).padStart(2, "0")).join("");
  const frame = "ff".repeat(6) + m + "0806" + "0001080006040001" + m + ip + "00".repeat(6) + ip;
  return frame.padEnd(120, "0");
}

/** Whether the manager says a port is its claim's active one (absent: active, as before claims). */
export function managerSaysActive(p: Port): boolean {
  return p.active !== false;
}

/**
 * An unsolicited neighbour advertisement from `mac` for `ipv6` to all nodes (override flag, the
 * target link-layer address option), as hex.
 */
export function unsolicitedNa(mac: string, ipv6: string): string {
  const m = mac.toLowerCase().replaceAll(":", "");
  const ip = parseIp(ipv6);
  if (!ip || ip.family !== 6) throw new Error(`not an IPv6 address: ${ipv6}`);
  const src = ip.value.toString(16).padStart(32, "0");
  const dst = "ff020000000000000000000000000001";
  // Type 136, code 0, checksum, flags (override), target, option 2 (target MAC), length 1.
  const body = (sum: string) => "8800" + sum + "20000000" + src + "0201" + m;
  const pseudo = src + dst + "00000020" + "0000003a";
  const sum = checksum(pseudo + body("0000")).toString(16).padStart(4, "0");
  const ipv6Header = "60000000" + "0020" + "3a" + "ff" + src + dst;
  return "333300000001" + m + "86dd" + ipv6Header + body(sum);
}

/** The Internet checksum of a hex string of whole 16-bit words. */
function checksum(hex: string): number {
  let sum = 0;
  for (let i = 0; i < hex.length; i += 4) sum += parseInt(hex.slice(i, i + 4), 16);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

/** A claim by its network and tenant: two ports with this key are one claim's. */
export function claimKey(p: Pick<Port, "tenant" | "networkId" | "claim">): string {
  return JSON.stringify([p.tenant, p.networkId, p.claim]);
}
