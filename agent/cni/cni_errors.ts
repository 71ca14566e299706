/**
 * The one place in the agent that decides which CNI error code a failure of the node (the
 * manager, `ip`, the state) becomes. The codes and `CniError` are the CNI contract's
 * (`@knitter/plugin/contract`), shared with the plugin.
 */
import { CommandError, ManagerError, ManagerUnavailableError } from "@knitter/common";
import { CNI_CODE, CniError } from "@knitter/plugin/contract";
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
  if (err instanceof RecordTooLargeError || err instanceof PhysnetNotMappedError) {
    return new CniError(CNI_CODE.invalidConfig, `${doing}: ${err.message}`);
  }
  if (err instanceof CommandError) {
    return new CniError(CNI_CODE.ioFailure, `${doing}: ${err.message}`);
  }
  const msg = err instanceof Error ? err.message : String(err);
  return new CniError(CNI_CODE.internal, `${doing}: ${msg}`);
}
