/**
 * The one place in the agent that decides which CNI error code a failure of the node (the
 * manager, `ip`, the state) becomes. The codes and `CniError` are the CNI contract's
 * (`@knitter/plugin/contract`). The plugin on the node only forwards; every code is decided here.
 */
import { CommandError, ManagerError, ManagerUnavailableError } from "@knitter/common";
import { CNI_CODE, CNI_VERSIONS, CniError } from "@knitter/plugin/contract";
import { InterfaceExistsError } from "../interfaces/ip_links.ts";
import { RecordTooLargeError } from "../state.ts";
import { PhysnetNotMappedError } from "../interfaces/wiring.ts";

/** Manager error codes that mean the request itself (the network config) is wrong. */
const CONFIG_ERRORS = new Set([
  "not_found",
  "invalid_request",
  "address_taken",
  "mac_taken",
  "invalid_mac",
  "network_deleting",
  "conflict",
  "forbidden",
  "unauthorized",
]);

export function toCniError(err: unknown, doing: string): CniError {
  if (err instanceof CniError) return err;
  if (err instanceof ManagerUnavailableError) {
    return new CniError(CNI_CODE.tryAgainLater, `${doing}: ${err.message}; try again later`);
  }
  if (err instanceof ManagerError) {
    if (err.status === 429) {
      // Over one of the manager's budgets (its message names which), still after the client
      // waited out Retry-After: the runtime retries the pod later, by when the budget refills.
      return new CniError(
        CNI_CODE.tryAgainLater,
        `${doing}: ${err.message}; try again later (the manager's limits: manager/README.md, "Fairness")`,
      );
    }
    if (err.code === "pool_exhausted" || err.status >= 500) {
      return new CniError(CNI_CODE.tryAgainLater, `${doing}: ${err.message}`);
    }
    if (CONFIG_ERRORS.has(err.code)) {
      // 401: the token itself; a 403 is about what was asked, which the manager's message says.
      const hint = err.status === 401
        ? " (the agent's manager token is refused: check its configuration)"
        : "";
      return new CniError(CNI_CODE.invalidConfig, `${doing}: ${err.message}${hint}`);
    }
    return new CniError(CNI_CODE.internal, `${doing}: ${err.message}`);
  }
  if (err instanceof InterfaceExistsError) {
    // In the pod: CNI_IFNAME names an interface that is there already. On the node: not the
    // runtime's doing, and nothing it can change.
    const code = err.side === "pod" ? CNI_CODE.invalidEnvironment : CNI_CODE.internal;
    return new CniError(code, `${doing}: ${err.message}`);
  }
  if (err instanceof RecordTooLargeError || err instanceof PhysnetNotMappedError) {
    return new CniError(CNI_CODE.invalidConfig, `${doing}: ${err.message}`);
  }
  if (err instanceof CommandError) {
    return new CniError(CNI_CODE.ioFailure, `${doing}: ${err.message}`);
  }
  const msg = err instanceof Error ? err.message : String(err);
  return new CniError(CNI_CODE.internal, `${doing}: ${msg}`);
}

// ---- the runtime's input (CNI_* variables, the config on stdin), checked by the agent

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
