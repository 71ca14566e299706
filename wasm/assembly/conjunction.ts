// Conjunctive matches of the security group rules (see ../../agent/PIPELINE.md, "Security
// groups"): their ids, the `conjunction(id,k/n)` action, and the merge of the lines that share a
// match. Open vSwitch keeps one flow per match and priority, so the values a rule shares with
// others (a peer, a block of ports, the port itself) become one flow carrying every rule's
// conjunction action. Part of the AssemblyScript flow compiler (flows.ts is the entry).

import { outLen, outPtr, truncateOut } from "./output";
import { putc, putDec, puts } from "./text";

// Ids of one compile, from 1 in the order of the acls and their rules (0 is no conjunction).
let next: u32 = 1;

export function conjunctionsInit(): void {
  next = 1;
}

export function nextConjunction(): u32 {
  return next++;
}

/** `,actions=conjunction(id,k/n)`. */
export function putConjunction(id: u32, k: u32, n: u32): void {
  puts(",actions=conjunction(");
  putDec(id);
  putc(44);
  putDec(k);
  putc(47);
  putDec(n);
  putc(41);
}

const ACTIONS = ",actions=";
const CONJUNCTION = "conjunction(";

/** Whether the bytes at `p` are the ASCII string `s`. */
function bytesAre(p: usize, s: string): bool {
  for (let i = 0; i < s.length; i++) {
    if (<u32> load<u8>(p + <usize> i) != <u32> s.charCodeAt(i)) return false;
  }
  return true;
}

/** Offset of the actions in the line at `p` (after `,actions=`), or `len` when it has none. */
function actionsAt(p: usize, len: usize): usize {
  for (let i: usize = 0; i + 9 <= len; i++) {
    if (load<u8>(p + i) == 44 && load<u8>(p + i + 1) == 97 && bytesAre(p + i, ACTIONS)) {
      return i + 9;
    }
  }
  return len;
}

/**
 * Merges, in the joined output, the adjacent lines (sorted: equal matches are adjacent) whose
 * cookie, table, priority and match are equal and whose action is a conjunction into one line
 * with all their actions. A line of the same match with other actions (a rule allowing the whole
 * port's protocol, without peers or ports) allows all that the conjunctions could: those lines are
 * dropped, as Open vSwitch would keep only one flow of that match.
 */
export function mergeConjunctions(): void {
  if (next == 1) return;
  const out = outPtr();
  const end = out + <usize> outLen();
  let r = out;
  let w = out;
  // The merged line being written: its start in the output and the length of its head.
  let group: usize = 0;
  let head: usize = 0;
  while (r < end) {
    let e = r;
    while (e < end && load<u8>(e) != 10) e++;
    const len = e - r;
    const at = actionsAt(r, len);
    const conj = bytesAre(r + at, CONJUNCTION);
    const same = head != 0 && at == head && memory.compare(group, r, at) == 0;
    if (same && conj) {
      store<u8>(w, 44);
      memory.copy(w + 1, r + at, len - at);
      w += 1 + len - at;
    } else {
      if (same) w = group;
      else if (w != out) {
        store<u8>(w, 10);
        w++;
      }
      memory.copy(w, r, len);
      group = w;
      head = conj ? at : 0;
      w += len;
    }
    r = e + 1;
  }
  truncateOut(<u32> (w - out));
}
