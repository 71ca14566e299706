/**
 * Flow records (issue 30): the agent listens on the node's loopback for Open vSwitch's IPFIX
 * samples (ovs_export.ts sets OVS up, the flow compiler adds the `sample` actions), keeps them per
 * connection (connections.ts), names them (port_names.ts) and sends IPFIX records of its own
 * (record_template.ts) to the configured collectors. See agent/README.md, "Flow records".
 */
import dgram from "node:dgram";
import type { Logger } from "@knitter/common";
import { type FlowSampling, sampleProbability } from "@knitter/wasm";
import type { Ovs } from "../dataplane/ovs.ts";
import { decodeMessage, IpfixError, TemplateStore } from "./ipfix.ts";
import { Connections, type PortNames } from "./connections.ts";
import { samplesOf } from "./ovs_samples.ts";
import { encodeFlowRecords, type FlowRecord } from "./record_template.ts";
import { exportToAgent, stopExport } from "./ovs_export.ts";

/** The agent's `flowRecords` configuration (agent/config.ts). */
export interface FlowRecordsConfig {
  /** Where records go: "host:port" ("[v6]:port"), UDP. */
  collectors: string[];
  /** 1 in N packets sampled. */
  sampling: number;
  /** Seconds between records of a connection that goes on. */
  activeTimeout: number;
  /** Seconds without a packet after which a connection's last record goes. */
  idleTimeout: number;
  /** The Flow_Sample_Collector_Set's id on the bridge. */
  collectorSetId: number;
  /** Loopback UDP port OVS sends its samples to; 0: any free one. */
  listenPort: number;
}

export interface FlowRecordsDeps {
  ovs: Ovs;
  bridge: string;
  nodeName: string;
  names: () => PortNames;
  log: Logger;
  /** Milliseconds since the epoch (tests give their own). */
  now?: () => number;
}

/** The observation domain of the agent's own messages. */
const EXPORT_DOMAIN = 1;
const SWEEP_MS = 1000;

export class FlowRecords {
  readonly sampling: FlowSampling;
  private readonly connections: Connections;
  private readonly templates = new TemplateStore();
  private readonly targets: { host: string; port: number }[];
  private socket: dgram.Socket | null = null;
  private senders = new Map<4 | 6, dgram.Socket>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private sequence = 0;
  private failures = 0;
  /** Records sent, and messages from OVS that could not be read (for tests and logs). */
  readonly counts = { records: 0, malformed: 0 };

  constructor(private readonly config: FlowRecordsConfig, private readonly deps: FlowRecordsDeps) {
    const probability = sampleProbability(config.sampling);
    this.sampling = { probability, collectorSetId: config.collectorSetId };
    this.targets = config.collectors.map(parseTarget);
    this.connections = new Connections({
      activeMs: config.activeTimeout * 1000,
      idleMs: config.idleTimeout * 1000,
      scale: 65535 / probability,
      node: deps.nodeName,
      names: deps.names,
    });
  }

  /**
   * Listens on the loopback, points OVS's collector set at it, and starts sending records. On a
   * failure nothing stays behind (socket closed, OVS row removed) and the error says what to do.
   */
  async start(): Promise<void> {
    const socket = await listen(this.config.listenPort);
    this.socket = socket;
    const port = socket.address().port;
    // Before OVS is told: its first message carries the templates, and a message with no
    // listener yet would be lost (the data after it unreadable until OVS sends them again).
    socket.on("message", (msg, from) => this.receive(msg, `${from.address}:${from.port}`));
    try {
      await exportToAgent(this.deps.ovs, this.deps.bridge, this.config.collectorSetId, port);
    } catch (err) {
      socket.close();
      this.socket = null;
      await stopExport(this.deps.ovs).catch(() => {});
      throw new Error(
        `flow records: cannot make Open vSwitch send IPFIX samples to 127.0.0.1:${port} ` +
          `(${(err as Error).message.trim()}); check that bridge ${this.deps.bridge} exists and ` +
          `that no other Flow_Sample_Collector_Set has id ${this.config.collectorSetId} ` +
          `(flowRecords.collectorSetId)`,
      );
    }
    this.timer = setInterval(() => this.flush(), SWEEP_MS);
    this.deps.log.info("flow records on", {
      listen: `127.0.0.1:${port}`,
      collectors: this.config.collectors,
      sampling: `1 in ${this.config.sampling}`,
    });
  }

