/**
 * The pods of this node, followed through the API server with the node's own credentials (a list
 * and a watch by `spec.nodeName`), for hot-plug (hotplug.ts). The monitor's informer follows every
 * pod of the cluster; an agent needs only its node's, and a simpler loop (list_watch.ts).
 */
import type { Logger } from "@knitter/common";
import type { KubePods, NodePod } from "./kube_pods.ts";
import { ListWatch, type ListWatchHandler, type ListWatchSettings } from "./list_watch.ts";

const FORBIDDEN =
  "hot-plug needs list and watch on pods (deploy/rbac/agent.yaml); or set kubernetes.hotplug to false";

export type NodePodHandler = ListWatchHandler<NodePod>;
export type NodePodWatchSettings = ListWatchSettings;

export class NodePodWatch extends ListWatch<NodePod> {
  constructor(
    pods: Pick<KubePods, "listOnNode" | "watchOnNode">,
    node: string,
    handler: NodePodHandler,
    log: Logger,
    settings?: NodePodWatchSettings,
  ) {
    super(
      {
        what: "the node's pods",
        forbidden: FORBIDDEN,
        list: async () => {
          const list = await pods.listOnNode(node);
          return { items: list.pods, resourceVersion: list.resourceVersion };
        },
        watch: (from, opts) => pods.watchOnNode(node, from, opts),
      },
      handler,
      log,
      settings,
    );
  }
}
