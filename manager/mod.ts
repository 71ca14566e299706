/**
 * The Knitter manager: REST API and IPAM. Embed with `createApp` + `createContext`, or run
 * `main.ts`.
 * @module
 */
export { createApp, MAX_BODY_BYTES } from "./app.ts";
export { type Principal, type TokenConfig, TokenTable } from "./auth.ts";
export { loadConfig, type ManagerConfig } from "./config.ts";
export { ApiError, ERROR_STATUS, type ErrorCode } from "./errors.ts";
export { ADMIN_TENANT, createContext, startManager } from "./server.ts";
export { openKvStore } from "./store/kv_store.ts";
export type { Store } from "./store/store.ts";
