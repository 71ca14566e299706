/**
 * Whether a manager token is its component's cluster's, and reaches no other (issue 18): the
 * monitor and the agent ask before they act. A monitor releases the ports of the pods its API
 * server says are gone, by namespace and name; holding another cluster's token, or an admin token
 * while the manager serves several clusters, it would release other clusters' pods' ports. An
 * agent holding another cluster's token would register its node, and bind its pods, there.
 */
import { type ManagerClient, ManagerError } from "./manager_client.ts";

const DEFAULT_CLUSTER = "default";

/** A cluster's name, as the manager takes it: a lowercase DNS label. */
export const CLUSTER_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The token does not fit the configured cluster: not worth retrying. */
export class ClusterMismatchError extends Error {
  override name = "ClusterMismatchError";
}

/**
 * Resolves when the manager says the token reaches exactly `cluster`; throws ClusterMismatchError
 * when it does not, and what the client throws when the manager cannot answer. `scope` names the
 * token the component needs, for the message.
 */
export async function checkTokenCluster(
  manager: ManagerClient,
  cluster: string,
  scope: "monitor" | "node",
): Promise<void> {
  const fix =
    `give it a ${scope} token of cluster "${cluster}" (the manager's tokens: {"scope": "${scope}", "cluster": "${cluster}"})`;
  let names: string[];
  try {
    const listed = await manager.request<{ items: { name: string }[] }>("GET", "/api/v1/clusters");
    names = listed.items.map((c) => c.name);
  } catch (err) {
    // A manager from before clusters serves one cluster: the default one.
    if (err instanceof ManagerError && err.status === 404 && cluster === DEFAULT_CLUSTER) return;
    if (err instanceof ManagerError && err.status === 403) {
      throw new ClusterMismatchError(
        `The manager token is refused for cluster "${cluster}": ${err.message}. ${fix}`,
      );
    }
    throw err;
  }
  if (!names.includes(cluster)) {
    throw new ClusterMismatchError(
      `Configured for cluster "${cluster}", but the manager token is of cluster "${
        names.join(", ")
      }": ${fix}, or set cluster to "${names[0]}"`,
    );
  }
  if (names.length > 1) {
    const others = names.filter((n) => n !== cluster).join(", ");
    throw new ClusterMismatchError(
      `The manager serves other clusters too (${others}), and this token reaches them all: ${fix}`,
    );
  }
}
