/**
 * The one place that decides which CNI error code a failure becomes. Codes below 100 are the
 * spec's; 100 and up are this plugin's own.
 */
import { CommandError, ManagerError, ManagerUnavailableError } from "@knitter/common";
import { InterfaceExistsError } from "./netlink.ts";
import { RecordTooLargeError } from "./state.ts";

export const CNI_CODE = {
  incompatibleVersion: 1,
  unsupportedField: 2,
  unknownContainer: 3,
  invalidEnvironment: 4,
  ioFailure: 5,
  decodeFailure: 6,
  invalidConfig: 7,
  tryAgainLater: 11,
  notAvailable: 50,
  limitedConnectivity: 51,
  /** CHECK found the pod's interfaces differ from what ADD made. */
  checkFailed: 100,
  internal: 999,
} as const;

export interface CniErrorBody {
  cniVersion: string;
  code: number;
  msg: string;
  details?: string;
}

export class CniError extends Error {
  constructor(readonly code: number, message: string, readonly details?: string) {
    super(message);
    this.name = "CniError";
  }

  toBody(cniVersion = "1.1.0"): CniErrorBody {
    const body: CniErrorBody = { cniVersion, code: this.code, msg: this.message };
    if (this.details) body.details = this.details;
    return body;
  }
}

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
    if (err.code === "pool_exhausted" || err.status >= 500) {
      return new CniError(CNI_CODE.tryAgainLater, `${doing}: ${err.message}`);
    }
    if (CONFIG_ERRORS.has(err.code)) {
      const hint = err.status === 401 || err.status === 403
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
  if (err instanceof RecordTooLargeError) {
    return new CniError(CNI_CODE.invalidConfig, `${doing}: ${err.message}`);
  }
  if (err instanceof CommandError) {
    return new CniError(CNI_CODE.ioFailure, `${doing}: ${err.message}`);
  }
  const msg = err instanceof Error ? err.message : String(err);
  return new CniError(CNI_CODE.internal, `${doing}: ${msg}`);
}
