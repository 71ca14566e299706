/**
 * Lost DELs: a runtime that crashed, a node that rebooted or a cleanup that failed never sends DEL,
 * and the attachment would hold its manager port, OVS port, veth, flows and record for ever. The
 * reaper finds attachments whose netns is gone (the path missing, or another namespace at it: its
 * device:inode is not the one ADD recorded) and, once one has been gone for the grace period (the
 * runtime's DEL may still come), undoes it through the attacher (attach.ts `reap`: under the
 * container's lock, so never across an ADD or DEL of it), logging each.
 *
 * At the agent's start (once the manager answers) one pass runs without the grace: after a reboot
 * every netns is gone, and nothing stale may stay in the manager or the agent's state.
 *
 * knitctl's extra interfaces (container IDs with the extra prefix) are left alone: they are the
 * operator's, recorded in a store of their own that only `knitctl detach` updates (it works with
 * the netns gone, by path), and a reaped record would leave that store naming an interface that no
 * longer exists.
 */
import type { Logger } from "@knitter/common";
import { netnsIdNow } from "../interfaces/netns.ts";
import { type AgentState, type Attachment, isExtraContainer } from "../state.ts";

/**
 * Why an attachment's netns is gone, given what its path is now (netns.ts `netnsIdNow`: an
 * identity, "missing", or null when the agent cannot tell), or undefined when it is still the
 * namespace ADD made the attachment in, or may be.
 */
export function goneReason(
  a: Pick<Attachment, "netns" | "netnsId">,
  idNow: string | null,
): string | undefined {
  if (idNow === null) return undefined;
  if (idNow === "missing") return `netns gone: ${a.netns} no longer exists`;
  if (a.netnsId !== undefined && a.netnsId !== idNow) {
    return `netns gone: ${a.netns} is another network namespace now (${idNow}, not ${a.netnsId})`;
  }
  return undefined;
}

/** Which attachments the reaper looks at: the runtime's, not knitctl's extra interfaces. */
export function reapable(a: Pick<Attachment, "containerId">): boolean {
  return !isExtraContainer(a.containerId);
}

/** When each key was first seen gone; a key seen no longer (netns back, record gone) is forgotten. */
export class GraceClock {
  private readonly since = new Map<string, number>();

  constructor(private readonly graceMs: number) {}

  /** Notes the keys gone at `now`; answers those gone for at least the grace. */
  due(gone: string[], now: number): string[] {
    const seen = new Set(gone);
    for (const k of [...this.since.keys()]) if (!seen.has(k)) this.since.delete(k);
    const out: string[] = [];
    for (const k of gone) {
      const first = this.since.get(k) ?? now;
      this.since.set(k, first);
      if (now - first >= this.graceMs) out.push(k);
    }
    return out;
  }
}

export interface ReaperDeps {
  state: AgentState;
  /** The attacher (attach.ts `reap`): undoes one under its container's lock, if still gone. */
  attacher: { reap(listed: Attachment, why: string): Promise<boolean> };
  graceSeconds: number;
  /** 0: no timer, only the start's pass. */
  intervalSeconds: number;
  log: Logger;
  /** What a netns path is now (netns.ts `netnsIdNow`); tests give their own. */
  netnsId?: (path: string) => Promise<string | null>;
}

export class Reaper {
  private readonly clock: GraceClock;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(private readonly d: ReaperDeps) {
    this.clock = new GraceClock(d.graceSeconds * 1000);
  }

  /**
   * One look at every attachment; those gone (for the grace, unless `grace` is false) are undone.
   * A failure (the manager not answering) is logged and tried again on the next pass. Answers how
   * many were undone.
   */
  pass(grace = true): Promise<number> {
    const next = this.running.then(() => this.look(grace));
    this.running = next.catch(() => {});
    return next;
  }

  /** Passes every intervalSeconds from now on (none when it is 0). */
  start(): void {
    if (this.d.intervalSeconds <= 0 || this.stopped) return;
    const tick = () => {
      this.timer = setTimeout(async () => {
        await this.pass().catch((err) =>
          this.d.log.error("reaper pass failed", { error: String(err) })
        );
        if (!this.stopped) tick();
      }, this.d.intervalSeconds * 1000);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private async look(grace: boolean): Promise<number> {
    const idOf = this.d.netnsId ?? netnsIdNow;
    const gone = new Map<string, { a: Attachment; why: string }>();
    for (const a of await this.d.state.listAttachments()) {
      if (!reapable(a)) continue;
      const why = goneReason(a, await idOf(a.netns));
      if (why) gone.set(`${a.containerId}\0${a.ifName}\0${a.createdAt}`, { a, why });
    }
    const due = grace ? this.clock.due([...gone.keys()], Date.now()) : [...gone.keys()];
    let undone = 0;
    for (const key of due) {
      if (this.stopped) break;
      const { a, why } = gone.get(key)!;
      try {
        if (await this.d.attacher.reap(a, why)) undone++;
      } catch (err) {
        this.d.log.error("cannot remove an attachment whose netns is gone", {
          container: a.containerId,
          ifName: a.ifName,
          netns: a.netns,
          error: String((err as Error)?.message ?? err),
        });
      }
    }
    return undone;
  }
}
