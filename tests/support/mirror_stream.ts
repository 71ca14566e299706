/**
 * What the port-mirroring tests look at: a TCP stream between two pods (a payload and its echo), as
 * a capture where the copies should arrive has it, and the OVS Mirror rows on a node's br-int.
 */
import { run } from "@knitter/common";
import { Ovs } from "../../agent/dataplane/ovs.ts";
import type { Cleanup } from "../../devstack/cleanup.ts";
import { type StackNode, waitFor } from "../../devstack/stack.ts";
import { startPcap, tcpPayload, tunnelKeys } from "./pcap.ts";
import { inNetns, serve } from "./traffic.ts";

const SENDER = new URL("./payload_send.ts", import.meta.url).pathname;

export interface StreamEnd {
  netns: string;
  ip: string;
}

/** Where the copies are looked for: a pod's interface, or a tunnel's end, with a pcap filter. */
export interface Tap {
  netns: string;
  iface: string;
  filter: string;
}

export interface Seen {
  out: Uint8Array;
  back: Uint8Array;
  /** The ERSPAN sessions and VXLAN VNIs of the tunnel packets the tap saw (pcap.ts tunnelKeys). */
  keys: string[];
}

/**
 * Sends `payload` (in `payloadFile`) from client to server on `port` and back, capturing at `tap`:
 * the bytes of both directions seen there. `expect`: wait for all of it to trail in.
 */
export async function streamSeen(
  cleanup: Cleanup,
  ends: { client: StreamEnd; server: StreamEnd; tap: Tap; port: number },
  payload: { file: string; length: number },
  expect: boolean,
): Promise<Seen> {
  const { client, server, tap, port } = ends;
  const echo = await serve(cleanup, server.netns, "tcp", port, 30);
  const pcap = await startPcap(cleanup, tap.netns, tap.iface, tap.filter);
  try {
    const r = await run(
      [...inNetns(client.netns), Deno.execPath(), "run", "--quiet", "--allow-net", "--allow-read"]
        .concat([SENDER, server.ip, String(port), payload.file]),
      { check: false },
    );
    if (!JSON.parse(r.stdout).ok) throw new Error(`the stream itself: ${r.stdout} ${r.stderr}`);
  } finally {
    await echo.stop();
  }
  const seen = (file: Uint8Array): Seen => ({
    out: tcpPayload(file, { src: client.ip, dst: server.ip, dport: port }),
    back: tcpPayload(file, { src: server.ip, dst: client.ip, sport: port }),
    keys: tunnelKeys(file),
  });
  // The copies trail the stream a little: wait for all of it, if it is coming at all.
  if (expect) {
    await waitFor("the whole stream in the capture", async () => {
      const s = seen(await pcap.read());
      return s.out.length >= payload.length && s.back.length >= payload.length;
    }, 10_000).catch(() => {});
  }
  return seen(await pcap.stop());
}

/** The names of the Mirror rows on the node's br-int. */
export async function mirrorRows(node: StackNode): Promise<string[]> {
  const out = await new Ovs(node.sim.ovs).vsctl([
    "--format=json",
    "--columns=name",
    "list",
    "Mirror",
  ]);
  return (JSON.parse(out).data as [string][]).map(([name]) => name).sort();
}
