/**
 * The change feed: port, node, router and security group changes from a cursor, long-polled (a
 * page an answer) or streamed (`stream=ndjson`: one answer, a page a line, feed_streams.ts;
 * `stream=websocket`: a WebSocket, a page a message, feed_sockets.ts).
 */
import { ApiError } from "../errors.ts";
import * as S from "../schemas.ts";
import { cursorFor, feedFor, feedStreamFor } from "../service/cluster_view.ts";
import { ok, type Resource, route } from "./route.ts";
import { errorLine, type FeedSink, FeedStream } from "../feed_streams.ts";
import { FeedSocket } from "../feed_sockets.ts";
import { FEED_PATH, socketPortOf } from "../feed_listener.ts";

/** How a streamed follower's pages go, by its `stream` parameter. */
const SINKS: Record<"ndjson" | "websocket", (first: Uint8Array) => FeedSink> = {
  ndjson: (first) => new FeedStream(first),
  websocket: (first) => new FeedSocket(first),
};

export const FEED: Resource = {
  tag: "feed",
  routes: [
    route({
      method: "GET",
      path: "/feed",
      summary:
        "Follow port and node changes: long-poll from a cursor, or stream pages (stream=ndjson, or stream=websocket with a WebSocket handshake); 410 means list again",
      access: "infra",
      ok: {
        status: 200,
        schema: S.FeedPage,
        description: "the events after the cursor (maybe none)",
      },
    }).query(S.FeedQuery)
      .handle(async ({ ctx, principal, query }) => {
        if (query.after === undefined && !query.stream) {
          return ok({ cursor: cursorFor(principal, ctx.feed.cursor()), events: [] });
        }
        // A stream without a cursor follows from now: its first (empty) page carries the cursor,
        // so a follower's one connection is its cursor and its feed.
        const after = query.after ?? cursorFor(principal, ctx.feed.cursor());
        // A stream never spins: at most one empty page a second.
        const heartbeatMs = Math.max(1, query.timeout) * 1000;
        const page = query.stream
          ? await feedStreamFor(ctx, principal, {
            after,
            heartbeatMs,
            sinkOf: SINKS[query.stream],
          })
          : await feedFor(ctx, principal, { after, timeoutMs: query.timeout * 1000 });
        if (page === "expired") {
          const expired = new ApiError(
            "feed_expired",
            "The cursor is too old, from before a manager restart, or from before a change of this token's cluster: take a new cursor (this route without 'after'), list ports and nodes again, then follow from that cursor",
          );
          // A socket's client cannot read a refused handshake's status: it hears the expiry as a
          // stream's follower does, its only line, rather than asking a stream to learn it.
          if (query.stream !== "websocket") throw expired;
          const socket = new FeedSocket(errorLine(expired));
          socket.close();
          return ok(socket);
        }
        return ok(page);
      }),
    route({
      method: "GET",
      path: "/feed/socket",
      summary:
        "Where to open the feed's WebSocket: the manager's feed socket port (config listen.feedSocketPort), on which sockets live with the connection guard's protections on; 404 when it has none",
      access: "infra",
      ok: { status: 200, schema: S.FeedSocketInfo, description: "the feed socket's port and path" },
    }).handle(({ ctx }) => Promise.resolve().then(() => socketInfo(ctx))),
  ],
};

/** The feed socket's port and path, or why this manager has none. */
function socketInfo(ctx: object) {
  const port = socketPortOf(ctx);
  if (port === undefined) {
    throw new ApiError(
      "not_found",
      "This manager has no feed socket port (listen.feedSocketPort is 0): follow the feed with stream=ndjson, or stream=websocket on a manager served without its connection guard",
    );
  }
  return ok({ port, path: FEED_PATH });
}
