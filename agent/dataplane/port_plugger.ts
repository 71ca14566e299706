/**
 * Plugs pods' host ends into the bridge, over one OVSDB connection (no process per port). ADDs that
 * arrive while a transaction is in flight share the next one: ovs-vswitchd reconfigures once for
 * many ports instead of once each. The agent chooses each port's ofport itself (ofport_request), so
 * the port's flows can be installed while the port is still being added. Removals are grouped
 * the same way, and answer once the database has them: ovs-vswitchd lets ports go at its own pace
 * (on the userspace datapath an RCU grace period per port, one after another: 0.6 s for 50), and
 * nothing a DEL promises waits for that (a port of the same name added meanwhile gets the new
 * device: ovsdb_test.ts).
 */
import { GroupCommit } from "@knitter/common";
import type { OvsPortSpec } from "./ovs.ts";
import { OvsdbClient, type PortState } from "./ovsdb.ts";

interface Pending {
  ports: OvsPortSpec[];
  resolve(ofports: Map<string, number>): void;
  reject(err: unknown): void;
}

interface PendingRemoval {
  names: string[];
  resolve(): void;
  reject(err: unknown): void;
}

/** Ports per transaction. */
const MAX_BATCH = 64;

/** Pod ports get ofports from here up; lower numbers are the tunnel's and the patch ports'. */
export const POD_OFPORT_MIN = 1000;
/** The highest ofport OpenFlow allows for a physical port (0xfeff). */
const OFPORT_MAX = 65279;

export class PortPlugger {
  private readonly batcher: GroupCommit<Pending>;
  private readonly removals: GroupCommit<PendingRemoval>;
  /** The agent's one OVSDB connection (its monitor also serves self-healing, healer.ts). */
  readonly db: OvsdbClient;
  private readonly used = new Set<number>();
  private next = POD_OFPORT_MIN;

  constructor(dbSock: string | undefined, private readonly bridge: string) {
    this.db = new OvsdbClient(dbSock ?? OvsdbClient.defaultSocket());
    this.batcher = new GroupCommit<Pending>(
      MAX_BATCH,
      (p) => p.ports.map((x) => x.name).join(","),
      (batch) => this.plug(batch),
    );
    this.removals = new GroupCommit<PendingRemoval>(
      MAX_BATCH,
      (p) => p.names.join(","),
      (batch) => this.unplug(batch),
    );
  }

  /** Marks ofports as taken (the ports recorded in the agent's state, at start). */
  reserve(ofports: Iterable<number>): void {
    for (const n of ofports) this.used.add(n);
  }

  /**
   * Marks the ofports the switch already has as taken: a port plugged just before a crash may be
   * on the bridge before the agent's state names it.
   */
  async reserveInstalled(): Promise<void> {
    try {
      this.reserve(await this.db.ofports());
    } catch (err) {
      throw new Error(`Cannot read the ports of "${this.bridge}": ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** A free ofport for a new port, taken until release(). */
  takeOfport(): number {
    const span = OFPORT_MAX - POD_OFPORT_MIN + 1;
    for (let tries = 0; tries < span; tries++) {
      const n = this.next;
      this.next = n === OFPORT_MAX ? POD_OFPORT_MIN : n + 1;
      if (!this.used.has(n)) {
        this.used.add(n);
        return n;
      }
    }
    throw new Error(`Bridge "${this.bridge}" has no free ofport left for a pod port`);
  }

  release(ofports: Iterable<number | undefined>): void {
    for (const n of ofports) if (n !== undefined) this.used.delete(n);
  }

  /** Adds the ports (one pod's) and answers their ofports once the switch uses them. */
  add(ports: OvsPortSpec[]): Promise<Map<string, number>> {
    return new Promise((resolve, reject) => this.batcher.submit({ ports, resolve, reject }));
  }

  /**
   * Removes the ports (one pod's) from the bridge, answering once the database no longer has them;
   * names it does not have are skipped.
   */
  remove(names: string[]): Promise<void> {
    return new Promise((resolve, reject) => this.removals.submit({ names, resolve, reject }));
  }

  /** Sets a port's external IDs, replacing those it had (no reconfiguration to wait for). */
  async label(name: string, externalIds: Record<string, string>): Promise<void> {
    try {
      await this.db.setExternalIds(name, externalIds);
    } catch (err) {
      throw new Error(
        `Cannot set the external IDs of ${name} on "${this.bridge}": ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  close(): void {
    this.db.close();
  }

  private async unplug(batch: PendingRemoval[]): Promise<void> {
    const names = batch.flatMap((p) => p.names);
    try {
      const { applied } = await this.db.removePorts(this.bridge, names);
      // Not waited for: a switch that stops applying changes fails the next add on its own wait,
      // saying so.
      applied.catch(() => {});
      for (const p of batch) p.resolve();
    } catch (err) {
      for (const p of batch) {
        p.reject(
          new Error(
            `Cannot delete ports ${p.names.join(", ")} from "${this.bridge}": ${
              (err as Error).message
            }`,
            { cause: err },
          ),
        );
      }
    }
  }

  private async plug(batch: Pending[]): Promise<void> {
    const ports = batch.flatMap((p) => p.ports);
    let states: Map<string, PortState>;
    try {
      states = await this.db.addPorts(this.bridge, ports);
    } catch (err) {
      const error = new Error(`Cannot add ports to "${this.bridge}": ${(err as Error).message}`, {
        cause: err,
      });
      for (const p of batch) p.reject(error);
      return;
    }
    // Each pod fails or succeeds on its own ports: one bad device does not fail the others.
    for (const p of batch) {
      try {
        p.resolve(checked(this.bridge, p.ports, states));
      } catch (err) {
        p.reject(err);
      }
    }
  }
}

function checked(
  bridge: string,
  ports: OvsPortSpec[],
  states: Map<string, PortState>,
): Map<string, number> {
  const what = `Cannot add ${ports.map((p) => p.name).join(", ")} to "${bridge}"`;
  const out = new Map<string, number>();
  for (const port of ports) {
    const st = states.get(port.name)!;
    if (st.ofport <= 0) {
      throw new Error(`${what}: ${port.name}: ${st.error || "no ofport assigned"}`);
    }
    if (port.ofportRequest !== undefined && st.ofport !== port.ofportRequest) {
      throw new Error(
        `${what}: ${port.name} got ofport ${st.ofport}, not ${port.ofportRequest} (taken by a port the agent does not know?)`,
      );
    }
    out.set(port.name, st.ofport);
  }
  return out;
}
