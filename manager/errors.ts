/**
 * Every error the API can answer, with its stable code. The code's HTTP status is decided here and
 * nowhere else.
 */
import type { ErrorBody } from "@knitter/common";

export const ERROR_STATUS = {
  invalid_json: 400,
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  quota_exceeded: 403,
  not_found: 404,
  request_timeout: 408,
  already_exists: 409,
  conflict: 409,
  in_use: 409,
  address_taken: 409,
  pool_exhausted: 409,
  mac_taken: 409,
  network_deleting: 409,
  feed_expired: 410,
  body_too_large: 413,
  uri_too_long: 414,
  unsupported_media_type: 415,
  /** A request head over the feed socket listener's bound (feed_listener.ts). */
  header_too_large: 431,
  invalid_mac: 422,
  /** The caller is over its budget (fairness.ts); the answer says when to retry (Retry-After). */
  too_many_requests: 429,
  /** The client closed the connection mid-request: nobody reads this answer; logged, not a bug. */
  client_closed: 499,
  /** The console's Prometheus (console.prometheusUrl) did not answer (console/metrics_proxy.ts). */
  metrics_unavailable: 502,
  store_conflict: 503,
  store_unavailable: 503,
  internal: 500,
  /** A WebSocket feed asked of a manager served through its connection guard (feed_sockets.ts). */
  feed_socket_unavailable: 501,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly field?: string;

  constructor(code: ErrorCode, message: string, field?: string) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.field = field;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { error: { code: this.code, message: this.message } };
    if (this.field !== undefined) body.error.field = this.field;
    return body;
  }
}

/** Validation failure of one request field. */
export function invalid(field: string, message: string): ApiError {
  return new ApiError("invalid_request", `${field}: ${message}`, field);
}

export function notFound(message: string): ApiError {
  return new ApiError("not_found", message);
}
