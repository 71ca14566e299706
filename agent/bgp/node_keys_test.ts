/** A Node's BGP keys: what each sets, and each bad value named with what to write. */
import assert from "node:assert/strict";
import { nodeBgp } from "./node_keys.ts";

const node = (labels: Record<string, string>, annotations: Record<string, string> = {}) =>
  nodeBgp({ labels, annotations });

Deno.test("node keys: labels and annotations set the node's ASN, peers, router ID, communities and next hops", () => {
  const r = node({ "bgp.knitter.io/asn": "65010", "other/key": "x" }, {
    "bgp.knitter.io/peers": '[{"address":"192.0.2.1","asn":65000,"holdTime":9}]',
    "bgp.knitter.io/router-id": "192.0.2.11",
    "bgp.knitter.io/communities": "65010:100, 65010:200",
    "bgp.knitter.io/next-hop": "192.0.2.11",
    "bgp.knitter.io/next-hop6": "fd99::11",
  });
  assert.deepEqual(r.errors, []);
  assert.deepEqual(r.values, {
    localAsn: 65010,
    peers: [{ address: "192.0.2.1", asn: 65000, holdTime: 9 }],
    routerId: "192.0.2.11",
    communities: ["65010:100", "65010:200"],
    nextHop: "192.0.2.11",
    nextHop6: "fd99::11",
  });
  assert.deepEqual(node({}, { "bgp.knitter.io/communities": "" }).values, { communities: [] });
  assert.deepEqual(node({}), { values: {}, errors: [] });
});

Deno.test("node keys: bad input: each bad key named, what is wrong, what to write; no value of a bad key", () => {
  const cases: [Record<string, string>, Record<string, string>, RegExp][] = [
    [
      { "bgp.knitter.io/asn": "4294967296" },
      {},
      /asn: "4294967296".*write e\.g\. bgp\.knitter\.io\/asn=65010/s,
    ],
    [{ "bgp.knitter.io/asn": "0" }, {}, /asn: "0"/],
    [{ "bgp.knitter.io/asn": "AS65010" }, {}, /asn: "AS65010"/],
    [{}, { "bgp.knitter.io/peers": "[{address:" }, /peers: the value is not JSON; write e\.g\./],
    [
      {},
      { "bgp.knitter.io/peers": '[{"address":"tor1","asn":65000}]' },
      /peers: the value at 0\.address: must be an IP address/,
    ],
    [{}, { "bgp.knitter.io/peers": "[]" }, /at least one peer/],
    [{}, { "bgp.knitter.io/peers": '{"address":"192.0.2.1"}' }, /peers: the value/],
    [
      { "bgp.knitter.io/router-id": "fd00--1" },
      {},
      /router-id: "fd00--1": must be an IPv4 address/,
    ],
    [{}, { "bgp.knitter.io/router-id": "fd00::1" }, /router-id.*IPv4/],
    [{}, { "bgp.knitter.io/communities": "65010:70000" }, /communities.*0-65535/],
    [{}, { "bgp.knitter.io/next-hop6": "192.0.2.1" }, /next-hop6.*IPv6/],
    [
      { "bgp.knitter.io/as": "65010" },
      {},
      /bgp\.knitter\.io\/as: is not a key the agent knows: use one of .*bgp\.knitter\.io\/asn/,
    ],
    [
      { "bgp.knitter.io/asn": "65010" },
      { "bgp.knitter.io/asn": "65011" },
      /label \("65010"\) and an annotation \("65011"\) that differ/,
    ],
  ];
  for (const [labels, annotations, message] of cases) {
    const r = node(labels, annotations);
    assert.equal(r.errors.length, 1, JSON.stringify([labels, annotations, r]));
    const e = r.errors[0];
    assert.match(`${e.key}: ${e.message}`, message);
    assert.ok((e.message.match(/write e\.g\./g) ?? []).length <= 1, e.message);
    assert.deepEqual(r.values, {}, "a bad key sets nothing");
  }
});

Deno.test("node keys: attack: a password in a Node's peers is refused, and never repeated in the message", () => {
  const r = node({}, {
    "bgp.knitter.io/peers": '[{"address":"192.0.2.1","asn":65000,"password":"hunter2"}]',
  });
  assert.equal(r.errors.length, 1);
  assert.match(r.errors[0].message, /password does not belong on a Node.*config file/);
  assert.doesNotMatch(r.errors[0].message, /hunter2/);
  const broken = node({}, { "bgp.knitter.io/peers": '[{"password":"hunter2",' });
  assert.doesNotMatch(broken.errors[0].message, /hunter2/);
});
