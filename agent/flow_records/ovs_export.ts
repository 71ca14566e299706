/**
 * Open vSwitch's side of flow records: a Flow_Sample_Collector_Set on the bridge whose IPFIX row
 * sends the samples of the `sample(...)` actions to the agent, on the node's loopback. The row is
 * marked as the agent's (external_ids), replaced as a whole when the agent starts, and removed
 * when flow records are turned off.
 */
import type { Ovs } from "../dataplane/ovs.ts";

const MARK = "knitter-flow-records";

/**
 * How long OVS keeps a sampled flow before it sends its counts (cache_active_timeout, seconds):
 * the agent's idle and active timeouts count from the packets' own times, so this only bounds how
 * late the agent hears of them.
 */
export const OVS_CACHE_SECONDS = 2;

/**
 * Flows OVS's IPFIX cache holds (cache_max_flows). Without it OVS caches nothing and sends one
 * message per sampled packet (flowEndReason 5, "lack of resources"), which a busy agent's socket
 * drops; with it, one record per flow every OVS_CACHE_SECONDS.
 */
export const OVS_CACHE_FLOWS = 8192;

/** Replaces the agent's collector set on `bridge` by one that sends to 127.0.0.1:`port`. */
export async function exportToAgent(
  ovs: Ovs,
  bridge: string,
  setId: number,
  port: number,
): Promise<void> {
  const old = await ours(ovs);
  await ovs.vsctl([
    ...old.flatMap((uuid) => ["--", "destroy", "Flow_Sample_Collector_Set", uuid]),
    "--",
    "--id=@br",
    "get",
    "Bridge",
    bridge,
    "--",
    "--id=@i",
    "create",
    "IPFIX",
    `targets="127.0.0.1:${port}"`,
    `cache_active_timeout=${OVS_CACHE_SECONDS}`,
    `cache_max_flows=${OVS_CACHE_FLOWS}`,
    "--",
    "create",
    "Flow_Sample_Collector_Set",
    `id=${setId}`,
    "bridge=@br",
    "ipfix=@i",
    `external_ids:${MARK}=true`,
  ]);
}

/** Removes the agent's collector set, if any (its IPFIX row goes with it). */
export async function stopExport(ovs: Ovs): Promise<void> {
  const old = await ours(ovs);
  if (old.length === 0) return;
  await ovs.vsctl(old.flatMap((uuid) => ["--", "destroy", "Flow_Sample_Collector_Set", uuid]));
}

async function ours(ovs: Ovs): Promise<string[]> {
  const out = await ovs.vsctl([
    "--bare",
    "--columns=_uuid",
    "find",
    "Flow_Sample_Collector_Set",
    `external_ids:${MARK}=true`,
  ]);
  return out.split(/\s+/).filter(Boolean);
}
