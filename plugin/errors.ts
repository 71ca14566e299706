/**
 * The one place in the plugin where failures become CNI error codes (the codes and `CniError` are
 * the contract's). Validation code throws through the helpers here; the agent client throws
 * `AgentFailure`; `toCniError` maps whatever reaches the top.
 */
import { CNI_CODE, CNI_VERSIONS, type CniCommand, CniError } from "./contract.ts";
import type { AgentCommand } from "./protocol.ts";

/** Why the agent could not be asked, or answered nonsense; classified by the agent client. */
export type AgentFailureKind =
  | "missing" // no socket file
  | "refused" // socket file, nobody listening
  | "denied" // the OS refused (socket mode/owner)
  | "not-permitted" // Deno's permissions do not cover the socket
  | "timeout"
  | "broken" // connection dropped mid-exchange
  | "bad-reply"; // not HTTP, or not the JSON we expect

export class AgentFailure extends Error {
  constructor(readonly kind: AgentFailureKind, readonly socket: string, detail: string) {
    super(detail);
    this.name = "AgentFailure";
  }
}

export function invalidEnv(names: string[], problems: string[]): CniError {
  return new CniError(
    CNI_CODE.invalidEnvironment,
    `invalid or missing environment variables: ${names.join(", ")}`,
    problems.join("; "),
  );
}

export function decodeFailed(details: string): CniError {
  return new CniError(
    CNI_CODE.decodeFailure,
    "cannot decode the network configuration on stdin",
    details,
  );
}

export function incompatibleVersion(found: unknown): CniError {
  const supported = CNI_VERSIONS.join(", ");
  const msg = found === undefined
    ? "the network configuration has no cniVersion"
    : `cniVersion ${JSON.stringify(found)} is not supported`;
  return new CniError(CNI_CODE.incompatibleVersion, msg, `knitter supports ${supported}`);
}

export function invalidConfig(msg: string, details = ""): CniError {
  return new CniError(CNI_CODE.invalidConfig, msg, details);
}

const AGENT_HINT = "is the knitter-agent DaemonSet pod running and ready on this node? " +
  "(kubectl get pods -A -o wide | grep knitter-agent, then read its log)";

/** Why the agent did not answer, in words a node operator can act on. */
function unreachableDetails(f: AgentFailure): string {
  switch (f.kind) {
    case "missing":
      return `${f.socket} does not exist; ${AGENT_HINT}`;
    case "refused":
      return `${f.socket} exists but nothing accepts connections on it; ${AGENT_HINT}`;
    case "denied":
      return `the OS denied access to ${f.socket} (${f.message}); the plugin runs as the ` +
        `runtime's user (normally root) and the agent must create the socket for it`;
    case "timeout":
      return `${f.message}; the agent may be overloaded or stuck; ${AGENT_HINT}`;
    default:
      return `${f.message}; ${AGENT_HINT}`;
  }
}

function fromAgentFailure(f: AgentFailure, command: CniCommand): CniError {
  const status = command === "STATUS";
  if (f.kind === "not-permitted") {
    return new CniError(
      status ? CNI_CODE.notAvailable : CNI_CODE.invalidConfig,
      `the plugin is not permitted to use the agent socket ${f.socket}`,
      "the knitter wrapper grants access only to the socket it read from the network config's " +
        "agentSocket (else $KNITTER_AGENT_SOCKET, else /run/knitter/agent.sock), and the " +
        "compiled plugin only to /run/knitter/agent.sock; give agentSocket as a plain top-level " +
        "key, or use the wrapper for a socket elsewhere",
    );
  }
  if (f.kind === "bad-reply") {
    return new CniError(
      status ? CNI_CODE.notAvailable : CNI_CODE.internal,
      `the knitter agent at ${f.socket} answered something that is not a CNI reply`,
      `${f.message}; are plugin and agent the same Knitter version?`,
    );
  }
  // Everything else is transient from the runtime's point of view: kubelet retries on 11.
  return new CniError(
    status ? CNI_CODE.notAvailable : CNI_CODE.tryAgainLater,
    status
      ? `plugin not available: the knitter agent at ${f.socket} is not answering`
      : `try again later: the knitter agent at ${f.socket} is not answering`,
    unreachableDetails(f),
  );
}

function isErrorBody(v: unknown): v is { code: number; msg: string; details?: unknown } {
  if (typeof v !== "object" || v === null) return false;
  const o = v as Record<string, unknown>;
  return Number.isInteger(o.code) && (o.code as number) > 0 && typeof o.msg === "string";
}

/** A non-2xx answer from the agent: its own CNI error, or a description of what came back. */
export function fromAgentError(
  command: AgentCommand,
  socket: string,
  status: number,
  bodyText: string,
): CniError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bodyText);
  } catch { /* described below */ }
  if (isErrorBody(parsed)) {
    const details = typeof parsed.details === "string" ? parsed.details : "";
    return new CniError(parsed.code, parsed.msg, details);
  }
  const excerpt = bodyText.length > 200 ? `${bodyText.slice(0, 200)}...` : bodyText;
  if (status === 503) {
    const f = new AgentFailure("broken", socket, `the agent answered HTTP 503: ${excerpt}`);
    return fromAgentFailure(f, command);
  }
  return fromAgentFailure(
    new AgentFailure("bad-reply", socket, `HTTP ${status} without a CNI error body: ${excerpt}`),
    command,
  );
}

/** Maps anything thrown while handling a call to the error the runtime sees. */
export function toCniError(err: unknown, command: CniCommand): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof AgentFailure) return fromAgentFailure(err, command);
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new CniError(CNI_CODE.internal, "knitter plugin internal error", text);
}
