/**
 * Floating addresses in the node's nftables table (agent/README.md, "Floating addresses"): 1:1 NAT
 * both ways at the node that hosts the port. What arrives for the floating address from anywhere
 * but the host ports is DNATed to the pod, in its network's conntrack zone and with its mark (so
 * its routing table finds the host port, and two tenants' pods with one address stay apart); the
 * pod's own connections out of the uplinks leave with the floating address as their source instead
 * of the node's. The same for IPv6 in the `ip6` table: an IPv6 floating address stands for the
 * pod's IPv6 address (host_nft.ts hands the IPv6 bindings, `floating6`, to its IPv6 table as
 * `floating`; `fam` is the table's address keyword). Pure: host_nft.ts puts these lines into its
 * chains.
 *
 * @module
 */

/** One binding here: the floating address and the local pod's address it stands for (one family). */
export interface Floating {
  address: string;
  pod: string;
}

/** What of a host port's network the rules need (host_nft.ts HostNet has it). */
export interface FloatingNet {
  /** The network's node-local number: its conntrack zone and mark. */
  number: number;
  /** Its host port. */
  port: string;
  floating?: Floating[];
}

/** The address keyword of the table the rules go to. */
export type Fam = "ip" | "ip6";

/** Every binding of the networks, each with its network. */
function bindings<N extends FloatingNet>(nets: N[]): { n: N; f: Floating }[] {
  return nets.flatMap((n) => (n.floating ?? []).map((f) => ({ n, f })));
}

/** Whether any network here has a floating address (its pods need the uplinks). */
export function hasFloating(nets: FloatingNet[]): boolean {
  return bindings(nets).length > 0;
}

/**
 * raw: what comes for a floating address, in its network's zone: new connections in, and the
 * replies of the pod's connections out (the zone is of the original direction: both find theirs).
 */
export function floatingZoneRules(nets: FloatingNet[], anyHostPort: string, fam: Fam): string[] {
  return bindings(nets).map(({ n, f }) =>
    `iifname != ${anyHostPort} ${fam} daddr ${f.address} ct original zone set ${n.number}`
  );
}

/** mangle: a connection that starts towards a floating address is its network's (its mark). */
export function floatingMarkRules<N extends FloatingNet>(
  nets: N[],
  anyHostPort: string,
  setCtMark: (n: N) => string,
  fam: Fam,
): string[] {
  return bindings(nets).map(({ n, f }) =>
    `iifname != ${anyHostPort} ${fam} daddr ${f.address} ct state new ${setCtMark(n)}`
  );
}

/** nat prerouting: the floating address becomes the pod's. */
export function floatingDnatRules(nets: FloatingNet[], anyHostPort: string, fam: Fam): string[] {
  return bindings(nets).map(({ f }) =>
    `iifname != ${anyHostPort} ${fam} daddr ${f.address} dnat to ${f.pod}`
  );
}

/**
 * forward, out of the network: the pod, to wherever the node routes it but the host ports (its
 * new connections, and the replies of those that came in by its floating address): the floating
 * address is the pod's own on the outside, as a public address is a VM's. Not to link-local
 * addresses (the node's own); never into another network (`kh*` to `kh*` is dropped before).
 */
export function floatingOutRules(
  nets: FloatingNet[],
  anyHostPort: string,
  out: { fam: Fam; linkLocal: string },
): string[] {
  const { fam, linkLocal } = out;
  return bindings(nets).map(({ n, f }) =>
    `iifname "${n.port}" ${fam} saddr ${f.pod} oifname != ${anyHostPort} ${fam} daddr != ${linkLocal} accept`
  );
}

/**
 * forward, into the network: to the pod only what came for its floating address, or answers what
 * the pod sent out with it (the connection says which: no other address reaches it this way).
 */
export function floatingInRules(nets: FloatingNet[], fam: Fam): string[] {
  return bindings(nets).flatMap(({ n, f }) => [
    `oifname "${n.port}" ${fam} daddr ${f.pod} ct original ${fam} daddr ${f.address} accept`,
    `oifname "${n.port}" ${fam} daddr ${f.pod} ct reply ${fam} daddr ${f.address} accept`,
  ]);
}

/** nat postrouting: the pod's connections out leave with its floating address (before egress). */
export function floatingSnatRules(nets: FloatingNet[], anyHostPort: string, fam: Fam): string[] {
  return bindings(nets).map(({ n, f }) =>
    `iifname "${n.port}" ${fam} saddr ${f.pod} oifname != ${anyHostPort} snat to ${f.address}`
  );
}
