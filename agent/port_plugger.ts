/**
 * Plugs pods' host ends into the bridge. ADDs that arrive while a transaction is in flight share
 * the next one: OVSDB and ovs-vswitchd reconfigure once for many ports instead of once each.
 */
import { GroupCommit } from "@knitter/common";
import type { Ovs, OvsPortSpec } from "./ovs.ts";

interface Pending {
  ports: OvsPortSpec[];
  resolve(ofports: Map<string, number>): void;
  reject(err: unknown): void;
}

/** Ports per transaction: ovs-vsctl gets one command line, so keep it bounded. */
const MAX_BATCH = 32;

export class PortPlugger {
  private readonly batcher: GroupCommit<Pending>;

  constructor(private readonly ovs: Ovs, private readonly bridge: string) {
    this.batcher = new GroupCommit<Pending>(
      MAX_BATCH,
      (p) => p.ports.map((x) => x.name).join(","),
      (batch) => this.plug(batch),
    );
  }

  /** Adds the ports (one pod's) and answers their ofports. */
  add(ports: OvsPortSpec[]): Promise<Map<string, number>> {
    return new Promise((resolve, reject) => this.batcher.submit({ ports, resolve, reject }));
  }

  private async plug(batch: Pending[]): Promise<void> {
    try {
      const all = await this.ovs.addPorts(this.bridge, batch.flatMap((p) => p.ports));
      for (const p of batch) p.resolve(new Map(p.ports.map((x) => [x.name, all.get(x.name)!])));
    } catch (err) {
      if (batch.length === 1) return batch[0].reject(err);
      // One pod's bad port must not fail the others: each again on its own (add-port is
      // --may-exist, so what the shared transaction did add is simply found again).
      for (const p of batch) {
        try {
          p.resolve(await this.ovs.addPorts(this.bridge, p.ports));
        } catch (e) {
          p.reject(e);
        }
      }
    }
  }
}
