/**
 * Self-healing of the node's switch. The agent notices by itself, without waiting for a timer:
 *
 * - ovs-vswitchd restarted (its flows are gone): the OpenFlow watch (ofwatch.ts) sees the bridge's
 *   management connection close and work again;
 * - ovsdb-server restarted: the OVSDB connection (ovsdb.ts) is lost and made again;
 * - a bridge deleted or made again, the tunnel or a patch port deleted: the OVSDB monitor's rows;
 * - `other_config:flow-restore-wait=true` set (an operator's restart of ovs-vswitchd): the monitor.
 *
 * Each makes a heal: the bridges, tunnel and patch ports and the pods' ports (from the agent's
 * state, with their ofports) are made where missing, and the full flow set replaces the table.
 * flow-restore-wait is cleared after every full replacement, never before. Heals asked for while
 * one runs share the next; a heal that fails is tried again (ovs-vswitchd may still be starting).
 *
 * A periodic check (config `flowCheck.intervalSeconds`) compares the bridge's flows with the
 * computed set and repairs drift (flows changed, added or deleted by hand), counted and logged with
 * what differed.
 */
import { Backoff, type Logger } from "@knitter/common";
import type { Dataplane, FlowDiff } from "./dataplane.ts";
import type { OvsPortSpec } from "./ovs.ts";
import type { OvsdbClient, OvsdbEvent } from "./ovsdb.ts";
import { OfWatch, type OfWatchEvent } from "./ofwatch.ts";
import type { HealerStats } from "../metrics.ts";

// The healer's figures are declared with the metrics that read them (no import cycle).
export type { HealerStats };

export interface HealerDeps {
  dataplane: Dataplane;
  ovsdb: OvsdbClient;
  /** Plugs ports into the integration bridge (ports that exist are left as they are). */
  plug(ports: OvsPortSpec[]): Promise<unknown>;
  /** Takes ports off the integration bridge. */
  unplug(names: string[]): Promise<unknown>;
  /** The pods' ports on the integration bridge, as the agent's state records them. */
  podPorts(): OvsPortSpec[];
  /** OVS_RUNDIR of ovs-vswitchd (the bridge's management socket); absent: the system's. */
  rundir?: string;
  /** Seconds between flow checks; 0: none. */
  checkIntervalSeconds: number;
  log: Logger;
}

const MAX_RETRY_MS = 1000;
/** How many differing flows a log line names. */
const LOG_FLOWS = 10;

export class Healer {
  readonly stats: HealerStats = {
    heals: 0,
    checks: 0,
    repairs: 0,
    driftedFlows: 0,
    vswitchdReturns: 0,
    ovsdbReconnects: 0,
  };
  private readonly ofwatch: OfWatch;
  private unwatch: (() => void) | null = null;
  private timer: ReturnType<typeof setInterval> | undefined;
  private stopped = false;
  /** Reasons of the next heal, and the heal loop while it runs. */
  private wanted: string[] = [];
  private running: Promise<void> | null = null;
  /** The flow check in progress: checks never overlap. */
  private checking: Promise<FlowDiff | undefined> | null = null;
  private vswitchdDown = false;
  /** Until the agent's first full sync (remote ports known), heals wait and the flag stays. */
  private isReady = false;
  private wake: (() => void) | null = null;

  constructor(private readonly d: HealerDeps) {
    const bridge = d.dataplane.bridge;
    this.ofwatch = new OfWatch(OfWatch.socketOf(bridge, d.rundir), (e) => this.onOpenFlow(e));
    d.dataplane.afterReplace = () => this.clearFlowRestoreWait();
  }

  start(): void {
    this.unwatch = this.d.ovsdb.watch((e) => this.onOvsdb(e));
    this.ofwatch.start();
    const every = this.d.checkIntervalSeconds * 1000;
    if (every > 0) this.timer = setInterval(() => void this.check(), every);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    clearInterval(this.timer);
    this.unwatch?.();
    await this.ofwatch.stop();
    await this.running?.catch(() => {});
    await this.checking;
  }

  /**
   * The agent's first full flow set is in (with the remote ports): flow-restore-wait may go, and
   * heals asked for meanwhile run now.
   */
  async ready(): Promise<void> {
    if (this.isReady) return;
    this.isReady = true;
    await this.clearFlowRestoreWait();
    if (this.wanted.length > 0) void this.heal(this.wanted[0]);
  }

  /** The bridge's flows against the computed set, now. */
  diff(): Promise<FlowDiff> {
    return this.d.dataplane.diff();
  }

  /** One flow check (none while a heal or another check runs): drift is repaired, counted, logged. */
  check(): Promise<FlowDiff | undefined> {
    if (this.stopped || this.running || this.checking || !this.isReady) {
      return Promise.resolve(undefined);
    }
    this.checking = this.checkOnce().finally(() => (this.checking = null));
    return this.checking;
  }

  private async checkOnce(): Promise<FlowDiff | undefined> {
    this.stats.checks++;
    let diff: FlowDiff;
    try {
      diff = await this.d.dataplane.repair();
    } catch (err) {
      this.d.log.warn("flow check failed", { error: message(err) });
      return undefined;
    }
    const { missing, extra } = diff;
    if (missing.length + extra.length > 0) {
      this.stats.repairs++;
      this.stats.driftedFlows += missing.length + extra.length;
      this.stats.lastRepair = {
        at: new Date().toISOString(),
        missing: missing.length,
        extra: extra.length,
      };
      this.d.log.warn("flows drifted; repaired", {
        bridge: diff.bridge,
        missing: missing.length,
        extra: extra.length,
        repairs: this.stats.repairs,
        missingFlows: missing.slice(0, LOG_FLOWS),
        extraFlows: extra.slice(0, LOG_FLOWS),
      });
    }
    return diff;
  }

