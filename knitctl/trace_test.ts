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
  const ips = MALFORMED_IPS.filter((v) => v !== "" && !v.startsWith("-"));
  const macs = MALFORMED_MACS.filter((v) => v !== "");
  const cases = [
    ...ips.map((v) => ["--src", "t/n/p", "--dst", v]),
    // A packet is of one family: an IPv6 source to an IPv4 destination, or the other way round.
    ["--src", "t/n/p", "--dst", "10.0.0.1", "--src-ip", "fd00::1"],
    ["--src", "t/n/p", "--dst", "fd00::1", "--src-ip", "10.0.0.2"],
    ["--offline", "--node", "n1", "--network", "blue", "--dst", "10.0.0.1", "--ip", "fd00::1"],
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
