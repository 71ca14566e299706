import type { NetworkRef } from "./networks.ts";

/**
 * Start a PUT over: on another network record, or on fresh reads (the cached pool said "full").
 * Thrown by the allocation, caught by the careful path (port_retry.ts) and the batch
 * (port_batch.ts).
 */
export class Restart extends Error {
  constructor(readonly network?: NetworkRef) {
    super("restart");
  }
}
