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
    for (let i = 0; i < bytes.length; i++) {
      const b = bytes[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (b === BACKSLASH) escaped = true;
        else if (b === QUOTE) inString = false;
      } else if (b === QUOTE) inString = true;
      else if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
        if (++depth > max) return false;
      } else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) depth--;
    }
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
    return true;
  }
}
