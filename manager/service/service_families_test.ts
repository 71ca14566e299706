/**
 * A service's families (service_families.ts): a record stored before services had several is
 * answered with its one VIP's family; the families a request asks for, Kubernetes' way.
 */
import assert from "node:assert/strict";
import { chosenFamilies, recordFamilies, vipsOf } from "./service_families.ts";

const dual = { name: "dual", family: 4 as const, cidr: "10.5.0.0/24", cidr6: "fd00:5::/64" };
const six = { name: "six", family: 6 as const, cidr: "fd00:6::/120" };

Deno.test("service families: a record stored before families is answered with its one VIP's", () => {
  assert.deepEqual(recordFamilies({ vip: "10.1.0.9" }), {
    vips: ["10.1.0.9"],
    ipFamilies: ["IPv4"],
    ipFamilyPolicy: "SingleStack",
  });
});

Deno.test("service families: chosen as Kubernetes chooses them, the VIPs paired by host part", () => {
  const cases: [Parameters<typeof chosenFamilies>[1], string[], string][] = [
    [{}, ["IPv4"], "SingleStack"],
    [{ ipFamilies: ["IPv6"] }, ["IPv6"], "SingleStack"],
    [{ ipFamilies: ["IPv6", "IPv4"] }, ["IPv6", "IPv4"], "RequireDualStack"],
    [{ ipFamilyPolicy: "PreferDualStack" }, ["IPv4", "IPv6"], "PreferDualStack"],
    [
      { ipFamilyPolicy: "RequireDualStack", ipFamilies: ["IPv6"] },
      ["IPv6", "IPv4"],
      "RequireDualStack",
    ],
  ];
  for (const [ask, ipFamilies, ipFamilyPolicy] of cases) {
    assert.deepEqual(
      chosenFamilies(dual, ask),
      { ipFamilies, ipFamilyPolicy },
      JSON.stringify(ask),
    );
  }
  assert.deepEqual(chosenFamilies(six, { ipFamilyPolicy: "PreferDualStack" }).ipFamilies, ["IPv6"]);
  assert.deepEqual(vipsOf(dual, ["IPv6", "IPv4"], "10.5.0.119"), ["fd00:5::77", "10.5.0.119"]);
  assert.deepEqual(vipsOf(six, ["IPv6"], "fd00:6::9"), ["fd00:6::9"]);
});
