/** What a network's advertisement says, and the address a pod makes from it by SLAAC. */
import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import { advertOf, slaacIps } from "./slaac.ts";
import { ipBytes, macBytes } from "./frames.ts";

const port = {
  address: "fd00:8::5/64",
  mac: "02:00:0a:08:00:02",
  mtu: 1450,
  networkRouterAdvertisements: { slaac: true, managed: false, otherConfig: true },
} as Pick<Port, "address" | "address6" | "mac" | "mtu" | "networkRouterAdvertisements">;

Deno.test("slaac: the pod's address is the /64 prefix and the modified EUI-64 of its MAC", () => {
  // 02:00:0a:08:00:02 → 0000:0aff:fe08:0002 (the universal/local bit flipped back).
  assert.deepEqual(slaacIps(port), ["fd00:8::aff:fe08:2"]);
  assert.deepEqual(slaacIps({ ...port, address: "10.8.0.5/24", address6: "fd00:9::5/64" }), [
    "fd00:9::aff:fe08:2",
  ]);
  const off = {
    ...port,
    networkRouterAdvertisements: { ...port.networkRouterAdvertisements!, slaac: false },
  };
  assert.deepEqual(slaacIps(off), [], "no SLAAC: no address of its own making");
  assert.deepEqual(slaacIps({ ...port, networkRouterAdvertisements: undefined }), []);
  assert.deepEqual(slaacIps({ ...port, address: "fd00:8::5/80" }), [], "SLAAC needs a /64");
});

Deno.test("slaac: the advertisement carries the prefix, the flags and the MTU", () => {
  assert.deepEqual(advertOf(port, "0a:58:12:34:56:00"), {
    gatewayMac: macBytes("0a:58:12:34:56:00"),
    prefix: ipBytes("fd00:8::"),
    prefixLength: 64,
    autonomous: true,
    managed: false,
    other: true,
    mtu: 1450,
  });
  assert.equal(
    advertOf({ ...port, networkRouterAdvertisements: undefined }, "0a:58:12:34:56:00"),
    undefined,
  );
});
