/**
 * Fairness between callers: each principal (a tenant, a node, a cluster's monitor, the admin, the
 * metrics scraper) has a budget of its role: a rate (token bucket), a number of requests in
 * progress, a smaller number of lists in progress (the routes whose work grows with the data), and
 * the manager's time its requests may take a second (a second bucket, charged the time during which
 * the principal has at least one request in progress: a few costly requests weigh what many cheap
 * ones do, and a burst of parallel requests weighs its span, not the sum of their times).
 * A request beyond its budget is refused at once with 429 and Retry-After, before any work, never
 * queued: a queue would let one caller's backlog delay everyone's.
 *
 * The time budget is work-conserving: a debt is paid only while another caller wants the manager
 * (a call or a list of anyone but the admin within the last second), since the time charged is
 * wall time, which a slow store (etcd under load) stretches for everyone alike; a manager that
 * serves one tenant alone serves it at full speed.
 */
import type { Principal } from "./auth.ts";
import { ApiError } from "./errors.ts";

/** One role's budget; 0 lifts a limit. */
export interface Budget {
  /** Requests a second, sustained (the bucket's refill). */
  ratePerSecond: number;
  /** Requests at once after a quiet while (the bucket's size). */
  burst: number;
  /** Requests in progress. */
  concurrent: number;
  /** Lists (GET of a collection) in progress. */
  concurrentLists: number;
  /** Milliseconds of the manager's time its requests may take a second, sustained. */
  busyMsPerSecond: number;
  /** Milliseconds they may take at once after a quiet while. */
  busyBurstMs: number;
}

export type Role = Principal["scope"];

export type FairnessConfig = Record<Role, Budget>;

const UNLIMITED: Budget = {
  ratePerSecond: 0,
  burst: 0,
  concurrent: 0,
  concurrentLists: 0,
  busyMsPerSecond: 0,
  busyBurstMs: 0,
};

/**
 * Tenants share the manager: a tenant's script may create a few hundred objects at full speed, or
 * a few dozen in parallel, but not hold the manager for longer; `knitctl trace` lists three
 * collections at once. The system's own callers must never be held back in normal operation:
 * a node's agent answers a burst of pod starts (its CNI calls run in parallel), a monitor replays a
 * whole cluster on start, and the admin runs migrations and benchmarks. Their budgets are far above
 * what they do, and bound only a stolen token.
 */
export const DEFAULT_FAIRNESS: FairnessConfig = {
  tenant: {
    ratePerSecond: 100,
    burst: 500,
    concurrent: 32,
    concurrentLists: 4,
    busyMsPerSecond: 100,
    busyBurstMs: 1000,
  },
  // The system's own callers have no time budget. A monitor replays its whole cluster as fast as
  // its workers go (thousands a second for a big one): its requests in progress are bounded, not
  // their rate.
  node: { ...UNLIMITED, ratePerSecond: 500, burst: 2000, concurrent: 256, concurrentLists: 32 },
  monitor: { ...UNLIMITED, concurrent: 256, concurrentLists: 64 },
  admin: UNLIMITED,
  metrics: { ...UNLIMITED, ratePerSecond: 10, burst: 20, concurrent: 2 },
};

/** Why a request was refused (the throttling metric's `reason`). */
export type ThrottleReason =
  | "rate"
  | "concurrency"
  | "lists"
  | "busy"
  | "body_size"
  | "body_depth";

/** A 429: the error body as every other, and when to come back. */
export class ThrottledError extends ApiError {
  constructor(
    message: string,
    readonly reason: ThrottleReason,
    readonly retryAfterSeconds: number,
  ) {
    super("too_many_requests", message);
  }
}

/** Answers after which the connection guard leaves the client's connection unread a while. */
const heldOff = new WeakMap<Response, number>();

/** Marks `res`: its connection is not read for `ms` (conn_guard.ts). */
export function holdOff(res: Response, ms: number): Response {
  heldOff.set(res, ms);
  return res;
}

/** How long `res`'s connection goes unread: 0 for an answer of no refusal. */
export function holdOffMs(res: Response): number {
  return heldOff.get(res) ?? 0;
}

/** What one principal holds now. */
interface Account {
  tokens: number;
  /** Milliseconds of the manager's time left (below 0: owed). */
  busyMs: number;
  refilledAt: number;
  active: number;
  /** Calls and lists in progress (not long-polls): what makes it contend for the manager. */
  working: number;
  /** Since when its time in progress is not charged yet (while `working` > 0). */
  workingSince: number;
  lists: number;
}

/** How long after another caller's last call a debt of time is still paid. */
const CONTENTION_MS = 1000;

/**
 * What a request does, for its budget: a call; a list (counted in the lists in progress too); a
 * wait (a long-poll: it holds a place among the requests in progress, but its time is spent
 * waiting for news, not working, and is not charged).
 */
export type RequestKind = "call" | "list" | "wait";

/** A request let in: give it back when it is answered. */
export interface Admission {
  release(): void;
}

export class Fairness {
  private readonly accounts = new Map<string, Account>();
  /** When each principal (but the admin) last began or ended a call or a list. */
  private readonly lastWork = new Map<string, number>();

