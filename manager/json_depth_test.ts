/** The depth of JSON text measured on its bytes, whatever the chunks it arrives in. */
import assert from "node:assert/strict";
import { JsonDepthGauge } from "./json_depth.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

/** Whether `text`, cut in two at `at`, stays within `max`. */
function within(text: string, max: number, at = text.length): boolean {
  const gauge = new JsonDepthGauge(max);
  return gauge.feed(bytes(text.slice(0, at))) && gauge.feed(bytes(text.slice(at)));
}

Deno.test("json depth: brackets count outside strings only, escapes followed across chunks", () => {
  // Depth 3, with brackets, an escaped quote and an escaped backslash inside strings.
  const text = '{"a":"x\\"[[[","b":[{"c":"\\\\"}],"d":"]]]{"}';
  for (let at = 0; at <= text.length; at++) {
    assert.ok(within(text, 3, at), `cut at ${at}`);
    assert.ok(!within(text, 2, at), `cut at ${at}`);
  }
  assert.ok(within(JSON.stringify({ s: "[".repeat(1000) }), 1));
  assert.ok(!within("[".repeat(33) + "]".repeat(33), 32));
  assert.ok(within("[".repeat(32) + "]".repeat(32), 32));
});
