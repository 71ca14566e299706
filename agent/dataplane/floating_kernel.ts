/**
 * Floating addresses in the node's kernel, besides the nftables rules (floating_nft.ts): the
 * connections of a binding that left this node (unbound, released, or moved with its port) are
 * deleted from conntrack, or their NAT would go on; and, without BGP, the node answers ARP for the
 * floating addresses of its pods on its uplinks (proxy ARP: a neighbour entry `proxy` on each
 * uplink, and the address routed to the pod's host port so the kernel answers for it), and when it
 * starts answering for one (a bind, or the port moved here from another node) it says so at once:
 * gratuitous ARP on each uplink (`arping -U`, the address as sender with the uplink's MAC), so that
 * switches and hosts that still have the old node's MAC cached for it update their caches now and
 * not when their entry goes stale (tens of seconds). With BGP the node announces each /32 instead
 * (bgp/advertised.ts) and answers no ARP for them.
 *
 * An IPv6 floating address (`floating6`) is the same with neighbour discovery: without BGP the node
 * answers neighbour solicitations for it on its IPv6 uplinks (proxy NDP: `proxy_ndp` on the uplink,
 * and a `proxy` neighbour entry; the kernel needs no route for it, unlike proxy ARP), with BGP it
 * announces a /128. No unsolicited neighbour advertisement is sent when one moves here: no Debian
 * tool sends one for an address that is not the node's own; a neighbour that cached the old node's
 * MAC reaches the pod through the old node while it is up (it routes the address on to the LAN),
 * and finds the new one when neighbour unreachability detection fails its entry.
 *
 * @module
 */
import type { Logger, run } from "@knitter/common";
import type { FloatingNet } from "./floating_nft.ts";

/** How it runs commands and sets sysctls (host_ports.ts's KernelSeams has it; tests give a fake). */
export interface FloatingSeams {
  run: typeof run;
  sysctl(path: string, value: string): Promise<void>;
}

/**
 * One gratuitous ARP for an address on an uplink. Debian's `arping` (Thomas Habets'): it sends from
 * any address (`-S`), where iputils' binds to it first and so needs the address to be the node's
 * own.
 */
function garpArgv(address: string, uplink: string): string[] {
  return ["arping", "-q", "-U", "-S", address, "-i", uplink, "-c", "1", address];
}

/**
 * Rounds of gratuitous ARP per address and uplink (one may be lost, and a neighbour ignores a
 * change within its `locktime`, 1 s by default, of the last), each its own `arping`, so that an
 * address the node stops answering meanwhile is announced no more.
 */
export const GARP_ROUNDS = 3;
const GARP_GAP_MS = 500;

/**
 * At most this many `arping` at once: an agent that starts answers (and announces) every binding
 * of the node again, and a node may have hundreds.
 */
export const MAX_GARP_SENDERS = 8;

/** One binding as the kernel has it: where its address is answered and routed. */
interface Answered {
  address: string;
  pod: string;
  port: string;
  family: 4 | 6;
}

export class FloatingKernel {
  /** The bindings last applied, by floating address. */
  private applied = new Map<string, Answered>();
  /** The uplinks the proxy ARP entries were made on, and the proxy NDP entries. */
  private uplinks: string[] = [];
  private uplinks6: string[] = [];
  /** Gratuitous ARPs to send, and those sending them (not waited for by the next change). */
  private garps: { address: string; uplink: string }[] = [];
  private senders = new Set<Promise<void>>();
  /** The addresses whose ARP this node answers now: only those are announced. */
  private answering = new Set<string>();
  private readonly gapMs: number;

  constructor(
    private readonly kernel: FloatingSeams,
    private readonly log: Logger,
    /** Answer ARP for the floating addresses on the uplinks (no BGP to announce them). */
    private readonly answerArp: boolean,
    /** `gapMs`: between two rounds of gratuitous ARP (tests shorten it). */
    opts: { gapMs?: number } = {},
  ) {
    this.gapMs = opts.gapMs ?? GARP_GAP_MS;
  }

  /**
   * Makes the kernel's side that of `nets`' bindings, after their rules are in (host_ports.ts):
   * IPv4 ones answered on `uplinks`, IPv6 ones (`floating6`) on `uplinks6`.
   */
  async reconcile(
    nets: (FloatingNet & { floating6?: FloatingNet["floating"] })[],
    uplinks: string[],
    uplinks6: string[] = uplinks,
  ): Promise<void> {
    const wanted = new Map<string, Answered>();
    for (const n of nets) {
      for (const f of n.floating ?? []) wanted.set(f.address, { ...f, port: n.port, family: 4 });
      for (const f of n.floating6 ?? []) wanted.set(f.address, { ...f, port: n.port, family: 6 });
    }
    const uplinksChanged = uplinks.join() !== this.uplinks.join() ||
      uplinks6.join() !== this.uplinks6.join();
    for (const [address, before] of this.applied) {
      const now = wanted.get(address);
      if (now?.pod === before.pod && now.port === before.port && !uplinksChanged) continue;
      if (this.answerArp) await this.unanswer(before);
      if (now?.pod !== before.pod || now.port !== before.port) await this.forget(before);
    }
    this.uplinks = uplinks;
    this.uplinks6 = uplinks6;
    for (const [address, now] of wanted) {
      const before = this.applied.get(address);
      if (before?.pod === now.pod && before.port === now.port && !uplinksChanged) continue;
      if (this.answerArp) await this.answer(now);
      if (this.answerArp && now.family === 4) this.announce(now.address);
    }
    this.applied = wanted;
  }

