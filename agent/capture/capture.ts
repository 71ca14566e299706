/**
 * `knitctl capture` on the node: a pcap of one port's host veth, taken by tcpdump for N packets or
 * S seconds, whichever comes first. Who may capture is the manager's word, asked with the caller's
 * own token: a port it shows that token, bound to this node and attached here by this agent.
 */
import { type Logger, type ManagerClient, ManagerError, type Port, run } from "@knitter/common";
import { portKey } from "../dataplane/port_key.ts";
import type { AgentState } from "../state.ts";

/** What a caller asks for; the bounds are in CAPTURE_LIMITS. */
export interface CaptureRequest {
  tenant: string;
  network: string;
  port: string;
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

export interface CaptureDeps {
  nodeName: string;
  state: AgentState;
  /** A manager client that calls with `token` (the caller's), closed after use. */
  managerAs(token: string): ManagerClient;
  log: Logger;
}

/** A capture refused for what the caller asked: `status` says how (400, 403). */
export class CaptureRefused extends Error {
  constructor(readonly status: 400 | 403, message: string) {
    super(message);
    this.name = "CaptureRefused";
  }
}

/** tcpdump's -Q on the host veth, whose "in" is what the pod sent. */
const QUEUE: Record<CaptureRequest["direction"], string> = { both: "inout", in: "out", out: "in" };

/** The pcap file's bytes of the port's traffic, once N packets or S seconds are taken. */
export async function capture(
  deps: CaptureDeps,
  token: string,
  req: CaptureRequest,
): Promise<Uint8Array> {
  const port = await allowedPort(deps, token, req);
  const hostIf = hostInterface(deps, req, port);
  if (req.filter) await checkFilter(hostIf, req.filter);
  const file = await Deno.makeTempFile({ prefix: "knitter-capture-", suffix: ".pcap" });
  try {
    await runTcpdump(hostIf, file, req);
    deps.log.info("capture", {
      port: `${req.tenant}/${req.network}/${req.port}`,
      iface: hostIf,
      packets: req.packets,
      seconds: req.seconds,
    });
    return await Deno.readFile(file);
  } finally {
    await Deno.remove(file).catch(() => {});
  }
}

/** The port as the manager shows it to the caller's token, bound to this node; else refused. */
async function allowedPort(deps: CaptureDeps, token: string, req: CaptureRequest): Promise<Port> {
  const name = `${req.tenant}/${req.network}/${req.port}`;
  const manager = deps.managerAs(token);
  let port: Port;
  try {
    port = await manager.request<Port>(
      "GET",
      `/api/v1/tenants/${enc(req.tenant)}/networks/${enc(req.network)}/ports/${enc(req.port)}`,
    );
  } catch (err) {
    if (err instanceof ManagerError) {
      throw new CaptureRefused(
        403,
        `Capture of port ${name} refused: the manager does not show this port to your token (${err.status} ${err.message}); use the token of the port's tenant, or an admin token`,
      );
    }
    throw err;
  } finally {
    manager.close();
  }
  if (port.node !== deps.nodeName) {
    throw new CaptureRefused(
      403,
      `Capture of port ${name} refused: it is bound to ${
        port.node ? `node ${port.node}` : "no node"
      }, not to ${deps.nodeName}; run knitctl capture against that node's agent`,
    );
  }
  return port;
}

/** The host veth of the port's interface on this node, or why there is none to capture. */
function hostInterface(deps: CaptureDeps, req: CaptureRequest, port: Port): string {
  const name = `${req.tenant}/${req.network}/${req.port}`;
  // The port the manager showed this token, by its owner: on a public network a tenant's port of
  // an ID is never another tenant's port of that ID, whatever path the request named.
  const key = portKey(port);
  const found = [...deps.state.attachmentsView()].flatMap((a) => a.interfaces).find((i) =>
    i.port !== undefined && portKey(i.port) === key
  );
  if (!found) {
    throw new CaptureRefused(
      403,
      `Capture of port ${name} refused: no interface of this node's agent holds it (the manager binds it to ${port.node}, the pod may be gone or not made yet)`,
    );
  }
  if (found.hostIfName === "") {
    throw new CaptureRefused(
      400,
      `Cannot capture port ${name}: its network has an external data plane (another plugin made its interface; knitter has no veth of it on the node); capture inside the pod instead`,
    );
  }
  return found.hostIfName;
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
async function runTcpdump(hostIf: string, file: string, req: CaptureRequest): Promise<void> {
  const argv = [
    ...["timeout", "-s", "INT", String(req.seconds)],
    ...["tcpdump", "--immediate-mode", "-U", "-nn", "-B", "8192", "-s", String(SNAPLEN)],
    ...["-Q", QUEUE[req.direction], "-c", String(req.packets), "-i", hostIf, "-w", file],
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

const enc = encodeURIComponent;
