/**
 * A service's IP families, as Kubernetes' dual-stack Services choose them (`ipFamilies`,
 * `ipFamilyPolicy`): SingleStack (the default) takes one family, the network's IPv4 one on a
 * dual-stack network unless `ipFamilies` names IPv6; PreferDualStack takes every family the network
 * has; RequireDualStack takes both and refuses a single-stack network. Two `ipFamilies` without a
 * policy mean RequireDualStack. The first family is the primary one: `vip` is its address.
 *
 * A dual-stack network's VIPs are one pool index, as a port's addresses are: the IPv6 VIP is the
 * IPv4 VIP's pair (its host part), so both are held, freed and quarantined together.
 */
import type { IpFamily, IpFamilyPolicy, ServiceInfo } from "@knitter/common";
import { parseIp } from "@knitter/common/address";
import { invalid } from "../errors.ts";
import type { NetworkRecord } from "../model.ts";
import { pairedIp6 } from "./dual_stack.ts";

type Net = Pick<NetworkRecord, "name" | "family" | "cidr" | "cidr6">;

export interface Families {
  ipFamilies: IpFamily[];
  ipFamilyPolicy: IpFamilyPolicy;
}

/** The families a network has addresses of, its own family first. */
export function networkFamilies(net: Net): IpFamily[] {
  if (net.family === 6) return ["IPv6"];
  return net.cidr6 === undefined ? ["IPv4"] : ["IPv4", "IPv6"];
}

/** The families a request asks for on `net`, checked against what the network has. */
export function chosenFamilies(
  net: Net,
  ask: { ipFamilies?: IpFamily[]; ipFamilyPolicy?: IpFamilyPolicy },
): Families {
  const has = networkFamilies(net);
  const policy = ask.ipFamilyPolicy ??
    ((ask.ipFamilies?.length ?? 0) > 1 ? "RequireDualStack" : "SingleStack");
  for (const [i, f] of (ask.ipFamilies ?? []).entries()) {
    if (!has.includes(f)) {
      throw invalid(
        `ipFamilies[${i}]`,
        `network "${net.name}" has no ${f} subnet (it has ${
          has.join(" and ")
        }): a service's VIPs are addresses of its network`,
      );
    }
  }
  if (policy === "SingleStack" && (ask.ipFamilies?.length ?? 0) > 1) {
    throw invalid(
      "ipFamilyPolicy",
      "SingleStack takes one family; ask for PreferDualStack or RequireDualStack to have both",
    );
  }
  if (policy === "RequireDualStack" && has.length < 2) {
    throw invalid(
      "ipFamilyPolicy",
      `network "${net.name}" is not dual-stack (it has ${
        has[0]
      } only): RequireDualStack needs a network with cidr and cidr6`,
    );
  }
  const first = ask.ipFamilies?.[0] ?? has[0];
  const ipFamilies = policy === "SingleStack"
    ? [first]
    : [first, ...has.filter((f) => f !== first)];
  return { ipFamilies, ipFamilyPolicy: policy };
}

/** The family of an address (text already known to parse). */
export function familyOf(ip: string): IpFamily {
  return parseIp(ip)?.family === 6 ? "IPv6" : "IPv4";
}

/**
 * Refuses a named VIP of another family than the service's first one (the network would take an
 * IPv6 VIP of a dual-stack network as its IPv4 pair's name; a VIP must say which it is).
 */
export function checkVipFamily(net: Net, families: IpFamily[], vip: string): void {
  const ip = parseIp(vip);
  if (!ip) return; // the pool's own check says what is wrong with it
  const family = familyOf(vip);
  if (family === families[0]) return;
  const has = networkFamilies(net);
  throw invalid(
    "vip",
    has.length === 1
      ? `${vip} is ${family}: network "${net.name}" is ${has[0]}-only`
      : `${vip} is ${family}: the VIP is of the first family asked for, and ipFamilies[0] is ${
        families[0]
      }`,
  );
}

/** The VIPs of the pool address `ip` (the network's own family), in `families`' order. */
export function vipsOf(net: Net, families: IpFamily[], ip: string): string[] {
  const own = networkFamilies(net)[0];
  return families.map((f) => f === own ? ip : pairedIp6(net, ip)!);
}

/** The families and VIPs of a record, also of one stored before services had several. */
export function recordFamilies(
  s: Pick<ServiceInfo, "vip" | "vips" | "ipFamilies" | "ipFamilyPolicy">,
): Families & { vips: string[] } {
  const vips = s.vips ?? [s.vip];
  return {
    vips,
    ipFamilies: s.ipFamilies ?? vips.map(familyOf),
    ipFamilyPolicy: s.ipFamilyPolicy ?? "SingleStack",
  };
}
