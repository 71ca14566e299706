import assert from "node:assert/strict";
import { type Cidr, formatCidr, parseCidr, parseIp } from "@knitter/common/address";
import { coverAddresses, subtractCidrs } from "./cidr_set.ts";

const cidr = (t: string) => parseCidr(t) as Cidr;
const texts = (cs: Cidr[]) => cs.map(formatCidr);

Deno.test("subtractCidrs: an except inside the CIDR leaves the fewest blocks around it", () => {
  assert.deepEqual(texts(subtractCidrs(cidr("10.0.0.0/24"), [cidr("10.0.0.0/25")])), [
    "10.0.0.128/25",
  ]);
  assert.deepEqual(texts(subtractCidrs(cidr("10.0.0.0/24"), [cidr("10.0.0.5/32")])), [
    "10.0.0.0/30",
    "10.0.0.4/32",
    "10.0.0.6/31",
    "10.0.0.8/29",
    "10.0.0.16/28",
    "10.0.0.32/27",
    "10.0.0.64/26",
    "10.0.0.128/25",
  ]);
  assert.deepEqual(
    texts(subtractCidrs(cidr("10.0.0.0/24"), [cidr("10.0.0.0/26"), cidr("10.0.0.192/26")])),
    ["10.0.0.64/26", "10.0.0.128/26"],
  );
  assert.deepEqual(texts(subtractCidrs(cidr("10.0.0.0/24"), [cidr("10.0.0.0/16")])), []);
  assert.deepEqual(texts(subtractCidrs(cidr("0.0.0.0/0"), [])), ["0.0.0.0/0"]);
  assert.deepEqual(texts(subtractCidrs(cidr("fd00::/64"), [cidr("fd00::/65")])), [
    "fd00::8000:0:0:0/65",
  ]);
});

Deno.test("coverAddresses: neighbours merge into aligned blocks, families apart", () => {
  const ips = ["10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.9", "10.0.0.4", "fd00::1"]
    .map((t) => parseIp(t)!);
  assert.deepEqual(texts(coverAddresses(ips)), [
    "10.0.0.4/30",
    "10.0.0.9/32",
    "fd00::1/128",
  ]);
  assert.deepEqual(texts(coverAddresses([])), []);
  assert.deepEqual(texts(coverAddresses(["10.0.0.3", "10.0.0.4"].map((t) => parseIp(t)!))), [
    "10.0.0.3/32",
    "10.0.0.4/32",
  ]);
});
