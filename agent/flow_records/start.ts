/**
 * Flow records as the agent's configuration says: on (OVS samples to the agent, the flows with
 * their `sample` actions, records to the collectors), or off (an earlier run's collector set on
 * the bridge removed, so OVS samples nothing).
 */
import type { Logger } from "@knitter/common";
import type { AgentConfig } from "../config.ts";
import type { Dataplane } from "../dataplane/dataplane.ts";
import type { Ovs } from "../dataplane/ovs.ts";
import type { RemoteView } from "../dataplane/remote.ts";
import type { AgentState } from "../state.ts";
import { FlowRecords } from "./flow_records.ts";
import { stopExport } from "./ovs_export.ts";
import { portNames } from "./port_names.ts";

export async function startFlowRecords(
  config: AgentConfig,
  ovs: Ovs,
  dataplane: Dataplane,
  state: AgentState,
  remote: RemoteView,
  log: Logger,
): Promise<FlowRecords | null> {
  if (!config.flowRecords) {
    await stopExport(ovs);
    return null;
  }
  const records = new FlowRecords(config.flowRecords, {
    ovs,
    bridge: config.bridge,
    nodeName: config.nodeName,
    names: portNames(() => state.attachmentsView(), () => remote.ports()),
    log,
  });
  await records.start();
  dataplane.sampling = records.sampling;
  return records;
}
