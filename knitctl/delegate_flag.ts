/**
 * `--delegate PLUGIN:WHERE[:MODE]`: an external network's delegate (manager schemas.ts Delegate) on
 * one flag. WHERE is macvlan's and ipvlan's master, host-device's device, or sriov's VF PCI address
 * (whose own colons stay in it). The manager checks the names and modes and says what is wrong.
 */
import type { NetworkDelegate } from "@knitter/common";
import { UsageError } from "./errors.ts";

const USAGE =
  "--delegate takes macvlan:MASTER[:MODE], ipvlan:MASTER[:MODE], host-device:DEVICE or sriov:PCI (e.g. macvlan:eth1:bridge)";

export function delegateFlag(text: string): NetworkDelegate {
  const colon = text.indexOf(":");
  const plugin = colon > 0 ? text.slice(0, colon) : text;
  const rest = colon > 0 ? text.slice(colon + 1) : "";
  if (rest === "") throw new UsageError(`${USAGE}; got "${text}"`);
  const [where, mode, ...extra] = rest.split(":");
  switch (plugin) {
    case "macvlan":
    case "ipvlan":
      if (extra.length > 0) break;
      return { plugin, master: where, ...(mode ? { mode } : {}) } as NetworkDelegate;
    case "host-device":
      if (mode !== undefined) break;
      return { plugin, device: where };
    case "sriov":
      return { plugin, deviceID: rest };
  }
  throw new UsageError(`${USAGE}; got "${text}"`);
}
