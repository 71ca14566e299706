import assert from "node:assert/strict";
import { parseCommandLine, requireFlagsOf } from "./args.ts";
import { UsageError } from "./errors.ts";

Deno.test("parseCommandLine: verb, resource, name and flags in any order, repeatable flags as lists", () => {
  const line = parseCommandLine([
    ...["-t", "acme", "create", "network", "blue", "--cidr", "10.1.0.0/24"],
    ...["--route", "10.9.0.0/16,10.1.0.254", "--route=10.8.0.0/16", "--public", "-o", "json"],
  ]);
  assert.equal(line.verb, "create");
  assert.deepEqual(line.args, ["network", "blue"]);
  assert.equal(line.flags.tenant, "acme");
  assert.equal(line.flags.output, "json");
  assert.equal(line.flags.public, true);
  assert.deepEqual(line.flags.route, ["10.9.0.0/16,10.1.0.254", "10.8.0.0/16"]);
  assert.deepEqual(line.given.sort(), ["cidr", "output", "public", "route", "tenant"]);
});

Deno.test("parseCommandLine: an unknown flag is a usage error pointing at --help", () => {
  assert.throws(() => parseCommandLine(["get", "nets", "--colour"]), (err: Error) => {
    assert.ok(err instanceof UsageError);
    assert.match(err.message, /--colour.*knitctl --help/);
    return true;
  });
});

Deno.test("requireFlagsOf: global flags always pass, a verb's foreign flag names what it takes", () => {
  const line = parseCommandLine(["get", "ports", "--network", "blue", "-o", "wide", "--cidr", "x"]);
  assert.throws(
    () => requireFlagsOf(line, ["network", "node", "pod"], "get ports"),
    /get ports does not take --cidr \(it takes --network, --node, --pod\)/,
  );
  requireFlagsOf(parseCommandLine(["get", "ports", "-o", "json"]), [], "get ports");
});
