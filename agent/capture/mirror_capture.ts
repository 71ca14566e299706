/**
 * `knitctl capture --mirror NAME`: a mirror's copies as this node sends them (manager/README.md,
 * "Port mirrors"). Whose mirror the caller may capture is the manager's word, as for a port: the
 * mirror as it shows the caller's token. A collector port's copies are what its host veth sends
 * to the collector pod; a remote collector's, the tunnel packets this node sends to its address
 * (on any interface: the underlay's), encapsulation and all, as the collector receives them: an
 * admin's only, since that tunnel carries every mirror's copies to the address.
 */
import { isRemoteCollector, type MirrorInfo, type MirrorRemote } from "@knitter/common";
import { portKey } from "../dataplane/port_key.ts";
import {
  allowedPort,
  type CaptureDeps,
  CaptureRefused,
  type CaptureTarget,
  enc,
  hostInterface,
  shownToCaller,
} from "./allowed.ts";

/** The packets of each tunnel kind (what OVS sends a remote collector). */
const ENCAPSULATION: Record<MirrorRemote["remote"]["protocol"], string> = {
  gre: "ip proto 47",
  erspan: "ip proto 47",
  vxlan: "udp dst port 4789",
};

/** Where the copies of the tenant's mirror leave this node, or why not here. */
export async function mirrorTarget(
  deps: CaptureDeps,
  token: string,
  req: { tenant: string; mirror: string },
): Promise<CaptureTarget> {
  const name = `${req.tenant}/${req.mirror}`;
  const mirror = await shownToCaller<MirrorInfo>(
    deps,
    token,
    `/api/v1/tenants/${enc(req.tenant)}/mirrors/${enc(req.mirror)}`,
    { kind: "mirror", name },
  );
  const what = `mirror ${name}`;
  const c = mirror.collector;
  if (!isRemoteCollector(c)) {
    const ref = { tenant: mirror.tenant, network: c.network, port: c.id };
    const port = await allowedPort(deps, token, ref);
    // What the collector pod receives: the copies (what it sends, OVS drops).
    return { what, iface: hostInterface(deps, ref, port), queue: "out" };
  }
  if (!hostsSource(deps, mirror)) {
    throw new CaptureRefused(
      403,
      `Capture of mirror ${name} refused: no source port of it is on ${deps.nodeName}, so this node sends it no copies; run knitctl capture against the node of one of its sources (knitctl get ports)`,
    );
  }
  await adminOnly(deps, token, name, c);
  const { ip, protocol } = c.remote;
  return {
    what,
    iface: "any",
    queue: "out",
    filter: `ip dst host ${ip} and ${ENCAPSULATION[protocol]}`,
  };
}

/**
 * A remote collector's tunnel is captured with an admin token only: its packets to that address
 * are every mirror's to it, other tenants' too (copies to one collector share its port). Only an
 * admin's (or a node's) token lists every tenant's mirrors.
 */
async function adminOnly(
  deps: CaptureDeps,
  token: string,
  name: string,
  c: MirrorRemote,
): Promise<void> {
  try {
    await shownToCaller(deps, token, "/api/v1/mirrors", { kind: "mirror", name });
  } catch (err) {
    if (!(err instanceof CaptureRefused)) throw err;
    throw new CaptureRefused(
      403,
      `Capture of mirror ${name} refused: its copies go to the remote collector ${c.remote.ip} over ${c.remote.protocol}, whose tunnel also carries other mirrors' copies; capturing it needs an admin token (or capture at the collector, or the source port itself)`,
    );
  }
}

/** Whether an interface of this node's agent holds one of the mirror's sources. */
function hostsSource(deps: CaptureDeps, mirror: MirrorInfo): boolean {
  const sources = new Set(mirror.sources.map((s) => portKey({ ...s, tenant: mirror.tenant })));
  return [...deps.state.attachmentsView()].some((a) =>
    a.interfaces.some((i) => i.port !== undefined && sources.has(portKey(i.port)))
  );
}
