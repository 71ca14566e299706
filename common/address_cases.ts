/**
 * Malformed addresses, CIDRs and MACs: the attack table every API that takes one is tested
 * against (common/address_test.ts, and the manager's, the annotations', the agent's request
 * tests), so that they all refuse the same inputs.
 * @module
 */

/** Not an IPv4 or IPv6 address. */
export const MALFORMED_IPS: readonly string[] = [
  ":::",
  "::::",
  ":",
  "1:::2",
  "::1::",
  "1::2::3",
  "1:2:3:4:5:6:7:8:9",
  "12345::1",
  "::g",
  "fe80::1%eth0",
  "[::1]",
  "1.2.3",
  "1.2.3.4.5",
  "256.1.1.1",
  "999.1.1.1",
  "010.1.1.1",
  "1..2.3",
  "0x0a.1.1.1",
  " 1.2.3.4",
  "",
];

/** Not a network in CIDR form. */
export const MALFORMED_CIDRS: readonly string[] = [
  ":::/64",
  "1:::2/64",
  "999.1.1.0/24",
  "10.1.0.0",
  "10.1.0.0/",
  "10.1.0.0/33",
  "fd00::/129",
  "10.1.0.0/-1",
  "10.1.0.0/abc",
  "10.1.0.0/2 4",
];

/** Not a MAC in any form. */
export const MALFORMED_MACS: readonly string[] = [
  "02:00:00:00:00:0g",
  "02:00:00:00:00",
  "02:00:00:00:00:00:00",
  "02:00-00:00:00:00",
  "0200.0000.0001",
  "2:0:0:0:0:1",
  "::::::",
  "",
];
