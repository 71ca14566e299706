/**
 * Address sets as the fewest CIDRs: a security group rule names one CIDR, and a group holds at
 * most 64 rules, so pods' addresses are merged into aligned blocks and an ipBlock's `except`
 * becomes the blocks of its CIDR that remain.
 */
import { bitsOf, type Cidr, type Family, type Ip } from "@knitter/common/address";

/** Inclusive range of one family. */
interface Range {
  family: Family;
  first: bigint;
  last: bigint;
}

/** The fewest aligned CIDRs that cover exactly the range. */
function rangeToCidrs(r: Range): Cidr[] {
  const bits = bitsOf(r.family);
  const out: Cidr[] = [];
  let at = r.first;
  while (at <= r.last) {
    // The largest block aligned at `at` that does not pass `last`.
    let prefix = bits;
    while (prefix > 0) {
      const size = 1n << BigInt(bits - prefix + 1);
      if ((at & (size - 1n)) !== 0n || at + size - 1n > r.last) break;
      prefix--;
    }
    const size = 1n << BigInt(bits - prefix);
    out.push({ family: r.family, base: at, prefix, size });
    at += size;
  }
  return out;
}

/** What remains of `cidr` once every CIDR of `except` is taken out, as the fewest CIDRs. */
export function subtractCidrs(cidr: Cidr, except: Cidr[]): Cidr[] {
  let left: Range[] = [{ family: cidr.family, first: cidr.base, last: cidr.base + cidr.size - 1n }];
  for (const e of except) {
    if (e.family !== cidr.family) continue;
    const first = e.base;
    const last = e.base + e.size - 1n;
    left = left.flatMap((r) => {
      if (last < r.first || first > r.last) return [r];
      const parts: Range[] = [];
      if (first > r.first) parts.push({ family: r.family, first: r.first, last: first - 1n });
      if (last < r.last) parts.push({ family: r.family, first: last + 1n, last: r.last });
      return parts;
    });
  }
  return left.flatMap(rangeToCidrs);
}

/** The fewest CIDRs that hold exactly these addresses (IPv4 first, then IPv6). */
export function coverAddresses(ips: Ip[]): Cidr[] {
  const out: Cidr[] = [];
  for (const family of [4, 6] as const) {
    const values = [...new Set(ips.filter((ip) => ip.family === family).map((ip) => ip.value))]
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    let run: Range | undefined;
    for (const v of values) {
      if (run && v === run.last + 1n) run.last = v;
      else {
        if (run) out.push(...rangeToCidrs(run));
        run = { family, first: v, last: v };
      }
    }
    if (run) out.push(...rangeToCidrs(run));
  }
  return out;
}