  /** Sends what is due; at stop, every connection's last record. */
  flush(final = false): void {
    const now = final ? Infinity : this.now();
    const records = this.connections.sweep(now);
    if (records.length === 0) return;
    try {
      this.send(records);
    } catch (err) {
      // A timer's error would end the agent: records are lost, the node goes on.
      this.deps.log.error("flow records: records could not be sent", {
        records: records.length,
        error: String((err as Error)?.message ?? err),
      });
    }
  }

  async stop(opts: { removeFromOvs?: boolean } = {}): Promise<void> {
    clearInterval(this.timer);
    this.flush(true);
    this.socket?.close();
    this.socket = null;
    for (const s of this.senders.values()) s.close();
    this.senders.clear();
    if (opts.removeFromOvs) await stopExport(this.deps.ovs);
  }

  private now(): number {
    return this.deps.now?.() ?? Date.now();
  }

  private receive(msg: Uint8Array, from: string): void {
    try {
      const m = decodeMessage(new Uint8Array(msg), this.templates, from);
      const overflow = this.connections.overflow;
      this.connections.add(samplesOf(m), this.now());
      if (overflow === 0 && this.connections.overflow > 0) {
        this.deps.log.warn("flow records: too many connections at once, new ones not recorded", {
          connections: this.connections.size,
        });
      }
    } catch (err) {
      // Anyone on the node may send to this port: whatever arrives must not end the agent.
      if (this.counts.malformed++ === 0 || !(err instanceof IpfixError)) {
        this.deps.log.warn("flow records: an unreadable IPFIX message on the agent's port", {
          from,
          error: String((err as Error)?.message ?? err),
        });
      }
    }
  }

  private send(records: FlowRecord[]): void {
    const { messages, sequence } = encodeFlowRecords(records, {
      exportTime: Math.floor(this.now() / 1000),
      sequence: this.sequence,
      domain: EXPORT_DOMAIN,
    });
    this.sequence = sequence >>> 0;
    this.counts.records += records.length;
    for (const t of this.targets) {
      const socket = this.sender(t.host.includes(":") ? 6 : 4);
      for (const m of messages) socket.send(m, t.port, t.host, (err) => err && this.failed(t, err));
    }
  }

  private sender(family: 4 | 6): dgram.Socket {
    let s = this.senders.get(family);
    if (!s) {
      s = dgram.createSocket(family === 4 ? "udp4" : "udp6");
      s.on("error", (err) => this.failed({ host: "*", port: 0 }, err));
      this.senders.set(family, s);
    }
    return s;
  }

  /** Logged once, then every 100th: a collector that is down must not flood the log. */
  private failed(t: { host: string; port: number }, err: Error): void {
    if (this.failures++ % 100 === 0) {
      this.deps.log.warn("flow records: sending to a collector failed", {
        collector: `${t.host}:${t.port}`,
        error: err.message,
        failures: this.failures,
      });
    }
  }
}

/** "host:port" or "[v6]:port" (the schema checked the shape). */
export function parseTarget(text: string): { host: string; port: number } {
  const m = /^\[?(.+?)\]?:(\d+)$/.exec(text);
  if (!m) throw new Error(`flow records: collector "${text}" is not HOST:PORT`);
  return { host: m[1], port: Number(m[2]) };
}

function listen(port: number): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket("udp4");
    s.once("error", (err) => {
      s.close();
      reject(
        new Error(
          `flow records: cannot listen on 127.0.0.1:${port} for Open vSwitch's samples ` +
            `(${err.message}); choose another flowRecords.listenPort, or 0 for any free port`,
        ),
      );
    });
    s.bind(port, "127.0.0.1", () => resolve(s));
  });
}
