import assert from "node:assert/strict";
import type { MirrorInfo } from "@knitter/common";
import { mirrorFilters, mirrorRows } from "./mirrors.ts";
import { portKey } from "./port_key.ts";

const port = (network: string, id: string) => ({ network, networkId: network, id });

/** acme's web, db and tap on blue; acme's and globex's ports on the public network pub. */
const OFPORTS = new Map([
  [portKey({ tenant: "acme", networkId: "blue", id: "web" }), 1],
  [portKey({ tenant: "acme", networkId: "blue", id: "db" }), 2],
  [portKey({ tenant: "acme", networkId: "blue", id: "tap" }), 3],
  [portKey({ tenant: "acme", networkId: "pub", id: "web" }), 4],
  [portKey({ tenant: "globex", networkId: "pub", id: "web" }), 5],
  [portKey({ tenant: "globex", networkId: "pub", id: "tap" }), 6],
]);

const filtered = (
  tenant: string,
  sources: MirrorInfo["sources"],
  collector = port("blue", "tap"),
) => ({
  name: "m",
  tenant,
  sources,
  direction: "out" as const,
  filter: [
    { protocol: "tcp" as const, ports: "5001" },
    { protocol: "udp" as const, ports: "5000-5003", remote: "10.9.0.0/16" },
  ],
  collector,
  createdAt: "2026-11-28T00:00:00Z",
});

Deno.test("mirrorFilters: a filtered mirror's rules per local source, to the collector's ofport; no Mirror row", () => {
  const m = filtered("acme", [port("blue", "web"), port("blue", "far"), port("blue", "db")]);
  assert.deepEqual(mirrorFilters([m], OFPORTS), [
    { source: 1, output: 3, protocol: "tcp", portMin: 5001, portMax: 5001 },
    { source: 1, output: 3, protocol: "udp", portMin: 5000, portMax: 5003, remote: "10.9.0.0/16" },
    { source: 2, output: 3, protocol: "tcp", portMin: 5001, portMax: 5001 },
    { source: 2, output: 3, protocol: "udp", portMin: 5000, portMax: 5003, remote: "10.9.0.0/16" },
  ]);
  // The copies are flows: the mirror has no OVS Mirror row (which would copy everything).
  const names = new Map([...OFPORTS.keys()].map((k) => [k, `veth-${k}`]));
  assert.deepEqual(mirrorRows([m], names), []);
  // Without a filter, it is a row and no flow.
  const plain = { ...m, filter: undefined };
  assert.deepEqual(mirrorFilters([plain], OFPORTS), []);
  assert.equal(mirrorRows([plain], names).length, 1);
});

Deno.test("attack: a filtered mirror on a shared network copies only its own tenant's port, to its own collector", () => {
  // acme and globex each have a port "web" on pub: acme's filter names globex's port ID.
  const acme = filtered("acme", [port("pub", "web")]);
  const rules = mirrorFilters([acme], OFPORTS);
  assert.deepEqual(new Set(rules.map((r) => r.source)), new Set([4]), "acme's web only");
  assert.ok(rules.every((r) => r.output === 3));
  // A mirror whose collector is not here (or another tenant's port of that ID) copies nothing.
  const away = filtered("acme", [port("pub", "web")], port("pub", "tap"));
  assert.deepEqual(mirrorFilters([away], OFPORTS), []);
});

Deno.test("mirrorFilters: two mirrors' equal rules on one source are one flow (the first mirror's), never two of one match", () => {
  const a = filtered("acme", [port("blue", "web")]);
  const b = { ...filtered("acme", [port("blue", "web")], port("blue", "db")), name: "n" };
  const rules = mirrorFilters([a, b], OFPORTS);
  assert.deepEqual(rules.map((r) => [r.source, r.output]), [[1, 3], [1, 3]]);
});
