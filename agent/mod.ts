/**
 * The Knitter node agent: builds pod interfaces on Open vSwitch for the CNI plugin.
 * @module
 */
export { type AgentConfig, AgentConfigSchema, loadAgentConfig } from "./config.ts";
export { type RunningAgent, startAgent } from "./daemon.ts";
export { CNI_CODE, CniError } from "@knitter/plugin/contract";
export type { CniRequest } from "./cni/pod_request.ts";
export type { VerifyView } from "./dataplane/trace.ts";
