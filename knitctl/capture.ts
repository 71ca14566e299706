/**
 * capture: a pcap file of one port's traffic, taken on its node by the agent (tcpdump on the
 * port's host veth), or of a mirror's copies (--mirror), for N packets or S seconds, with a BPF
 * filter. The agent asks the manager with
 * this knitctl's token whether the port is the caller's to see.
 */
import type { Port } from "@knitter/common";
import { requireFlagsOf, str, VERB_FLAGS } from "./args.ts";
import { captureOnAgent, type CaptureRequest } from "./agent_client.ts";
import { agentSocket, type AttachContext } from "./attach.ts";
import { CommandFailed, UsageError } from "./errors.ts";
import { explainManagerError } from "./failures.ts";
import { json } from "./output.ts";
import * as V from "./values.ts";
import { managerClient } from "./verbs.ts";

const DIRECTIONS = ["both", "in", "out"] as const;

export async function capture(c: AttachContext): Promise<void> {
  requireFlagsOf(c.line, VERB_FLAGS.capture, "capture");
  if (c.line.args.length) {
    throw new UsageError(`capture takes flags only, not "${c.line.args.join(" ")}"`);
  }
  const f = c.line.flags;
  const file = str(f, "write");
  if (!file) throw new UsageError("capture needs -w FILE, the pcap file to write");
  const direction = str(f, "direction");
  if (direction !== undefined && !(DIRECTIONS as readonly string[]).includes(direction)) {
    throw new UsageError(`--direction "${direction}" must be in, out or both (the pod's view)`);
  }
  const token = c.settings.token;
  if (!token) {
    throw new UsageError("capture needs your manager token (--token or KNITCTL_TOKEN)");
  }
  const packets = str(f, "packets");
  const seconds = str(f, "seconds");
  const filter = str(f, "filter");
  const req: CaptureRequest = {
    tenant: c.settings.tenant,
    ...await targetOf(c),
    ...(packets !== undefined ? { packets: V.integer("packets", packets, 1, 10_000) } : {}),
    ...(seconds !== undefined ? { seconds: V.integer("seconds", seconds, 1, 300) } : {}),
    ...(filter ? { filter } : {}),
    ...(direction ? { direction: direction as CaptureRequest["direction"] } : {}),
  };
  const pcap = await captureOnAgent(agentSocket(c), token, req);
  try {
    await Deno.writeFile(file, pcap);
  } catch (err) {
    throw new CommandFailed(`Cannot write the capture to ${file}: ${(err as Error).message}`);
  }
  const packetsTaken = countPackets(pcap);
  const done = { file, bytes: pcap.length, packets: packetsTaken };
  c.io.out(
    c.settings.output === "json"
      ? json(done)
      : `${packetsTaken} packets of ${shown(req)} written to ${file}\n`,
  );
}

/** `--mirror NAME` alone (its copies, whatever way they go), or a port. */
async function targetOf(c: AttachContext): Promise<{ mirror: string } | PortTarget> {
  const mirror = str(c.line.flags, "mirror");
  if (mirror === undefined) return await portOf(c);
  const portFlags = ["network", "port", "pod", "ifname", "direction"].filter((k) =>
    c.line.flags[k]
  );
  if (portFlags.length > 0) {
    throw new UsageError(
      `--mirror captures the mirror's copies; leave out ${
        portFlags.map((k) => `--${k}`).join(", ")
      } (they name a port)`,
    );
  }
  return { mirror };
}

type PortTarget = { network: string; port: string };

function shown(req: CaptureRequest): string {
  return req.mirror !== undefined
    ? `mirror ${req.tenant}/${req.mirror}`
    : `${req.tenant}/${req.network}/${req.port}`;
}

/** `--network NET --port ID`, or the port of `--pod NS/NAME --ifname IF` (the manager's). */
async function portOf(c: AttachContext): Promise<PortTarget> {
  const f = c.line.flags;
  const network = str(f, "network");
  const port = str(f, "port");
  if (network && port) return { network, port };
  const pod = str(f, "pod");
  if (!pod) {
    throw new UsageError(
      "capture needs --network NET --port ID, or --pod NS/NAME (--ifname IF) to find the port",
    );
  }
  const client = await managerClient(c.settings);
  let ports: Port[];
  try {
    ports = await client.listPorts({ pod, tenant: c.settings.tenant });
  } catch (err) {
    throw explainManagerError(err, `knitctl -t ${c.settings.tenant} get ports --pod ${pod}`);
  } finally {
    client.close();
  }
  const ifname = str(f, "ifname") ?? "eth0";
  const found = ports.filter((p) =>
    (p.interface ?? "eth0") === ifname && (!network || p.network === network)
  );
  if (found.length !== 1) {
    throw new UsageError(
      `Pod ${pod} has ${found.length} ports on interface ${ifname} for tenant ${c.settings.tenant}: name it with --network NET --port ID ("knitctl get ports --pod ${pod}" lists them)`,
    );
  }
  return { network: found[0].network, port: found[0].id };
}

/** The records in a pcap file: its 24-byte header, then a 16-byte header and the bytes of each. */
function countPackets(pcap: Uint8Array): number {
  if (pcap.length < 24) return 0;
  const view = new DataView(pcap.buffer, pcap.byteOffset, pcap.byteLength);
  const little = view.getUint32(0, true) === 0xa1b2c3d4 || view.getUint32(0, true) === 0xa1b23c4d;
  let n = 0;
  for (let at = 24; at + 16 <= pcap.length; n++) at += 16 + view.getUint32(at + 8, little);
  return n;
}
