/**
 * The cluster's default network, from the monitor's configuration (`defaultNetwork`): ensured at
 * the manager when the monitor starts, so that `kubectl apply -k deploy/` alone gives pods a
 * network (a Network resource would need its CRD established first, a second apply). It is made
 * once, with the same marks a Network resource `NAMESPACE/NAME` would give it, so that such a
 * resource, if someone applies it, adopts it instead of being refused. A network of that name the
 * monitor did not make is left alone (the agents attach to it all the same), and said so in the log.
 */
import { type Logger, type ManagerClient, ManagerError } from "@knitter/common";
import type { Tenants } from "./namespaces.ts";
import { MANAGED_BY, type ManagerNetwork, OWNER_LABEL } from "./networks.ts";

export interface DefaultNetworkConfig {
  /** Its tenant; a public network must be in one of the monitor's publicNamespaces. */
  namespace: string;
  name: string;
  /** As a Network resource's spec: type, cidr, gateway, public, mtu, description... */
  spec: Record<string, unknown>;
}

export type DefaultNetworkOutcome = "created" | "present" | "not-ours";

/**
 * Makes the default network unless it exists. Idempotent: a network of that name with our mark is
 * left as it is (its spec is not compared: a Network resource, when there is one, manages it).
 */
export async function ensureDefaultNetwork(
  manager: ManagerClient,
  tenants: Tenants,
  net: DefaultNetworkConfig,
  log: Logger,
): Promise<DefaultNetworkOutcome> {
  const where = `${net.namespace}/${net.name}`;
  const found = await find(manager, net);
  if (found) return verdict(found, where, log);
  await tenants.ensure(net.namespace);
  try {
    const made = await manager.request<ManagerNetwork>(
      "POST",
      `/api/v1/tenants/${enc(net.namespace)}/networks`,
      { ...net.spec, name: net.name, labels: { ...MANAGED_BY, [OWNER_LABEL]: where } },
    );
    log.info("default network created", { network: where, id: made.id, cidr: made.cidr });
    return "created";
  } catch (err) {
    // Made meanwhile (a Network resource's reconcile, another monitor): whose is it?
    if (!(err instanceof ManagerError && err.status === 409)) throw err;
    const now = await find(manager, net);
    if (!now) throw err;
    return verdict(now, where, log);
  }
}

function verdict(found: ManagerNetwork, where: string, log: Logger): DefaultNetworkOutcome {
  if (found.labels?.[OWNER_LABEL] === where) return "present";
  log.warn(
    "a network of the default network's name exists and Knitter did not make it; left as it is",
    {
      network: where,
      id: found.id,
      madeBy: found.labels?.[OWNER_LABEL] ?? "the manager's API",
    },
  );
  return "not-ours";
}

async function find(
  manager: ManagerClient,
  net: DefaultNetworkConfig,
): Promise<ManagerNetwork | undefined> {
  try {
    const found = await manager.request<ManagerNetwork>(
      "GET",
      `/api/v1/tenants/${enc(net.namespace)}/networks/${enc(net.name)}`,
    );
    // The lookup also answers another tenant's public network of that name: not this one.
    return found.tenant === net.namespace ? found : undefined;
  } catch (err) {
    if (err instanceof ManagerError && err.status === 404) return undefined;
    throw err;
  }
}

const enc = encodeURIComponent;
