/**
 * knitctl: the command-line client for the manager and the node agents.
 * @module
 */
export {};
