/**
 * flows collect: a small IPFIX collector for the agents' flow records (agent/README.md, "Flow
 * records"). Listens on UDP for S seconds, decodes Knitter's records and prints the top talkers
 * of each network (bytes by source and destination), or, with -o json, every record and the
 * talkers.
 */
import dgram from "node:dgram";
import { type FlowRecord, readMessage, TemplateStore } from "@knitter/agent/flow_records";
import { str } from "./args.ts";
import type { AttachContext } from "./attach.ts";
import { UsageError } from "./errors.ts";
import { json, table } from "./output.ts";

const DEFAULT_LISTEN = "127.0.0.1:4739";
const DEFAULT_SECONDS = 10;
const TOP = 10;

const PROTOCOLS: Record<number, string> = { 1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6" };

/** One talker: what a source sent a destination (on one protocol and port) in the window. */
export interface Talker {
  tenant: string;
  network: string;
  src: string;
  dst: string;
  protocol: string;
  dstPort: number;
  bytes: number;
  packets: number;
  decision: "allow" | "deny";
}

export async function collect(c: AttachContext): Promise<void> {
  const { host, port } = listenAddress(str(c.line.flags, "listen") ?? DEFAULT_LISTEN);
  const seconds = secondsOf(str(c.line.flags, "seconds"));
  const { records, malformed } = await receive(host, port, seconds);
  const talkers = topTalkers(records);
  if (c.settings.output === "json") {
    c.io.out(json({ records, talkers, malformed }));
    return;
  }
  const rows = talkers.map((t) => [
    `${t.tenant}/${t.network}`,
    t.src,
    t.dst,
    `${t.protocol}${t.dstPort ? `/${t.dstPort}` : ""}`,
    String(t.bytes),
    String(t.packets),
    t.decision,
  ]);
  const note = `${records.length} records in ${seconds} s on ${host}:${port}` +
    (malformed ? `, ${malformed} unreadable messages` : "");
  c.io.out(
    (rows.length
      ? table(["NETWORK", "SOURCE", "DESTINATION", "PROTO", "BYTES", "PACKETS", "DECISION"], rows)
      : "") + note + "\n",
  );
}

/** Per network, its TOP pairs by bytes, the largest first; networks by name. */
export function topTalkers(records: FlowRecord[]): Talker[] {
  const pairs = new Map<string, Talker>();
  for (const r of records) {
    const t: Talker = {
      tenant: r.tenant,
      network: r.network,
      src: r.srcPod || r.src,
      dst: r.dstPod || r.dst,
      protocol: PROTOCOLS[r.protocol] ?? String(r.protocol),
      dstPort: r.dstPort,
      bytes: 0,
      packets: 0,
      decision: "allow",
    };
    const key = [t.tenant, t.network, t.src, t.dst, t.protocol, t.dstPort].join("|");
    const have = pairs.get(key) ?? t;
    have.bytes += r.bytes;
    have.packets += r.packets;
    if (r.decision === "deny") have.decision = "deny";
    pairs.set(key, have);
  }
  const byNetwork = Map.groupBy(pairs.values(), (t) => `${t.tenant}/${t.network}`);
  return [...byNetwork.keys()].sort().flatMap((k) =>
    byNetwork.get(k)!.sort((a, b) => b.bytes - a.bytes).slice(0, TOP)
  );
}

function receive(
  host: string,
  port: number,
  seconds: number,
): Promise<{ records: FlowRecord[]; malformed: number }> {
  const records: FlowRecord[] = [];
  let malformed = 0;
  const store = new TemplateStore();
  const socket = dgram.createSocket(host.includes(":") ? "udp6" : "udp4");
  return new Promise((resolve, reject) => {
    socket.once("error", (err) => {
      socket.close();
      reject(
        new UsageError(
          `flows collect: cannot listen on ${host}:${port} (${err.message}); choose another --listen`,
        ),
      );
    });
    socket.on("message", (msg, from) => {
      try {
        records.push(...readMessage(new Uint8Array(msg), store, `${from.address}:${from.port}`));
      } catch {
        // Not IPFIX, or not well formed (an IpfixError): anyone may send to the port.
        malformed++;
      }
    });
    socket.bind(port, host, () => {
      setTimeout(() => {
        socket.close();
        resolve({ records, malformed });
      }, seconds * 1000);
    });
  });
}

function listenAddress(text: string): { host: string; port: number } {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(text);
  const port = Number(m?.[2]);
  if (!m || port < 1 || port > 65535) {
    throw new UsageError(`--listen "${text}" must be HOST:PORT, e.g. ${DEFAULT_LISTEN}`);
  }
  return { host: m[1], port };
}

function secondsOf(text: string | undefined): number {
  if (text === undefined) return DEFAULT_SECONDS;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 86_400) {
    throw new UsageError(`--seconds "${text}" must be a whole number of seconds, 1-86400`);
  }
  return n;
}