  /** Resolves once the gratuitous ARPs asked for so far are out (or failed and logged). */
  async announced(): Promise<void> {
    while (this.senders.size > 0) await Promise.all(this.senders);
  }

  /** Gratuitous ARP for `address` on every uplink, in the background, in order. */
  private announce(address: string): void {
    for (const uplink of this.uplinks) this.garps.push({ address, uplink });
    while (this.senders.size < MAX_GARP_SENDERS && this.garps.length > 0) {
      const sender: Promise<void> = this.drain().finally(() => this.senders.delete(sender));
      this.senders.add(sender);
    }
  }

  /** One sender: sends what is queued until nothing is, each in rounds while still answered. */
  private async drain(): Promise<void> {
    for (let next = this.garps.shift(); next; next = this.garps.shift()) {
      for (let round = 0; round < GARP_ROUNDS && this.answering.has(next.address); round++) {
        if (round > 0) await new Promise((r) => setTimeout(r, this.gapMs));
        // One that cannot be sent is logged once: the next rounds would fail alike.
        if (!this.answering.has(next.address)) break;
        if (!await this.sendGarp(next.address, next.uplink)) break;
      }
    }
  }

  /** Sends one; false when it could not (logged). */
  private async sendGarp(address: string, uplink: string): Promise<boolean> {
    let error: string;
    try {
      const r = await this.kernel.run(garpArgv(address, uplink), { check: false });
      // Exit 1 is "no reply", what an unsolicited ARP expects; errors say so on stderr.
      if (r.code <= 1 && r.stderr.trim() === "") return true;
      error = r.stderr.trim() || `exit ${r.code}`;
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    this.log.error("cannot send gratuitous ARP for a floating address that moved here", {
      address,
      uplink,
      error,
      hint: "neighbours with the old node's MAC cached reach it only when their entry goes " +
        "stale; is arping installed (Debian: arping)?",
    });
    return false;
  }

  /** Deletes the connections made with the address, both ways (none is fine). */
  private async forget(a: Answered): Promise<void> {
    const { address } = a;
    const family = a.family === 6 ? ["-f", "ipv6"] : [];
    for (const side of ["--orig-dst", "--reply-dst"]) {
      const argv = ["conntrack", "-D", ...family, side, address];
      const r = await this.kernel.run(argv, { check: false });
      // 1: nothing matched; anything else is a failure to report (the NAT may go on).
      if (r.code > 1) {
        this.log.error("cannot delete a floating address's connections from conntrack", {
          address,
          error: r.stderr.trim(),
          hint: "is the conntrack tool installed (Debian: conntrack)?",
        });
      }
    }
  }

  private async answer(a: Answered): Promise<void> {
    this.answering.add(a.address);
    if (a.family === 6) {
      for (const u of this.uplinks6) await this.kernel.sysctl(`net.ipv6.conf.${u}.proxy_ndp`, "1");
    }
    await this.kernel.run(["ip", "-batch", "-"], { stdin: this.answerLines(a, "replace") });
  }

  /**
   * The `ip -batch` lines that make (`replace`) or delete (`del`) the answer for a binding: proxy
   * ARP on the uplinks, with the route the kernel checks before it answers; or proxy NDP on the
   * IPv6 uplinks.
   */
  private answerLines(a: Answered, op: "replace" | "del"): string {
    const uplinks = a.family === 4 ? this.uplinks : this.uplinks6;
    const lines = [
      ...(a.family === 4 ? [`route ${op} ${a.address}/32 dev ${a.port}`] : []),
      ...uplinks.map((u) => `neigh ${op} proxy ${a.address} dev ${u}`),
    ];
    return lines.join("\n") + "\n";
  }

  private async unanswer(a: Answered): Promise<void> {
    // Announced no more from now: a round under way ends, none is sent after it.
    this.answering.delete(a.address);
    this.garps = this.garps.filter((g) => g.address !== a.address);
    // `-force`: what is gone already (a device deleted with its routes) is no failure.
    await this.kernel.run(["ip", "-force", "-batch", "-"], {
      stdin: this.answerLines(a, "del"),
      check: false,
    });
  }
}
