/**
 * The nesting depth of a JSON text, measured on its bytes as they arrive: a body nested deeper than
 * any API body needs is refused at the byte that goes too deep, before it is decoded or parsed. A
 * parser given a 1 MiB body of half a million `[` spends its time (and stack) on nothing useful.
 *
 * Only brackets outside strings count; a string's escapes (`\"`) are followed across chunks. The
 * text's validity is JSON.parse's to judge afterwards.
 */

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

export class JsonDepthGauge {
  private depth = 0;
  private inString = false;
  private escaped = false;

  constructor(readonly maxDepth: number) {}

  /** Reads one more chunk; false as soon as the text nests deeper than `maxDepth`. */
  feed(bytes: Uint8Array): boolean {
    let { depth, inString, escaped } = this;
    const max = this.maxDepth;
    const n = bytes.length;
    let i = 0;
    // A string's escape may have been the last byte of the chunk before.
    if (escaped && n > 0) {
      escaped = false;
      i = 1;
    }
    while (i < n) {
      if (inString) {
        // One tight loop to the string's end: a cost per byte whatever the string holds.
        for (; i < n; i++) {
          const c = bytes[i];
          if (c === BACKSLASH) i++;
          else if (c === QUOTE) break;
        }
        if (i >= n) {
          escaped = i > n;
          break;
        }
        inString = false;
        i++;
        continue;
      }
      const c = bytes[i++];
      if (c === QUOTE) inString = true;
      else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        if (++depth > max) return false;
      } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth--;
    }
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
    return true;
  }
}
