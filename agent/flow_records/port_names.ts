/**
 * The names flow records carry (tenant, network, pods), from what the agent knows: its
 * attachments (local ports, by the veth on the bridge and by MAC) and the manager's view of the
 * other nodes' ports (a peer pod by its address in the network).
 */
import { type Port, portIps } from "@knitter/common";
import type { Attachment } from "../state.ts";
import type { PortName, PortNames } from "./connections.ts";

/** The index of this moment: rebuilt when asked again after `maxAgeMs`. */
export function portNames(
  attachments: () => Iterable<Readonly<Attachment>>,
  remotePorts: () => Iterable<Port>,
  maxAgeMs = 1000,
): () => PortNames {
  let built = -Infinity;
  let index: PortNames | null = null;
  return () => {
    const now = performance.now();
    if (!index || now - built >= maxAgeMs) {
      index = build(attachments(), remotePorts());
      built = now;
    }
    return index;
  };
}

function build(attachments: Iterable<Readonly<Attachment>>, remote: Iterable<Port>): PortNames {
  const byIfName = new Map<string, PortName>();
  const byMac = new Map<string, PortName>();
  const pods = new Map<string, string>();
  const addresses = (networkId: string, p: Port, pod: string) => {
    for (const ip of portIps(p)) pods.set(`${networkId}|${ip}`, pod);
  };
  for (const p of remote) {
    addresses(p.networkId, p, p.pod ? `${p.pod.namespace}/${p.pod.name}` : "");
  }
  for (const a of attachments) {
    const pod = a.pod ? `${a.pod.namespace}/${a.pod.name}` : a.containerId;
    for (const i of a.interfaces) {
      if (!i.port || !i.hostIfName) continue;
      const name = {
        tenant: i.port.tenant,
        network: i.port.network,
        networkId: i.port.networkId,
        pod,
      };
      byIfName.set(i.hostIfName, name);
      byMac.set(i.port.mac, name);
      addresses(i.port.networkId, i.port, pod);
    }
  }
  return {
    byIfName: (n) => byIfName.get(n),
    byMac: (m) => byMac.get(m),
    podOf: (networkId, ip) => pods.get(`${networkId}|${ip}`) ?? "",
  };
}
