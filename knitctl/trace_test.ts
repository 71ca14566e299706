/** knitctl trace's flags, checked before anything is asked of the manager or an agent. */
import assert from "node:assert/strict";
import { MALFORMED_IPS, MALFORMED_MACS } from "../common/address_cases.ts";
import { parseCommandLine } from "./args.ts";
import type { AttachContext } from "./attach.ts";
import { UsageError } from "./errors.ts";
import { trace } from "./trace.ts";

function context(argv: string[]): AttachContext {
  return { line: parseCommandLine(["trace", ...argv]) } as AttachContext;
}

Deno.test("knitctl trace refuses every malformed address and MAC of the shared table", async () => {
  const ips = [...MALFORMED_IPS, "fd00::1"].filter((v) => v !== "" && !v.startsWith("-"));
  const macs = MALFORMED_MACS.filter((v) => v !== "");
  const cases = [
    ...ips.map((v) => ["--src", "t/n/p", "--dst", v]),
    ...ips.map((v) => ["--src", "t/n/p", "--dst", "10.0.0.1", "--src-ip", v]),
    ...macs.map((v) => ["--src", "t/n/p", "--dst", "10.0.0.1", "--src-mac", v]),
    ...macs.map((v) => ["--src", "t/n/p", "--dst", "10.0.0.1", "--mac", v]),
    ...ips.map((
      v,
    ) => ["--offline", "--node", "n1", "--network", "blue", "--dst", "10.0.0.1", "--ip", v]),
  ];
  for (const argv of cases) {
    await assert.rejects(trace(context(argv)), UsageError, argv.join(" "));
  }
});
