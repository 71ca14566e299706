/**
 * The CNI plugin's public surface: the protocol the node agent implements (request and reply
 * types, routes, versions, error codes) and the plugin's core for in-process tests.
 * The executable is main.ts; see README.md.
 * @module
 */
export * from "./protocol.ts";
export { CNI_ERR, CniError } from "./errors.ts";
export { convertResult } from "./result.ts";
export { type PluginOutput, runCommand } from "./run_command.ts";
