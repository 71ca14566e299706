/**
 * What this agent installed on its bridge, on disk, so that a restarted agent knows the table
 * without reading it back from the switch. Reading 112k flows back (`dump-flows`, or the dump that
 * `replace-flows` makes first) is most of a full resync's time (docs/benchmarks.md); with the
 * journal, a restart costs the compile, reading this file and one flow count, and sends only what
 * changed meanwhile.
 *
 * Two files in the agent's state directory: `flows.snapshot`, the whole set after a replacement
 * (one flow a line), and `flows.log`, every change since, each written before its bundle goes to
 * the switch and closed after it:
 *
 *     B            a change begins
 *     +<flow>      added
 *     -<flow>      deleted
 *     E | A        it was applied (E) or the bundle failed and changed nothing (A)
 *
 * A change that was begun but never closed (the agent stopped in between) makes the journal
 * unknown: the switch may or may not have it. So does a replacement under way (the files are
 * removed before it starts). `load` answers null then, and the agent replaces the table as it did
 * without a journal. A journal is only believed when the switch holds as many flows as it says
 * (`resumable`): a restarted or recreated switch, or flows deleted or added by hand while the agent
 * was away, fail that check. A flow changed by hand in place is left to the periodic flow check, as
 * it is while the agent runs.
 *
 * A snapshot (16 MB for 112k flows) is written in the background and no change waits for it; the
 * log is cut only after its rename, and replaying a change the snapshot already has is harmless
 * (`load`).
 *
 * Writing never fails a sync: a journal that cannot be written is removed (best effort) and not
 * written again until the next replacement.
 */
import type { Logger } from "@knitter/common";
import type { Ovs } from "./ovs.ts";

/** The log is folded into a new snapshot beyond this size. */
const MAX_LOG_BYTES = 8 << 20;

export class FlowJournal {
  private readonly snapshotPath: string;
  private readonly logPath: string;
  private logBytes = 0;
  /** False after a write failed, or while nothing is known (before the first snapshot). */
  private writing = false;
  /** The snapshots being written, one after the other, in the background. */
  private pending: Promise<void> = Promise.resolve();
  /** Appends to the log and the log's replacement, one after the other. */
  private appending: Promise<void> = Promise.resolve();
  /** For each snapshot being written: the log's text since its set was taken. */
  private readonly since = new Set<string[]>();

  constructor(dir: string, private readonly log: Logger) {
    this.snapshotPath = `${dir}/flows.snapshot`;
    this.logPath = `${dir}/flows.log`;
  }