  constructor(
    private readonly budgets: FairnessConfig = DEFAULT_FAIRNESS,
    private readonly onThrottled: (role: Role, reason: ThrottleReason) => void = () => {},
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Requests of each role in progress now (every role, 0 too), for the in-flight gauge. */
  inFlight(): Map<Role, number> {
    const out = new Map(Object.keys(this.budgets).map((role) => [role as Role, 0]));
    for (const [key, a] of this.accounts) {
      const role = key.slice(0, key.indexOf(":")) as Role;
      out.set(role, out.get(role)! + a.active);
    }
    return out;
  }

  /** Lets a request in, or throws a ThrottledError. */
  admit(principal: Principal, kind: RequestKind): Admission {
    const list = kind === "list";
    const budget = this.budgets[principal.scope];
    const key = accountKey(principal);
    const account = this.account(key, budget);
    const refuse = (reason: ThrottleReason, message: string, after: number) => {
      this.onThrottled(principal.scope, reason);
      return new ThrottledError(message, reason, after);
    };
    if (budget.concurrent > 0 && account.active >= budget.concurrent) {
      throw refuse(
        "concurrency",
        `${
          describeKey(key)
        } has ${account.active} requests in progress, its limit; retry when one is answered`,
        1,
      );
    }
    if (list && budget.concurrentLists > 0 && account.lists >= budget.concurrentLists) {
      throw refuse(
        "lists",
        `${
          describeKey(key)
        } has ${account.lists} lists in progress, its limit; retry when one is answered`,
        1,
      );
    }
    this.refill(account, budget);
    this.charge(account);
    if (budget.busyMsPerSecond > 0 && account.busyMs <= 0 && this.contended(key)) {
      const after = Math.max(1, Math.ceil(-account.busyMs / budget.busyMsPerSecond));
      throw refuse(
        "busy",
        `${
          describeKey(key)
        }'s requests took more of the manager's time than its share (${budget.busyMsPerSecond} ms a second); retry in ${after} s`,
        after,
      );
    }
    if (budget.ratePerSecond > 0) {
      if (account.tokens < 1) {
        const after = Math.ceil((1 - account.tokens) / budget.ratePerSecond);
        throw refuse(
          "rate",
          `${
            describeKey(key)
          } is over its rate of ${budget.ratePerSecond} requests a second (bursts of ${budget.burst}); retry in ${after} s`,
          after,
        );
      }
      account.tokens -= 1;
    }
    const works = kind !== "wait";
    account.active++;
    if (works) this.working(key, account, 1);
    if (list) account.lists++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        if (works) this.working(key, account, -1);
        account.active--;
        if (list) account.lists--;
        this.forgetIdle(key, account, budget);
      },
    };
  }

  private working(key: string, a: Account, delta: 1 | -1): void {
    this.charge(a);
    a.working += delta;
    if (!key.startsWith("admin:")) this.lastWork.set(key, this.now());
  }

  /** Charges the account the time it has had work in progress since the last charge. */
  private charge(a: Account): void {
    const now = this.now();
    if (a.working > 0) a.busyMs -= now - a.workingSince;
    a.workingSince = now;
  }

  /** Whether a principal other than `key` (and the admin) works now, or did within CONTENTION_MS. */
  private contended(key: string): boolean {
    const since = this.now() - CONTENTION_MS;
    for (const [other, at] of this.lastWork) {
      if (at < since && !this.accounts.get(other)?.working) {
        this.lastWork.delete(other);
        continue;
      }
      if (other !== key) return true;
    }
    return false;
  }

  private account(key: string, budget: Budget): Account {
    let a = this.accounts.get(key);
    if (!a) {
      a = {
        tokens: budget.burst,
        busyMs: budget.busyBurstMs,
        refilledAt: this.now(),
        active: 0,
        working: 0,
        workingSince: this.now(),
        lists: 0,
      };
      this.accounts.set(key, a);
    }
    return a;
  }

  private refill(a: Account, budget: Budget): void {
    const now = this.now();
    const seconds = (now - a.refilledAt) / 1000;
    a.tokens = Math.min(budget.burst, a.tokens + seconds * budget.ratePerSecond);
    a.busyMs = Math.min(budget.busyBurstMs, a.busyMs + seconds * budget.busyMsPerSecond);
    a.refilledAt = now;
  }

  /** An account with nothing in progress and a full bucket is what a new one would be: dropped. */
  private forgetIdle(key: string, a: Account, budget: Budget): void {
    if (a.active > 0) return;
    this.refill(a, budget);
    if (a.tokens < budget.burst || a.busyMs < budget.busyBurstMs) return;
    this.accounts.delete(key);
  }
}

/** One account per principal: a tenant's tokens share their tenant's budget. */
function accountKey(p: Principal): string {
  switch (p.scope) {
    case "tenant":
      return `tenant:${p.tenant}`;
    case "node":
      return `node:${p.node}`;
    case "monitor":
      return `monitor:${p.cluster}`;
    default:
      return `${p.scope}:`;
  }
}

function describeKey(key: string): string {
  const [role, name] = [key.slice(0, key.indexOf(":")), key.slice(key.indexOf(":") + 1)];
  if (role === "monitor") return `the monitor of cluster "${name}"`;
  return name ? `${role} "${name}"` : `the ${role} token`;
}
