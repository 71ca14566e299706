/**
 * Deletes veths in batches. The kernel waits for an RCU grace period (about 20 ms here) for every
 * `ip link del`, one deletion after another under the RTNL lock, so 50 concurrent DELs took a
 * second in deletions alone. `ip link del group G` unregisters every link of a group with ONE
 * grace period: deletions that arrive while a batch runs are tagged with a fresh group and go
 * together in the next one (50 veths: 0.84 s one by one, 0.05 s as a group, measured here).
 */
import { GroupCommit, run } from "@knitter/common";

interface Pending {
  name: string;
  /** The netns path of the link; undefined: the agent's own. */
  netns?: string;
  settle(existed: boolean | Error): void;
}

/** Group IDs from here on are this agent's; 0 is the kernel's default group. */
const GROUP_BASE = 0x4b4e0000;
/** `ip -batch` reports "Command failed -:N" for line N. */
const FAILED_LINE = /Command failed -:(\d+)/g;

export class LinkDeleter {
  private readonly batcher = new GroupCommit<Pending>(
    256,
    (p) => `${p.netns ?? ""}/${p.name}`,
    (batch) => this.deleteBatch(batch),
  );
  private nextGroup = GROUP_BASE + Math.floor(Math.random() * 0xffff);

  /** Deletes the link (a veth takes its peer with it); false when there was none. */
  delete(name: string, netns?: string): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.batcher.submit({
        name,
        netns,
        settle: (r) => r instanceof Error ? reject(r) : resolve(r),
      });
    });
  }

  private async deleteBatch(batch: Pending[]): Promise<void> {
    const byNetns = new Map<string | undefined, Pending[]>();
    for (const p of batch) byNetns.set(p.netns, [...(byNetns.get(p.netns) ?? []), p]);
    await Promise.all([...byNetns].map(([netns, items]) => this.deleteIn(netns, items)));
  }

  private async deleteIn(netns: string | undefined, items: Pending[]): Promise<void> {
    const group = this.takeGroup();
    const lines = items.map((p) => `link set dev ${p.name} group ${group}`);
    lines.push(`link delete group ${group}`);
    let result;
    try {
      // -force: a link that is gone must not stop the others from being deleted.
      result = await run(["ip", "-force", "-batch", "-"], {
        stdin: lines.join("\n") + "\n",
        netns,
        check: false,
      });
    } catch (err) {
      for (const p of items) p.settle(err as Error);
      return;
    }
    const failed = new Set([...result.stderr.matchAll(FAILED_LINE)].map((m) => Number(m[1])));
    const grouped = items.filter((_, i) => !failed.has(i + 1));
    const deleteFailed = failed.has(lines.length) && grouped.length > 0;
    for (const [i, p] of items.entries()) {
      if (failed.has(i + 1)) {
        // Only "no such device" means it was gone; anything else is a real failure.
        p.settle(
          isNoDevice(lineError(result.stderr, i + 1))
            ? false
            : new Error(`Cannot delete ${p.name}: ${lineError(result.stderr, i + 1)}`),
        );
      } else if (deleteFailed) {
        p.settle(new Error(`Cannot delete ${p.name}: ${lineError(result.stderr, lines.length)}`));
      } else p.settle(true);
    }
  }

  private takeGroup(): number {
    const g = this.nextGroup;
    this.nextGroup = g >= GROUP_BASE + 0xffff ? GROUP_BASE + 1 : g + 1;
    return g;
  }
}

/** The error `ip` printed for line N: the line before its "Command failed -:N". */
function lineError(stderr: string, line: number): string {
  const lines = stderr.split("\n");
  const at = lines.indexOf(`Command failed -:${line}`);
  return at > 0 ? lines[at - 1] : stderr;
}

function isNoDevice(text: string): boolean {
  return /Cannot find device|does not exist|No such device/.test(text);
}
