/**
 * The node's BGP, wired (agent/README.md, "BGP advertisement"): in Kubernetes mode the Node object
 * is read first (for a few seconds at most), so that BIRD starts with the node's own settings, and
 * followed from then on; BIRD is started with them.
 *
 * @module
 */
import type { Logger } from "@knitter/common";
import type { AgentConfig } from "../config.ts";
import type { KubePods } from "../kubernetes/kube_pods.ts";
import { NodeWatch } from "../kubernetes/node_watch.ts";
import { type BgpSpeaker, speakerFor } from "./bgp_speaker.ts";
import { NodeBgpFollower } from "./node_bgp_follower.ts";

/** How long the start waits for the Node before BIRD starts with the file's settings. */
const FIRST_READ_MS = 5000;

export interface RunningBgp {
  speaker: BgpSpeaker;
  /** The Node's keys that are wrong now (metrics). */
  configErrors(): readonly { key: string }[];
  stop(): Promise<void>;
}

export async function startBgp(
  config: AgentConfig,
  kube: KubePods | undefined,
  log: Logger,
): Promise<RunningBgp> {
  const follower = new NodeBgpFollower({
    config,
    nodeName: config.nodeName,
    warn: (node, reason, message) => kube!.warnNode(node, reason, message),
    log,
  });
  let watch: NodeWatch | undefined;
  if (kube) {
    const first = Promise.withResolvers<void>();
    watch = new NodeWatch(kube, config.nodeName, (node) => {
      follower.seen(node);
      first.resolve();
    }, log);
    watch.start();
    const timer = setTimeout(() => {
      log.warn("BGP: the Node is not read yet; BIRD starts with the config file's settings", {
        node: config.nodeName,
      });
      first.resolve();
    }, FIRST_READ_MS);
    await first.promise;
    clearTimeout(timer);
  }
  const speaker = speakerFor(config, follower.startWith, log);
  try {
    await speaker.start();
  } catch (err) {
    await watch?.stop();
    throw err;
  }
  follower.attach(speaker);
  return {
    speaker,
    configErrors: () => follower.errors,
    async stop() {
      await watch?.stop();
      await speaker.stop();
    },
  };
}
