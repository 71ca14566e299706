/**
 * ADDs answered before their record's "ready" write landed. The agent answers an ADD once its
 * record says "building" (ports, ofports and the result decided) and the interfaces, switch ports
 * and flows are made; the "ready" write follows the answer (wiring.ts). A crash in between leaves
 * a "building" record for a pod its runtime believes is up, and will not DEL.
 *
 * At the agent's start, after the first flow sync (which installs the flows of every record that
 * names its ofports, "building" ones too), each "building" record whose netns, pod interfaces (with
 * the MAC the manager gave), switch ports (with their ofports) and flows (by their cookies) are all
 * there is completed as ready: CHECK passes and an ADD again gets the same answer. One that
 * lacks any of them was never answered, or lost a part since: it stays as it is, CHECK fails it,
 * and the runtime's DEL (or an ADD again) undoes all it names, as for any half-done ADD.
 */
import type { Logger } from "@knitter/common";
import type { Links } from "../interfaces/seams.ts";
import { netnsIdNow } from "../interfaces/netns.ts";
import type { AgentState, Attachment } from "../state.ts";
import { goneReason } from "./reaper.ts";
import type { Attacher } from "./attach.ts";

export interface SettleDeps {
  state: Pick<AgentState, "listAttachments">;
  attacher: Pick<Attacher, "completeAnswered">;
  links: Pick<Links, "state">;
  /** The ofport of each interface on the switch now, by name (ovsdb.ts `ofportsByName`). */
  switchPorts(): Promise<Map<string, number>>;
  /** The flows installed now (dataplane.ts `installedFlows`); null before the first sync. */
  flows(): ReadonlySet<string> | null;
  /** What a netns path is now (netns.ts `netnsIdNow`); tests give their own. */
  netnsId?: (path: string) => Promise<string | null>;
  log: Logger;
}

/** Completes the "building" records that have everything they name; answers how many. */
export async function settleAnswered(d: SettleDeps): Promise<number> {
  const building = (await d.state.listAttachments()).filter((a) =>
    a.status === "building" && !a.ipam
  );
  if (building.length === 0) return 0;
  const ports = await d.switchPorts();
  const cookies = portCookies(d.flows());
  const lacks = (a: Attachment) => missingPart(d, { ports, cookies }, a);
  let completed = 0;
  for (const a of building) {
    try {
      if (await d.attacher.completeAnswered(a, lacks)) completed++;
    } catch (err) {
      d.log.error("cannot complete an ADD answered before a restart", {
        container: a.containerId,
        ifName: a.ifName,
        error: String((err as Error)?.message ?? err),
      });
    }
  }
  return completed;
}

/** What of `a` is not there (the first thing found), or undefined when all of it is. */
async function missingPart(
  d: SettleDeps,
  { ports, cookies }: { ports: Map<string, number>; cookies: Set<number> },
  a: Attachment,
): Promise<string | undefined> {
  if (a.result === undefined) return "its CNI result";
  const gone = goneReason(a, await (d.netnsId ?? netnsIdNow)(a.netns));
  if (gone) return gone;
  for (const i of a.interfaces) {
    if (!i.port || i.ofport === undefined) return `the port of ${i.ifName}`;
    const st = await d.links.state(a.netns, i.ifName);
    if (st?.mac !== i.port.mac) return `${i.ifName} in ${a.netns} (MAC ${i.port.mac})`;
    if (ports.get(i.hostIfName) !== i.ofport) {
      return `switch port ${i.hostIfName} (ofport ${i.ofport})`;
    }
    if (!cookies.has(i.cookie)) return `the flows of ${i.ifName} (cookie ${i.cookie})`;
  }
  return undefined;
}

/**
 * The node-local port numbers that installed flows carry: a flow's cookie is its network's number
 * (high 32 bits) and its port's (low 32 bits), `cookie=0xNNNNNNNNPPPPPPPP,...`.
 */
function portCookies(flows: ReadonlySet<string> | null): Set<number> {
  const out = new Set<number>();
  for (const line of flows ?? []) {
    const m = /^cookie=0x[0-9a-f]{8}([0-9a-f]{8}),/.exec(line);
    if (m) out.add(parseInt(m[1], 16));
  }
  return out;
}
