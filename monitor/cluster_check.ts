/**
 * Before the monitor acts on anything, its manager token must be its own cluster's. A monitor
 * releases the ports of the pods its API server says are gone, by namespace and name: holding
 * another cluster's token, or an admin token while the manager serves several clusters, it would
 * release other clusters' pods' ports. So it refuses to start instead (issue 18).
 */
import { type Logger, type ManagerClient, ManagerError, retry } from "@knitter/common";

const DEFAULT_CLUSTER = "default";

/** Thrown when the token does not fit: not worth retrying. */
export class ClusterMismatchError extends Error {
  override name = "ClusterMismatchError";
}

/**
 * Resolves once the manager has confirmed that the token reaches `cluster` and no other cluster;
 * waits for an unreachable manager; throws ClusterMismatchError otherwise.
 */
export function checkClusterToken(
  manager: ManagerClient,
  cluster: string,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  return retry(() => check(manager, cluster), {
    signal,
    maxMs: 10_000,
    jitter: 0.2,
    retryable: (err) => !(err instanceof ClusterMismatchError),
    onError: (err, retryInMs) =>
      log.warn("cannot check the manager token's cluster yet", { error: String(err), retryInMs }),
  });
}

async function check(manager: ManagerClient, cluster: string): Promise<void> {
  let names: string[];
  try {
    const listed = await manager.request<{ items: { name: string }[] }>("GET", "/api/v1/clusters");
    names = listed.items.map((c) => c.name);
  } catch (err) {
    // A manager from before clusters serves one cluster: the default one.
    if (err instanceof ManagerError && err.status === 404 && cluster === DEFAULT_CLUSTER) return;
    if (err instanceof ManagerError && err.status === 403) {
      throw new ClusterMismatchError(
        `The monitor's manager token is refused for cluster "${cluster}": ${err.message}. Give it a monitor token of cluster "${cluster}" (manager tokens: {"scope": "monitor", "cluster": "${cluster}"})`,
      );
    }
    throw err;
  }
  if (!names.includes(cluster)) {
    throw new ClusterMismatchError(
      `The monitor is configured for cluster "${cluster}", but its manager token is of cluster "${
        names.join(", ")
      }": give it a monitor token of cluster "${cluster}", or set cluster to "${names[0]}"`,
    );
  }
  if (names.length > 1) {
    const others = names.filter((n) => n !== cluster).join(", ");
    throw new ClusterMismatchError(
      `The manager serves other clusters too (${others}): with an admin token this monitor would release their pods' ports as its own gone pods'. Give it a monitor token of cluster "${cluster}" (manager tokens: {"scope": "monitor", "cluster": "${cluster}"})`,
    );
  }
}
