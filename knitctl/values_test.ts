import assert from "node:assert/strict";
import * as V from "./values.ts";

Deno.test("values: ranges, routes, numbers and labels parse, and bad ones say what a good one is", () => {
  assert.deepEqual(V.addressRange("pool", "10.1.0.10-10.1.0.20"), {
    start: "10.1.0.10",
    end: "10.1.0.20",
  });
  assert.throws(() => V.addressRange("pool", "10.1.0.10"), /--pool "10.1.0.10" is not a range/);
  assert.deepEqual(V.vlanRange("vlan-range", "100-199"), { start: 100, end: 199 });
  assert.deepEqual(V.vlanRange("vlan-range", "7"), { start: 7, end: 7 });
  assert.throws(() => V.vlanRange("vlan-range", "0-10"), /IDs 1-4094/);
  assert.deepEqual(V.route("route", "10.9.0.0/16,10.1.0.254"), {
    dst: "10.9.0.0/16",
    via: "10.1.0.254",
  });
  assert.deepEqual(V.route("route", "10.9.0.0/16"), { dst: "10.9.0.0/16" });
  assert.throws(() => V.route("route", "a,b,c"), /DST\[,VIA\]/);
  assert.throws(() => V.gatewayRoute("route-gw", "10.9.0.0/16"), /needs CIDR,GW/);
  assert.equal(V.integer("mtu", "1400", 576, 9216), 1400);
  assert.throws(() => V.integer("mtu", "14x", 576, 9216), /whole number from 576 to 9216/);
  assert.throws(() => V.integer("mtu", "100", 576, 9216), /--mtu "100"/);
  assert.deepEqual(V.labels("label", ["zone=a", "rack=r1=x"]), { zone: "a", rack: "r1=x" });
  assert.throws(() => V.labels("label", ["zone"]), /KEY=VALUE/);
  assert.deepEqual(V.list(["a,b", " c ", ""]), ["a", "b", "c"]);
});