  /** Asks for a heal; resolves when one that started after this call is done. */
  heal(reason: string): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (!this.wanted.includes(reason)) this.wanted.push(reason);
    if (!this.isReady) return Promise.resolve();
    // A new reason (ovs-vswitchd back) cuts a retry's pause short.
    this.wake?.();
    this.running ??= this.healLoop().finally(() => (this.running = null));
    return this.running;
  }

  private async healLoop(): Promise<void> {
    const pauses = new Backoff({ firstMs: 50, maxMs: MAX_RETRY_MS });
    while (this.wanted.length > 0 && !this.stopped) {
      const reason = this.wanted.splice(0).join("; ");
      const started = performance.now();
      try {
        await this.healOnce();
        const ms = Math.round(performance.now() - started);
        this.stats.heals++;
        this.stats.lastHeal = { reason, at: new Date().toISOString(), ms };
        this.d.log.warn("healed", { reason, ms });
        pauses.reset();
      } catch (err) {
        if (this.stopped) return;
        // Expected while ovs-vswitchd is away (flow-restore-wait set before it starts).
        const level = this.vswitchdDown ? "info" : "warn";
        const pause = pauses.next();
        this.d.log[level]("heal failed; trying again", { reason, error: message(err), pause });
        for (const r of reason.split("; ")) if (!this.wanted.includes(r)) this.wanted.unshift(r);
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            this.wake = null;
            resolve();
          };
          const timer = setTimeout(done, pause);
          this.wake = done;
        });
      }
    }
  }

  /**
   * Bridges and ports where missing, then the whole flow set (which clears flow-restore-wait).
   * When the database has them all (ovs-vswitchd restarted on it), the flows go in first.
   */
  private async healOnce(): Promise<void> {
    const view = this.d.ovsdb.view;
    const ours = this.d.dataplane.preparedNames();
    const have = new Set([...view.interfaces.values()].map((i) => i.name));
    const bridges = new Set(view.bridges.values());
    const whole = ours.bridges.every((b) => bridges.has(b)) && ours.ports.every((p) => have.has(p));
    if (!whole) await this.d.dataplane.prepare();
    const missing = this.d.podPorts().filter((p) => !have.has(p.name));
    if (missing.length > 0) await this.plugAgain(missing);
    await this.d.dataplane.resync();
  }

  /**
   * Plugs the pods' ports again, each on its own (they still share transactions): a port whose
   * device is gone (a pod removed without DEL) is taken off again and logged, and never holds up
   * the flows of the others.
   */
  private async plugAgain(ports: OvsPortSpec[]): Promise<void> {
    const results = await Promise.allSettled(ports.map((p) => this.d.plug([p])));
    const failed = ports.filter((_, i) => results[i].status === "rejected");
    this.d.log.info("pod ports plugged again", { ports: ports.length - failed.length });
    if (failed.length === 0) return;
    this.d.log.warn("cannot plug pod ports again; left to DEL or GC", {
      ports: failed.map((p) => p.name),
      error: message(
        (results.find((r) => r.status === "rejected") as PromiseRejectedResult).reason,
      ),
    });
    await this.d.unplug(failed.map((p) => p.name)).catch((err) =>
      this.d.log.warn("cannot remove the ports that failed", { error: message(err) })
    );
  }

  private onOpenFlow(e: OfWatchEvent): void {
    if (e.kind === "down") {
      if (!this.vswitchdDown) {
        this.d.log.warn("ovs-vswitchd or the bridge is gone", {
          bridge: this.d.dataplane.bridge,
          error: e.error,
        });
      }
      this.vswitchdDown = true;
      return;
    }
    const was = this.vswitchdDown;
    this.vswitchdDown = false;
    if (!e.first || was) {
      this.stats.vswitchdReturns++;
      void this.heal("ovs-vswitchd answers again (its flows may be gone)");
    }
  }

  private onOvsdb(e: OvsdbEvent): void {
    if (e.kind === "lost") {
      this.d.log.warn("lost the connection to ovsdb-server", { error: e.error });
      return;
    }
    if (e.kind === "connected") {
      if (!e.first) {
        this.stats.ovsdbReconnects++;
        void this.heal("ovsdb-server connection made again");
      } else if (this.d.ovsdb.flowRestoreWait) void this.heal("flow-restore-wait is set");
      return;
    }
    const ours = this.d.dataplane.preparedNames();
    const bridges = new Set(this.d.ovsdb.view.bridges.values());
    const lost = ours.bridges.filter((b) => !bridges.has(b));
    const gone = e.deletedInterfaces.filter((n) => ours.ports.includes(n));
    if (lost.length > 0 && e.tables.includes("Bridge")) {
      void this.heal(`bridge ${lost.join(", ")} deleted`);
    } else if (e.deletedBridges.some((b) => ours.bridges.includes(b))) {
      void this.heal(`bridge ${e.deletedBridges.join(", ")} made again`);
    } else if (gone.length > 0) {
      void this.heal(`port ${gone.join(", ")} deleted`);
    } else if (e.tables.includes("Open_vSwitch") && this.d.ovsdb.flowRestoreWait) {
      void this.heal("flow-restore-wait is set");
    }
  }

  private async clearFlowRestoreWait(): Promise<void> {
    if (!this.isReady || !this.d.ovsdb.flowRestoreWait) return;
    try {
      await this.d.ovsdb.clearFlowRestoreWait();
      this.d.log.info("flow-restore-wait cleared: the full flow set is in");
    } catch (err) {
      this.d.log.warn("cannot clear flow-restore-wait", { error: message(err) });
    }
  }
}

function message(err: unknown): string {
  return String((err as Error)?.message ?? err);
}
