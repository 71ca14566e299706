/**
 * The first interface's switch port, plugged while the manager is asked for its port (wiring.ts).
 * ovs-vswitchd spends a few ms of its own CPU on each new port (most of it re-reading every
 * interface of the node through netlink), and it does the port's flow bundle only after that: a
 * port plugged once the manager has answered puts that work between the answer and the ADD's.
 * Plugged as soon as `ip` has made the veth pair (the device must exist, or ovs-vswitchd fails to
 * open it and tries again when it appears: a second pass), with what is known before the answer:
 * the name, the ofport the agent picked, the external IDs the request names, and the qdisc left as
 * tc makes it (whether the port is limited is the manager's to say). Once the manager has
 * answered, {@link EarlyPlug.finish} writes external IDs that changed (a public network's tenant
 * is its owner), or plugs the port then when it was not plugged early.
 */
import type { OvsPortSpec } from "../dataplane/ovs.ts";
import type { StartedCommand } from "@knitter/common";
import type { Links, SwitchPorts } from "./seams.ts";

export class EarlyPlug {
  private cancelled = false;
  /** Whether the port went to the switch; settles once it is there (or failed, or never went). */
  private readonly plugged: Promise<boolean>;
  private readonly spec: OvsPortSpec;

  /**
   * Starts waiting for the pair `batch` makes; `noting` is called just before the port is sent
   * (an undo must then remove it, whatever the switch answers). The port is plugged early only
   * when `alone` says so once the pair is made: in a burst, ovs-vswitchd is busy with the other
   * pods' new devices, and one early port would hold up the transaction that plugs all the others
   * together after their answers (PortPlugger), costing more than it saves.
   */
  constructor(
    private readonly d: { links: Links; ports: SwitchPorts },
    batch: StartedCommand,
    spec: { name: string; ofportRequest: number; externalIds: Record<string, string> },
    hooks: { noting: () => void; alone: () => boolean },
  ) {
    this.spec = { ...spec, keepQdisc: true };
    this.plugged = this.plug(batch, hooks);
    this.plugged.catch(() => {});
  }

  /** No port is sent after this (the ADD failed); wait for {@link settled} before undoing. */
  cancel(): void {
    this.cancelled = true;
  }

  /** Resolves once nothing is in flight any more; never rejects. */
  async settled(): Promise<void> {
    await this.plugged.catch(() => {});
  }

  /**
   * After the manager's answer: the port on the switch with `final` (its external IDs and
   * settings as decided now). Fails as the switch's add does.
   */
  async finish(final: OvsPortSpec): Promise<void> {
    if (!(await this.plugged)) {
      await this.d.ports.add([final]);
      return;
    }
    const ids = final.externalIds ?? {};
    if (!sameIds(ids, this.spec.externalIds ?? {})) await this.d.ports.label(final.name, ids);
  }

  private async plug(
    batch: StartedCommand,
    hooks: { noting: () => void; alone: () => boolean },
  ): Promise<boolean> {
    if (!(await this.d.links.pairMade(batch)) || this.cancelled || !hooks.alone()) return false;
    hooks.noting();
    await this.d.ports.add([this.spec]);
    return true;
  }
}

function sameIds(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}
