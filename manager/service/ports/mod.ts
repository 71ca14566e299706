/**
 * Ports: one address of a network, bound to a pod's interface. The only import path for the rest
 * of the manager; the concept's files beside it, one each: put.ts (a PUT's entry and its careful
 * path), batch.ts (new ports in one commit), guards.ts (what a commit checks, and restarts),
 * allocation.ts (an address, a MAC, the record), binding.ts (second PUTs, unbind), release.ts
 * (DELETE), groups.ts (PATCH of security groups), reads.ts (GET and lists), access.ts (who may ask
 * what), claimed.ts (ports bound to a claim, live migration's activation) and records.ts (the
 * record, its keys, indexes and view).
 */
export { putPort } from "./put.ts";
export { getPort, listNetworkPorts, listPorts } from "./reads.ts";
export { unbindPort } from "./binding.ts";
export { activatePort } from "./claimed.ts";
export { deletePort } from "./release.ts";
export { patchPortGroups, type PortGroupsBody } from "./groups.ts";
export { visible } from "./access.ts";
export {
  carriedChange,
  keyId,
  type PortBody,
  portKeyId,
  type PortTarget,
  portView,
  type PutResult,
} from "./records.ts";
