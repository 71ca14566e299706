/**
 * The CNI plugin's public surface: the protocol the node agent implements (request and reply
 * types, routes, versions, error codes) and the plugin's core for in-process tests.
 * The executable is main.ts; see README.md.
 * @module
 */
export * from "./contract.ts";
export * from "./protocol.ts";
export { type PluginOutput, runCommand } from "./run_command.ts";
