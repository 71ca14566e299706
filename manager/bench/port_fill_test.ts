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
import { benchContext } from "./support.ts";

const PORTS = 700;
const NODES = 7;

/** Every key and value of the store, with what differs between two equal stores made apart. */
async function normalized(ctx: Ctx): Promise<string[]> {
  const net = (await ctx.store.get<NetworkRecord>(keys.network("bench", "big"))).value!;
  const out: string[] = [];
  for await (const e of ctx.store.list([])) {
    const key = e.key[0] === "history" ? [...e.key.slice(0, -2), "FROM", "STINT"] : e.key;
    out.push(
      JSON.stringify([key, e.value])
        .replaceAll(net.id, "NET")
        .replaceAll(macBlock(net.id), "BLOCK")
        .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, "TIME"),
    );
  }
  return out;
}

Deno.test("the start-up fill leaves the store that the allocation path leaves, history on", async () => {
  const filled = await benchContext(":memory:", { historyRetentionDays: 30 });
  const allocated = await benchContext(":memory:", { historyRetentionDays: 30 });
  try {
    await fillPorts(filled, { tenant: "bench", network: "big", count: PORTS, nodes: NODES });
    for (let j = 0; j < PORTS; j++) {
      await putPort(allocated, {
        principal: { scope: "admin" },
        tenant: "bench",
        network: "big",
        id: `fill-${j}`,
        body: { node: `n${j % NODES}` },
      });
    }
    const want = await normalized(allocated);
    assert.ok(want.filter((k) => k.startsWith('[["port","NET"')).length === PORTS);
    assert.deepEqual(await normalized(filled), want);
    const check = await checkStore(filled.store);
    assert.deepEqual(check.problems, []);
    assert.equal(check.ports, PORTS);
  } finally {
    filled.store.close();
    allocated.store.close();
  }
});
