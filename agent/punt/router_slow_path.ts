/**
 * The distributed router's slow path (agent/README.md, "Router errors"): the packets the flows hand
 * up (agent/PIPELINE.md, "Router errors") come in over one OpenFlow connection to the bridge, and
 * the answer the gateway of the port's network owes goes back out of the port it came in on: ICMP and
 * ICMPv6 errors (time exceeded, unreachable, too big) and router advertisements. Budgets per port
 * and for the node keep a pod that floods from costing others their answers or the agent its CPU
 * (the switch's own limit, in OVSDB, comes first: punt_controller.ts). The connection is made
 * again whenever ovs-vswitchd closes it.
 * @module
 */
import { type Logger, sleep, TokenBuckets } from "@knitter/common";
import { PUNT, TABLE } from "@knitter/wasm";
import {
  OpenFlowConn,
  type PacketIn,
  REASON_INVALID_TTL,
  resubmitAction,
  setRegAction,
} from "./openflow.ts";
import { ETH_IPV4, ethernet, parseIpFrame } from "./frames.ts";
import { dontFragment, fragment } from "./fragment.ts";
import { type RouterError, routerError } from "./icmp_errors.ts";
import { type AdvertSettings, routerAdvert } from "./router_advert.ts";

/** What answering for a network takes: its gateway, and its advertisement when it sends them. */
export interface PuntNetwork {
  gatewayMac: Uint8Array;
  gateway4?: Uint8Array;
  gateway6?: Uint8Array;
  advert?: AdvertSettings;
}

/**
 * A pod port of this node: the packets it sends are answered by its network's gateway, to its MAC
 * (a routed packet may be punted after its source MAC was rewritten).
 */
export interface PuntPort {
  mac: Uint8Array;
  network: PuntNetwork;
}

export interface SlowPathLimits {
  /** Answers per second for one port (in_port), and how many it may save up. */
  perPort: number;
  perPortBurst: number;
  /** Answers per second for the whole node. */
  total: number;
  totalBurst: number;
  /** Packets per second one port may have fragmented (each cut into pieces), and the node. */
  fragmentsPerPort: number;
  fragmentsTotal: number;
}

/** RFC 4443 section 2.4 f suggests about 10 per second per source; a node answers 200 in all. */
export const SLOW_PATH_LIMITS: SlowPathLimits = {
  perPort: 10,
  perPortBurst: 10,
  total: 200,
  totalBurst: 100,
  fragmentsPerPort: 200,
  fragmentsTotal: 2000,
};

export interface SlowPathConfig {
  /** The switch's unix socket of this connection (punt_controller.ts). */
  socket: string;
  /** The pod port with this ofport, as the last flow sync knew it. */
  port: (ofport: number) => PuntPort | undefined;
  /** Every pod port by ofport: those of advertising networks get unsolicited advertisements. */
  ports?: () => Iterable<[number, PuntPort]>;
  /** How often the unsolicited advertisements go out (RFC 4861 allows 4 s to 1800 s). */
  advertIntervalMs?: number;
  log: Logger;
  limits?: SlowPathLimits;
  /** How long to wait before connecting again. */
  retryMs?: number;
  /** Milliseconds (tests move their own). */
  now?: () => number;
}

/** What the slow path did, for metrics and tests. */
export interface SlowPathCounts {
  answered: number;
  /** Over a budget: not answered. */
  limited: number;
  /** Nothing may or can be answered (an error about an error, an unknown port). */
  ignored: number;
  /** Packets without DF larger than the next network's MTU, sent on in fragments. */
  fragmented: number;
  connects: number;
}

/** Unsolicited advertisements once a minute: the router lifetime (1800 s) outlasts many misses. */
export const ADVERT_INTERVAL_MS = 60_000;

