/**
 * The start-up benchmark's fill (port_fill.ts) leaves the store the allocation path leaves: the
 * same keys and values, less the times and the network's random ID, and a store the consistency
 * check finds whole. So a start measured on it is a start on real allocations.
 */
import assert from "node:assert/strict";
import { checkStore } from "../check.ts";
import { macBlock } from "../ipam/derived_mac.ts";
import { keys, type NetworkRecord } from "../model.ts";
import { putPort } from "../service/ports/mod.ts";
import type { Ctx } from "../service/context.ts";
import { fillPorts } from "./port_fill.ts";
import { benchContext, publicNetwork } from "./support.ts";

const PORTS = 700;
const NODES = 7;

/** Every key and value of the store, with what differs between two equal stores made apart. */
async function normalized(ctx: Ctx): Promise<string[]> {
  const nets: NetworkRecord[] = [];
  for await (const e of ctx.store.list<NetworkRecord>(keys.networks())) nets.push(e.value!);
  const out: string[] = [];
  for await (const e of ctx.store.list([])) {
    const key = e.key[0] === "history" ? [...e.key.slice(0, -2), "FROM", "STINT"] : e.key;
    let text = JSON.stringify([key, e.value]);
    for (const net of nets) {
      text = text.replaceAll(net.id, `NET-${net.name}`)
        .replaceAll(macBlock(net.id), `BLOCK-${net.name}`);
    }
    out.push(
      text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, "TIME")
        .replace(/"stintFrom":\d+/g, '"stintFrom":"FROM"'),
    );
  }
  // Keys sort by the networks' random IDs: in the order of what they become.
  return out.sort();
}

/** Fills both ways, compares, checks. */
async function fillBothWays(world: (ctx: Ctx) => Promise<void>, tenant: string, network: string) {
  const filled = await benchContext(":memory:", { historyRetentionDays: 30 });
  const allocated = await benchContext(":memory:", { historyRetentionDays: 30 });
  try {
    await world(filled);
    await world(allocated);
    await fillPorts(filled, { tenant, network, count: PORTS, nodes: NODES });
    for (let j = 0; j < PORTS; j++) {
      await putPort(allocated, {
        principal: { scope: "admin" },
        tenant,
        network,
        id: `fill-${j}`,
        body: { node: `n${j % NODES}` },
      });
    }
    const want = await normalized(allocated);
    assert.equal(want.filter((k) => k.startsWith(`[["port","NET-${network}"`)).length, PORTS);
    assert.deepEqual(await normalized(filled), want);
    const check = await checkStore(filled.store);
    assert.deepEqual(check.problems, []);
    assert.equal(check.ports, PORTS);
  } finally {
    filled.store.close();
    allocated.store.close();
  }
}

Deno.test("the start-up fill leaves the store that the allocation path leaves, history on", async () => {
  await fillBothWays(async () => {}, "bench", "big");
});

Deno.test("the start-up fill leaves the same store for a tenant's ports on another's public network", async () => {
  await fillBothWays(publicNetwork, "other", "shared");
});
