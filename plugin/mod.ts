/**
 * What the CNI plugin and the node agent share: the CNI contract (versions, error codes, result
 * types and their conversion, name rules) and a call's shape as the agent handles it. The plugin
 * itself is the native forwarder of knitter.c; see README.md.
 * @module
 */
export * from "./contract.ts";
export * from "./protocol.ts";