export class RouterSlowPath {
  readonly counts: SlowPathCounts = {
    answered: 0,
    limited: 0,
    ignored: 0,
    fragmented: 0,
    connects: 0,
  };
  private readonly perPort: TokenBuckets<number>;
  private readonly total: TokenBuckets<number>;
  private readonly fragmentsPerPort: TokenBuckets<number>;
  private readonly fragmentsTotal: TokenBuckets<number>;
  private conn: OpenFlowConn | null = null;
  private readonly stopping = new AbortController();
  private running: Promise<void> | null = null;
  private advertTimer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly config: SlowPathConfig) {
    const l = config.limits ?? SLOW_PATH_LIMITS;
    const now = config.now;
    this.perPort = new TokenBuckets(l.perPort, l.perPortBurst, now);
    this.total = new TokenBuckets(l.total, l.totalBurst, now);
    // A second's worth of burst: fragmenting is forwarding, a stream's pace.
    this.fragmentsPerPort = new TokenBuckets(l.fragmentsPerPort, l.fragmentsPerPort, now);
    this.fragmentsTotal = new TokenBuckets(l.fragmentsTotal, l.fragmentsTotal, now);
  }

  /** Whether the connection is up. */
  get connected(): boolean {
    return this.conn !== null;
  }

  start(): void {
    this.running ??= this.loop();
    const every = this.config.advertIntervalMs ?? ADVERT_INTERVAL_MS;
    this.advertTimer ??= setInterval(() => void this.advertise().catch(() => {}), every);
  }

  /**
   * An unsolicited advertisement to every pod port of an advertising network (RFC 4861 section
   * 6.2.4: to all nodes); answers how many were sent (none while not connected).
   */
  async advertise(): Promise<number> {
    let sent = 0;
    for (const [ofport, port] of this.config.ports?.() ?? []) {
      const advert = port.network.advert;
      if (advert && await this.send(routerAdvert(advert), ofport)) sent++;
    }
    return sent;
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    clearInterval(this.advertTimer);
    this.conn?.close();
    await this.running;
  }

  /** Sends `frame` out of `port` now (unsolicited advertisements); false when not connected. */
  async send(frame: Uint8Array, port: number): Promise<boolean> {
    if (!this.conn) return false;
    await this.conn.packetOut(frame, port);
    return true;
  }

  /**
   * A routed IPv4 packet without DF, larger than the next network's MTU, as the fragments that go on
   * through FORWARD in its place ([] over a budget); null for any other packet-in.
   */
  fragments(pin: PacketIn): Uint8Array[] | null {
    if (pin.reason === REASON_INVALID_TTL || (pin.regs[5] & 0xff) !== PUNT.TOO_BIG) return null;
    const f = parseIpFrame(pin.frame);
    if (!f || f.family !== 4 || dontFragment(f.packet)) return null;
    if (!this.fragmentsPerPort.take(pin.inPort) || !this.fragmentsTotal.take(0)) {
      this.counts.limited++;
      return [];
    }
    const pieces = fragment(f.packet, pin.regs[5] >>> 16);
    if (!pieces) return null;
    this.counts.fragmented++;
    return pieces.map((p) => ethernet(f.ethDst, f.ethSrc, ETH_IPV4, p));
  }

  /** The answer to a packet-in, or null: none owed, or over a budget. */
  answer(pin: PacketIn): Uint8Array | null {
    const frame = this.build(pin);
    if (!frame) {
      this.counts.ignored++;
      return null;
    }
    // The port's budget first: a flooding port spends its own, not the node's.
    if (!this.perPort.take(pin.inPort) || !this.total.take(0)) {
      this.counts.limited++;
      return null;
    }
    this.counts.answered++;
    return frame;
  }

  private build(pin: PacketIn): Uint8Array | null {
    const port = this.config.port(pin.inPort);
    if (!port) return null;
    const net = port.network;
    if (pin.reason !== REASON_INVALID_TTL && (pin.regs[5] & 0xff) === PUNT.SOLICIT) {
      return net.advert ? solicited(net.advert, pin.frame) : null;
    }
    const frame = parseIpFrame(fromPort(pin.frame, port.mac));
    if (!frame) return null;
    const kind = errorKind(pin);
    if (!kind) return null;
    const ip = frame.family === 4 ? net.gateway4 : net.gateway6;
    if (!ip) return null;
    return routerError(kind, frame, { mac: net.gatewayMac, ip }, pin.regs[5] >>> 16);
  }

  private async loop(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      try {
        this.conn = await OpenFlowConn.open(this.config.socket);
      } catch {
        await sleep(this.config.retryMs ?? 200, this.stopping.signal);
        continue;
      }
      this.counts.connects++;
      this.config.log.info("router slow path connected", { socket: this.config.socket });
      // The pods hear of their router at once, not only at the next interval.
      await this.advertise().catch(() => {});
      try {
        await this.serve(this.conn);
      } catch (err) {
        if (!this.stopping.signal.aborted) {
          this.config.log.warn("router slow path connection failed", {
            error: (err as Error).message,
          });
        }
      }
      this.conn.close();
      this.conn = null;
    }
  }

  private async serve(conn: OpenFlowConn): Promise<void> {
    for (;;) {
      const pin = await conn.packetIn();
      if (!pin) return;
      const pieces = this.fragments(pin);
      if (pieces) {
        await this.forward(conn, pin, pieces);
        continue;
      }
      const out = this.answer(pin);
      if (out) await conn.packetOut(out, pin.inPort);
    }
  }

  /**
   * The fragments on through FORWARD, as the punted packet would have gone (its network and
   * source port in reg0 and reg1, from its own port): its frame is already addressed to the next
   * hop, and no fragment is larger than the MTU, so none is punted again.
   */
  private async forward(conn: OpenFlowConn, pin: PacketIn, pieces: Uint8Array[]): Promise<void> {
    const actions = [
      setRegAction(0, pin.regs[0]),
      setRegAction(1, pin.regs[1]),
      resubmitAction(TABLE.FORWARD),
    ];
    for (const p of pieces) await conn.packetOutActions(p, actions, pin.inPort);
  }
}

/** The frame with the port's MAC as its source again (a route rewrites it before some punts). */
function fromPort(frame: Uint8Array, mac: Uint8Array): Uint8Array {
  const copy = frame.slice();
  copy.set(mac, 6);
  return copy;
}

/** The error a packet-in asks for. */
function errorKind(pin: PacketIn): RouterError | null {
  if (pin.reason === REASON_INVALID_TTL) return "timeExceeded";
  switch (pin.regs[5] & 0xff) {
    case PUNT.UNREACHABLE:
      return "unreachable";
    case PUNT.GATEWAY:
      return "portUnreachable";
    case PUNT.TOO_BIG:
      return "tooBig";
  }
  return null;
}

/** The advertisement answering a solicitation: to the pod, or to all when it sent from `::`. */
function solicited(advert: AdvertSettings, frame: Uint8Array): Uint8Array | null {
  const f = parseIpFrame(frame);
  if (!f || f.family !== 6) return null;
  const unspecified = f.src.every((b) => b === 0);
  return routerAdvert(advert, unspecified ? undefined : { mac: f.ethSrc, ip: f.src });
}
