/**
 * This node's own Node object, followed through the API server with the node's credentials (a
 * list and a watch by `metadata.name`, list_watch.ts): its labels and annotations carry the node's
 * BGP settings (../bgp/node_keys.ts). The handler is told the object as it is now after each list
 * and change, or null while there is none.
 */
import type { Logger } from "@knitter/common";
import type { KubePods, NodeObject } from "./kube_pods.ts";
import { ListWatch, type ListWatchSettings } from "./list_watch.ts";

const FORBIDDEN =
  "the agent needs get, list and watch on nodes for the node's BGP settings (deploy/rbac/agent.yaml)";

export class NodeWatch extends ListWatch<NodeObject> {
  constructor(
    api: Pick<KubePods, "listNode" | "watchNode">,
    name: string,
    seen: (node: NodeObject | null) => void,
    log: Logger,
    settings?: ListWatchSettings,
  ) {
    super(
      {
        what: `the Node ${name}`,
        forbidden: FORBIDDEN,
        list: () => api.listNode(name),
        watch: (from, opts) => api.watchNode(name, from, opts),
      },
      {
        listed: (items) => seen(items.find((n) => n.name === name) ?? null),
        changed: (node, type) => {
          if (node.name === name) seen(type === "DELETED" ? null : node);
        },
      },
      log,
      settings,
    );
  }
}
