/**
 * Before the monitor acts on anything, its manager token must be its own cluster's and reach no
 * other (common/cluster_check.ts): it waits for an unreachable manager, and refuses to start on a
 * token that does not fit.
 */
import {
  checkTokenCluster,
  ClusterMismatchError,
  type Logger,
  type ManagerClient,
  retry,
} from "@knitter/common";

export { ClusterMismatchError };

export function checkClusterToken(
  manager: ManagerClient,
  cluster: string,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  return retry(() => checkTokenCluster(manager, cluster, "monitor"), {
    signal,
    maxMs: 10_000,
    jitter: 0.2,
    retryable: (err) => !(err instanceof ClusterMismatchError),
    onError: (err, retryInMs) =>
      log.warn("cannot check the manager token's cluster yet", { error: String(err), retryInMs }),
  });
}
