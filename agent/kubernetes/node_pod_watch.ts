/**
 * The pods of this node, followed through the API server with the node's own credentials (a list
 * and a watch by `spec.nodeName`), for hot-plug (hotplug.ts). The monitor's informer follows every
 * pod of the cluster; an agent needs only its node's, and a simpler loop: list, then watch from the
 * list's resourceVersion with bookmarks and a server-side timeout; a clean end resumes from the last
 * version seen; an ERROR (410 Expired), a failure, or no sign of life for `deadlineMs` (a watch
 * dropped half-open) lists again after a backoff. Every list hands over all the node's pods, so a
 * change missed while the agent was down or deaf is seen then.
 */
import { Backoff, type Logger, sleep } from "@knitter/common";
import { KubeApiError, type KubePods, type NodePod, type PodWatchEvent } from "./kube_pods.ts";

const FORBIDDEN =
  "hot-plug needs list and watch on pods (deploy/rbac/agent.yaml); or set kubernetes.hotplug to false";

export interface NodePodHandler {
  /** Every pod of the node, after each list (a pod not in it is gone). */
  listed(pods: NodePod[]): void;
  changed(pod: NodePod, type: "ADDED" | "MODIFIED" | "DELETED"): void;
}

export interface NodePodWatchSettings {
  /** The API server ends each watch after this (a sign of life at least that often). */
  timeoutSeconds: number;
  /** No event, bookmark or end for this long: the watch is dead. */
  deadlineMs: number;
}

/** Thrown inside the loop: the watch must list again (410, an ERROR line, a dead watch). */
class Relist extends Error {}

export class NodePodWatch {
  private readonly stopping = new AbortController();
  private running?: Promise<void>;
  private readonly backoff = new Backoff({ firstMs: 200, maxMs: 30_000, jitter: 0.2 });

  constructor(
    private readonly pods: Pick<KubePods, "listOnNode" | "watchOnNode">,
    private readonly node: string,
    private readonly handler: NodePodHandler,
    private readonly log: Logger,
    private readonly settings: NodePodWatchSettings = { timeoutSeconds: 30, deadlineMs: 45_000 },
  ) {}

  start(): void {
    this.running ??= this.loop();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private async loop(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      try {
        const list = await this.pods.listOnNode(this.node);
        this.handler.listed(list.pods);
        let version = list.resourceVersion;
        for (;;) {
          version = await this.watchOnce(version);
          this.backoff.reset();
          if (signal.aborted) return;
        }
      } catch (err) {
        if (signal.aborted) return;
        const retryInMs = this.backoff.next();
        this.log.warn("the node's pods: listing again", {
          error: String((err as Error)?.message ?? err),
          retryInMs,
          ...(err instanceof KubeApiError && err.status === 403 ? { fix: FORBIDDEN } : {}),
        });
        await sleep(retryInMs, signal);
      }
    }
  }

  /** One watch, to its end; answers the last resourceVersion seen. */
  private async watchOnce(from: string): Promise<string> {
    let version = from;
    const dead = new AbortController();
    let timer = setTimeout(() => dead.abort(), this.settings.deadlineMs);
    const alive = () => {
      clearTimeout(timer);
      timer = setTimeout(() => dead.abort(), this.settings.deadlineMs);
    };
    try {
      await this.pods.watchOnNode(this.node, from, {
        timeoutSeconds: this.settings.timeoutSeconds,
        signal: AbortSignal.any([this.stopping.signal, dead.signal]),
        onEvent: (e: PodWatchEvent) => {
          alive();
          if (e.type === "ERROR") throw new Relist(`the watch ended: ${e.code} ${e.message}`);
          version = e.resourceVersion || version;
          if (e.type !== "BOOKMARK") this.handler.changed(e.pod, e.type);
        },
      });
    } catch (err) {
      if (dead.signal.aborted && !this.stopping.signal.aborted) {
        throw new Relist(`no sign of life for ${this.settings.deadlineMs} ms`);
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return version;
  }
}
