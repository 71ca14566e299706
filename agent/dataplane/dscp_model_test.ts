import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import { networkDscp, remarked } from "./dscp_model.ts";

const wired = { tenant: "acme", id: "p1", networkId: "n1", networkDscp: 46 };

Deno.test("dscp model: the feed's word on a port wins over what the port said when it was wired", () => {
  const feed = (port?: Partial<Port>) => ({ port: () => port as Port | undefined });
  assert.equal(networkDscp(wired, feed()), 46, "not in the feed (yet): as wired");
  assert.equal(
    networkDscp(wired, feed({ ...wired, networkDscp: 10 })),
    10,
    "changed through the API",
  );
  assert.equal(
    networkDscp(wired, feed({ tenant: "acme", id: "p1", networkId: "n1" })),
    undefined,
    "cleared",
  );
  assert.equal(
    networkDscp({ tenant: "acme", id: "p2", networkId: "n2" }, feed()),
    undefined,
    "never marked",
  );
});

Deno.test("dscp model: a feed event that changes a port's marking asks for a compile", () => {
  assert.ok(remarked(undefined, wired));
  assert.ok(remarked(wired, { ...wired, networkDscp: 0 }));
  assert.ok(remarked(wired, { tenant: "acme", id: "p1", networkId: "n1" }));
  assert.ok(!remarked(wired, { ...wired }));
  assert.ok(
    !remarked({ tenant: "acme", id: "p1", networkId: "n1" }, {
      tenant: "acme",
      id: "p1",
      networkId: "n1",
    }),
  );
});
