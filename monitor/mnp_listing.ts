/**
 * The list of MultiNetworkPolicies, for a cluster that may not have their CRD. Without it (the
 * API server answers 404) there are no policies: a clear warning, an empty list, so the monitor
 * gets ready and runs; the list is tried again slowly (not at the watch's quick retry pace) until
 * the CRD is installed, and then the policies come in as they would on any relist.
 */
import { type Logger, sleep } from "@knitter/common";
import { type Kube, KubeError, type KubeList } from "./kube.ts";
import { MNP, type MultiNetworkPolicy } from "./mnp_types.ts";
import type { Lister } from "./informer.ts";

export function policyLister(
  kube: Kube,
  opts: { retryMs: number; signal: AbortSignal },
  log: Logger,
): Lister<MultiNetworkPolicy> {
  let absent = false;
  const missing = (err: unknown) => err instanceof KubeError && err.code === 404;
  return {
    async list(): Promise<KubeList<MultiNetworkPolicy>> {
      // Absent last time: wait before asking again (the watch of an absent kind fails at once).
      if (absent) await sleep(opts.retryMs, opts.signal);
      try {
        const listed = await kube.listCustom<MultiNetworkPolicy>(MNP.plural, MNP);
        if (absent) log.info("MultiNetworkPolicy CRD found; following policies");
        absent = false;
        return listed;
      } catch (err) {
        if (!missing(err)) throw err;
        if (!absent) {
          log.warn(
            "the MultiNetworkPolicy CRD (multi-networkpolicies.k8s.cni.cncf.io) is not installed: no policies are applied. Install deploy/crds/multinetworkpolicies.yaml, or set multiNetworkPolicies: false",
            { retryInMs: opts.retryMs },
          );
        }
        absent = true;
        return { items: [], metadata: {} } as KubeList<MultiNetworkPolicy>;
      }
    },
    count: () =>
      kube.countCustom(MNP.plural, MNP).catch((err) => {
        if (missing(err)) return 0;
        throw err;
      }),
  };
}
