/**
 * Code more than one component needs: the manager's wire types and the logger.
 * @module
 */
export * from "./api_types.ts";
export * from "./log.ts";
export * from "./mutex.ts";
export * from "./run.ts";
export * from "./serve_unix.ts";
export * from "./group_commit.ts";
