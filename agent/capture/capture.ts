/**
 * `knitctl capture` on the node: a pcap of one port's host veth (or of a mirror's copies:
 * mirror_capture.ts), taken by tcpdump for N packets or S seconds, whichever comes first. Who may capture is the manager's word, asked with the caller's
 * own token: a port it shows that token, bound to this node and attached here by this agent.
 */
import { run } from "@knitter/common";
import {
  allowedPort,
  type CaptureDeps,
  CaptureRefused,
  type CaptureTarget,
  hostInterface,
} from "./allowed.ts";
import { mirrorTarget } from "./mirror_capture.ts";

export { type CaptureDeps, CaptureRefused };

/** What a caller asks for: a port, or a mirror; the bounds are in CAPTURE_LIMITS. */
export interface CaptureRequest {
  tenant: string;
  network?: string;
  port?: string;
  /** A mirror of the tenant's: its copies where this node sends them (mirror_capture.ts). */
  mirror?: string;
  packets: number;
  seconds: number;
  filter?: string;
  /** The pod's view, as a mirror's: what it receives (in), sends (out), or both. */
  direction: "both" | "in" | "out";
}

/** The request's bounds: a capture is a look at a port, never a recorder left running. */
export const CAPTURE_LIMITS = {
  packets: { min: 1, max: 10_000, default: 100 },
  seconds: { min: 1, max: 300, default: 10 },
  filterBytes: 1024,
} as const;

/**
 * Bytes kept of each packet: a jumbo frame whole. The file is at most 24 + packets * (16 + this)
 * bytes (about 92 MB at 10,000 packets), which bounds what the agent holds and answers.
 */
export const SNAPLEN = 9216;

/** tcpdump's -Q on the host veth, whose "in" is what the pod sent. */
const QUEUE: Record<CaptureRequest["direction"], CaptureTarget["queue"]> = {
  both: "inout",
  in: "out",
  out: "in",
};

/** The pcap file's bytes of the port's (or mirror's) traffic, once N packets or S seconds are taken. */
export async function capture(
  deps: CaptureDeps,
  token: string,
  req: CaptureRequest,
): Promise<Uint8Array> {
  const target = req.mirror !== undefined
    ? await mirrorTarget(deps, token, { tenant: req.tenant, mirror: req.mirror })
    : await portTarget(deps, token, req);
  const filter = [target.filter, req.filter].filter((f) => f).map((f) => `(${f})`).join(" and ");
  if (req.filter) await checkFilter(target.iface, req.filter);
  const file = await Deno.makeTempFile({ prefix: "knitter-capture-", suffix: ".pcap" });
  try {
    await runTcpdump(target, file, { ...req, filter });
    deps.log.info("capture", {
      of: target.what,
      iface: target.iface,
      packets: req.packets,
      seconds: req.seconds,
    });
    return await Deno.readFile(file);
  } finally {
    await Deno.remove(file).catch(() => {});
  }
}

/** A port's host veth, as the pod's direction asks. */
async function portTarget(
  deps: CaptureDeps,
  token: string,
  req: CaptureRequest,
): Promise<CaptureTarget> {
  const ref = { tenant: req.tenant, network: req.network ?? "", port: req.port ?? "" };
  const port = await allowedPort(deps, token, ref);
  return {
    what: `${ref.tenant}/${ref.network}/${ref.port}`,
    iface: hostInterface(deps, ref, port),
    queue: QUEUE[req.direction],
  };
}

/** Compiles the filter for the interface (tcpdump -d): a bad one is the caller's 400. */
async function checkFilter(hostIf: string, filter: string): Promise<void> {
  const r = await run(["tcpdump", "-d", "-i", hostIf, filter], { check: false, timeoutMs: 10_000 });
  if (r.code !== 0) {
    throw new CaptureRefused(
      400,
      `The capture filter "${filter}" is not valid: tcpdump says: ${lastLine(r.stderr)}`,
    );
  }
}

/** tcpdump until N packets, or SIGINT after S seconds (it flushes the file then). */
async function runTcpdump(
  target: CaptureTarget,
  file: string,
  req: CaptureRequest,
): Promise<void> {
  const hostIf = target.iface;
  const argv = [
    ...["timeout", "-s", "INT", String(req.seconds)],
    ...["tcpdump", "--immediate-mode", "-U", "-nn", "-B", "8192", "-s", String(SNAPLEN)],
    ...["-Q", target.queue, "-c", String(req.packets), "-i", hostIf, "-w", file],
    ...(req.filter ? [req.filter] : []),
  ];
  // `timeout` answers 124 when the time ran out: a capture of what came meanwhile.
  const r = await run(argv, { check: false, timeoutMs: (req.seconds + 10) * 1000 });
  if (r.code !== 0 && r.code !== 124) {
    throw new Error(`tcpdump on ${hostIf} failed (exit ${r.code}): ${lastLine(r.stderr)}`);
  }
}

function lastLine(text: string): string {
  return text.trim().split("\n").filter((l) => !/^(listening on|\d+ packets)/.test(l)).at(-1) ??
    "(no message)";
}