  /** The set the journal records, or null when there is none or it is unknown. */
  async load(): Promise<Set<string> | null> {
    await this.settled();
    let snapshot: string;
    let log: string;
    try {
      [snapshot, log] = await Promise.all([
        Deno.readTextFile(this.snapshotPath),
        Deno.readTextFile(this.logPath).catch((err) => {
          if (err instanceof Deno.errors.NotFound) return "";
          throw err;
        }),
      ]);
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) {
        this.log.warn("cannot read the flow journal", { error: String(err) });
      }
      return null;
    }
    const flows = new Set(snapshot === "" ? [] : snapshot.split("\n"));
    flows.delete("");
    // Replaying a change the snapshot already has changes nothing: a flow ends as the last change
    // naming it left it, whatever the set it started in. So a log may start before its snapshot's
    // set was taken (a fold that stopped before cutting the log, the changes made while a snapshot
    // was written).
    let pending: string[] | null = null;
    for (const line of log.split("\n")) {
      if (line === "") continue;
      const kind = line[0];
      if (kind === "B") {
        if (pending) return null;
        pending = [];
      } else if (kind === "+" || kind === "-") {
        if (!pending) return null;
        pending.push(line);
      } else if (kind === "E" || kind === "A") {
        if (!pending) return null;
        if (kind === "E") {
          for (const l of pending) {
            if (l[0] === "+") flows.add(l.slice(1));
            else flows.delete(l.slice(1));
          }
        }
        pending = null;
      } else {
        return null;
      }
    }
    if (pending) return null;
    this.logBytes = log.length;
    this.writing = true;
    return flows;
  }

  /** Forgets the record: a replacement is about to start, and until it is done nothing is known. */
  async invalidate(): Promise<void> {
    await this.settled();
    await this.invalidateNow();
  }

  /** invalidate without waiting for the writes: a failing write calls it from inside them. */
  private async invalidateNow(): Promise<void> {
    this.writing = false;
    await Promise.all([this.snapshotPath, this.logPath].map((p) => removeIfThere(p)))
      .catch((err) => this.log.warn("cannot remove the flow journal", { error: String(err) }));
  }

  /**
   * Records `flows` as the whole table (after a replacement, or to fold a long log). The file is
   * written in the background (16 MB for 112k flows) and nothing waits for it: changes made
   * meanwhile go to the log as usual, which the new snapshot's rename leaves in place (module
   * documentation of load), and once it is in the log is cut to the changes since `flows` was
   * taken. An agent that stops before the rename finds the old snapshot with a complete log, or
   * after an invalidate none at all. `flows` is read later: the caller must not change it.
   */
  snapshot(flows: Iterable<string>): Promise<void> {
    const since: string[] = [];
    this.since.add(since);
    this.writing = true;
    this.pending = this.pending.then(() => this.write(flows, since));
    return this.pending;
  }

  /** Resolves once the snapshots and log lines being written (if any) are on disk. */
  async settled(): Promise<void> {
    await this.pending;
    await this.appending;
  }

  private async write(flows: Iterable<string>, since: string[]): Promise<void> {
    try {
      if (!this.writing) return; // broken meanwhile
      const tmp = `${this.snapshotPath}.tmp`;
      await Deno.writeTextFile(tmp, Array.from(flows).join("\n"));
      await this.exclusive(async () => {
        // Broken meanwhile: the files are gone, and the changes since `flows` with them.
        if (!this.writing) return await removeIfThere(tmp);
        await Deno.rename(tmp, this.snapshotPath);
        const text = since.join("");
        const tmpLog = `${this.logPath}.tmp`;
        await Deno.writeTextFile(tmpLog, text);
        await Deno.rename(tmpLog, this.logPath);
        this.logBytes = text.length;
      });
    } catch (err) {
      await this.broken(err);
    } finally {
      this.since.delete(since);
    }
  }

  /** Before a bundle: the change it makes. Waits only for the log lines before it. */
  async begin(add: string[], del: string[]): Promise<void> {
    if (!this.writing) return;
    const text = ["B", ...add.map((l) => `+${l}`), ...del.map((l) => `-${l}`), ""].join("\n");
    await this.append(text);
  }

  /**
   * After the bundle: whether it applied. `installed` is the set now on the switch; a long log is
   * folded into a new snapshot of it, in the background (the caller must not change `installed`).
   */
  async end(applied: boolean, installed: ReadonlySet<string>): Promise<void> {
    if (!this.writing) return;
    await this.append(applied ? "E\n" : "A\n");
    if (this.writing && this.logBytes > MAX_LOG_BYTES && this.since.size === 0) {
      void this.snapshot(installed);
    }
  }

  private append(text: string): Promise<void> {
    return this.exclusive(async () => {
      if (!this.writing) return;
      for (const s of this.since) s.push(text);
      try {
        await appendText(this.logPath, text);
        this.logBytes += text.length;
      } catch (err) {
        await this.broken(err);
      }
    });
  }

  /** Runs `step` after the log's earlier steps. */
  private exclusive(step: () => Promise<void>): Promise<void> {
    const run = this.appending.then(step);
    this.appending = run.catch(() => {});
    return run;
  }

  private async broken(err: unknown): Promise<void> {
    this.log.warn("cannot write the flow journal; a restart will read the table back", {
      error: String(err),
    });
    await this.invalidateNow();
  }
}

/**
 * The flows on the bridge as the journal records them, when the switch holds as many flows as
 * that (module documentation); "empty" when the switch has no flow at all (it restarted: nothing
 * to read back or compare with); null otherwise, and when there is no journal.
 */
export async function resumable(
  journal: FlowJournal,
  ovs: Ovs,
  bridge: string,
): Promise<Set<string> | "empty" | null> {
  const count = await ovs.flowCount(bridge).catch(() => -1);
  if (count === 0) return "empty";
  if (count < 0) return null;
  const flows = await journal.load();
  return flows?.size === count ? flows : null;
}

/**
 * A pod's change (a few lines) is appended with one blocking write: it stands between the flow
 * sync and its bundle, and an asynchronous write costs a thread hop and an event loop turn there
 * (0.2-2 ms under stopwatches, against tens of µs). A large change (a resync) is written without
 * holding the event loop.
 */
async function appendText(path: string, text: string): Promise<void> {
  if (text.length <= SYNC_APPEND_BYTES) Deno.writeTextFileSync(path, text, { append: true });
  else await Deno.writeTextFile(path, text, { append: true });
}

const SYNC_APPEND_BYTES = 64 << 10;

async function removeIfThere(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
}
