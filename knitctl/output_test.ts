import assert from "node:assert/strict";
import { objectTable, table } from "./output.ts";
import { ago, RESOURCES } from "./resources.ts";

Deno.test("table: columns as wide as their widest cell, no trailing spaces", () => {
  assert.equal(
    table(["NAME", "IP"], [["a", "10.0.0.1"], ["longer", ""]]),
    "NAME    IP\na       10.0.0.1\nlonger\n",
  );
});

Deno.test("objectTable: wide columns only with -o wide", () => {
  const nodes = RESOURCES.find((r) => r.plural === "nodes")!;
  const node = { name: "w1", underlayIp: "192.0.2.1", labels: { zone: "a" }, registeredAt: "" };
  assert.equal(
    objectTable(nodes.columns, [node], false),
    "NAME  UNDERLAY-IP  AGE\nw1    192.0.2.1\n",
  );
  assert.match(objectTable(nodes.columns, [node], true), /LABELS.*\nw1\s+192\.0\.2\.1\s+zone=a/);
});

Deno.test("ago: seconds, minutes, hours, days as kubectl shows ages", () => {
  const now = Date.parse("2025-01-10T00:00:00Z");
  assert.equal(ago("2025-01-09T23:59:30Z", now), "30s");
  assert.equal(ago("2025-01-09T23:30:00Z", now), "30m");
  assert.equal(ago("2025-01-09T12:00:00Z", now), "12h");
  assert.equal(ago("2025-01-01T00:00:00Z", now), "9d");
  assert.equal(ago(undefined, now), "");
});
