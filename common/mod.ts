/**
 * Code more than one component needs: the manager's wire types and client, the logger, the runner.
 * The metrics are `@knitter/common/metrics` (and `/metrics_text`), apart, so that what does not
 * serve them never loads prom-client.
 * @module
 */
export * from "./annotations.ts";
export * from "./api_types.ts";
export * from "./iso_time.ts";
export * from "./log.ts";
export * from "./manager_client.ts";
export * from "./mutex.ts";
export * from "./slots.ts";
export * from "./run.ts";
export * from "./serve_unix.ts";
export * from "./group_commit.ts";
export * from "./probes.ts";
export * from "./backoff.ts";
export * from "./cluster_check.ts";
export * from "./feed_follower.ts";
export * from "./feed_source.ts";
export * from "./bandwidth.ts";
export * from "./router_routes.ts";
export * from "./port_addresses.ts";
export * from "./security_groups.ts";
export * from "./status_writer.ts";
export * from "./work_queue.ts";
export * from "./token_buckets.ts";
