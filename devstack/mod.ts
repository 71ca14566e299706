/**
 * A local Knitter stack on one machine, for the stack launcher (scripts/stack.ts, `make stack-up`,
 * `make demo`) and the end-to-end tests alike: simulated nodes, the stack on them, and the cleanup
 * that undoes both.
 * @module
 */
export * from "./cleanup.ts";
export * from "./sim_node.ts";
export * from "./stack.ts";
export { sweepStale } from "./stale.ts";
