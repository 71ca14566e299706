// Conjunctive matches of the security group rules (see ../../agent/PIPELINE.md, "Security
// groups"): their ids, the `conjunction(id,k/n)` action, and the merge of the lines that share a
// match. Open vSwitch keeps one flow per match and priority, so the values a rule shares with
// others (a peer, a block of ports, the port itself) become one flow carrying every rule's
// conjunction action. Part of the AssemblyScript flow compiler (flows.ts is the entry).

import { outLen, outPtr, truncateOut } from "./output";
import { putc, putDec, puts } from "./text";

// A conjunction's id is the hash of what makes it (31 bits, not 0), the next free one when another
// has it: a rule keeps its id from one compile to the next, so that a change rewrites the flows of
// the rules it changed only. `ids` is an open-addressing set of the ids taken (0: free).
let ids: usize = 0;
let idCap: u32 = 0;

// The conjunctions of one compile by what makes them equal (a rule's words and peers' text, its
// family, and for ingress its zone): ports with the same rule share one. An open-addressing table
// of (hash, index) slots over records of REC bytes: rule words, their bytes, text, its length,
// family and zone, id.
const REC: usize = 32;
let slots: usize = 0;
let slotCap: u32 = 0;
let recs: usize = 0;
let recCap: usize = 0;
let count: u32 = 0;

/** `ptr`, or a new or larger allocation when its `have` bytes are fewer than `want`. */
export function grow(ptr: usize, have: usize, want: usize): usize {
  return have >= want ? ptr : ptr == 0 ? heap.alloc(want) : heap.realloc(ptr, want);
}

/** Starts a compile whose acls have `rules` rules in all. */
export function conjunctionsInit(rules: u32): void {
  count = 0;
  let cap: u32 = 16;
  while (cap < rules * 4) cap <<= 1;
  const bytes = <usize> cap << 3;
  slots = grow(slots, <usize> slotCap << 3, bytes);
  if (slotCap < cap) slotCap = cap;
  memory.fill(slots, 0, <usize> slotCap << 3);
  ids = grow(ids, <usize> idCap << 2, <usize> cap << 2);
  if (idCap < cap) idCap = cap;
  memory.fill(ids, 0, <usize> idCap << 2);
  const need = <usize> rules * 2 * REC;
  recs = grow(recs, recCap, need);
  if (recCap < need) recCap = need;
}

function fnv(h: u32, p: usize, n: usize): u32 {
  for (let i: usize = 0; i < n; i++) h = (h ^ <u32> load<u8>(p + i)) * 16777619;
  return h;
}

/** Takes the id `h` stands for (31 bits, not 0), or the next one not taken. */
function freeId(h: u32): u32 {
  let id = h & 0x7fffffff;
  const mask = idCap - 1;
  while (true) {
    if (id == 0) id = 1;
    let i = (id * 2654435761) & mask;
    let taken = false;
    while (true) {
      const at = ids + (<usize> i << 2);
      const v = load<u32>(at);
      if (v == 0) break;
      if (v == id) {
        taken = true;
        break;
      }
      i = (i + 1) & mask;
    }
    if (!taken) {
      store<u32>(ids + (<usize> i << 2), id);
      return id;
    }
    id = (id + 1) & 0x7fffffff;
  }
}

/**
 * The id of the conjunction of a rule (its `bytes` of words at `rule`, `len` bytes of peers' text
 * at `text`) in family `v6` and zone `zone`: the id of an equal one, or a new id with the high bit
 * set (the caller writes its shared flows then).
 */
export function conjunctionOf(
  rule: usize,
  bytes: usize,
  text: usize,
  len: usize,
  v6: bool,
  zone: u32,
): u32 {
  let h = fnv(fnv(2166136261, rule, bytes), text, len);
  h = (h ^ (v6 ? 1 : 0)) * 16777619;
  h = (h ^ zone) * 16777619;
  if (h == 0) h = 1;
  const mask = slotCap - 1;
  let i = h & mask;
  while (true) {
    const slot = slots + (<usize> i << 3);
    const sh = load<u32>(slot);
    if (sh == 0) break;
    if (sh == h) {
      const r = recs + <usize> load<u32>(slot, 4) * REC;
      if (
        <usize> load<u32>(r, 4) == bytes && <usize> load<u32>(r, 12) == len &&
        load<u32>(r, 16) == (v6 ? 1 : 0) && load<u32>(r, 20) == zone &&
        memory.compare(<usize> load<u32>(r), rule, bytes) == 0 &&
        memory.compare(<usize> load<u32>(r, 8), text, len) == 0
      ) return load<u32>(r, 24);
    }
    i = (i + 1) & mask;
  }
  const slot = slots + (<usize> i << 3);
  store<u32>(slot, h);
  store<u32>(slot, count, 4);
  const r = recs + <usize> count * REC;
  store<u32>(r, <u32> rule);
  store<u32>(r, <u32> bytes, 4);
  store<u32>(r, <u32> text, 8);
  store<u32>(r, <u32> len, 12);
  store<u32>(r, v6 ? 1 : 0, 16);
  store<u32>(r, zone, 20);
  const id = freeId(h);
  store<u32>(r, id, 24);
  count++;
  return id | 0x80000000;
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
  if (count == 0) return;
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
