/**
 * How the agent's view and the monitor's port index follow the manager's change feed: the feed
 * source they hand to FeedFollower (feed_follower.ts).
 */
import type { FeedSource } from "./feed_follower.ts";
import type { Logger } from "./log.ts";
import type { ManagerClient } from "./manager_client.ts";

/**
 * The manager as the feed's source, its feed followed over a WebSocket first: a manager that
 * refuses the socket (one that predates them, or behind its connection guard) is followed by its
 * NDJSON stream, which falls back to long polls in turn (FeedFollower). Tried again at each
 * reconnection, so that a manager upgraded meanwhile is followed by socket.
 */
export function socketFirst(manager: ManagerClient, log: Logger): FeedSource {
  const source: FeedSource = {
    feedCursor: (signal) => manager.feedCursor(signal),
    feedSince: (cursor, timeoutS, signal) => manager.feedSince(cursor, timeoutS, signal),
  };
  // A stand-in without streams (or sockets) is long-polled, or streamed, as it can.
  if (typeof manager.feedStream !== "function") return source;
  if (typeof manager.feedSocket !== "function") {
    return { ...source, feedStream: (...args) => manager.feedStream(...args) };
  }
  let told = false;
  return {
    ...source,
    async feedStream(cursor, heartbeatS, page, signal) {
      const outcome = await manager.feedSocket(cursor, heartbeatS, page, signal);
      if (outcome !== "refused") return outcome;
      if (!told) log.info("the manager's feed: no WebSocket; following its stream");
      told = true;
      return manager.feedStream(cursor, heartbeatS, page, signal);
    },
  };
}
