import assert from "node:assert/strict";
import { canonicalKeys, keyLookup } from "./flow_keys.ts";

Deno.test("keys: addresses in canonical form, what the compiler rejects as null", () => {
  assert.deepEqual(
    canonicalKeys("address", [
      "10.0.0.2",
      "FD00:0::3",
      "::ffff:1.2.3.4",
      "10.0.0.256",
      "",
      "10.0.0.1\u00e9",
      "1:2:3:4:5:6:1.2.3.4",
      "224.0.0.1",
    ]),
    ["10.0.0.2", "fd00::3", null, null, null, null, "1:2:3:4:5:6:102:304", null],
  );
});

Deno.test("keys: MACs in lowercase; multicast, zero and malformed ones are null", () => {
  assert.deepEqual(
    canonicalKeys("mac", ["0A:58:0A:01:00:01", "01:00:5e:00:00:01", "00:00:00:00:00:00", "02:00"]),
    ["0a:58:0a:01:00:01", null, null, null],
  );
});

Deno.test("keys: tunnel endpoints are unicast IPv4 only; a lookup answers null for what it was not given", () => {
  assert.deepEqual(canonicalKeys("nodeIp", ["192.168.0.12", "fd00::1", "127.0.0.1"]), [
    "1",
    null,
    null,
  ]);
  const lookup = keyLookup("address", ["10.0.0.02", "10.0.0.2", 7]);
  assert.equal(lookup("10.0.0.2"), "10.0.0.2");
  assert.equal(lookup("10.0.0.02"), null);
  assert.equal(lookup(7), null);
  assert.equal(lookup("10.0.0.3"), null);
  assert.deepEqual(canonicalKeys("mac", []), []);
});
