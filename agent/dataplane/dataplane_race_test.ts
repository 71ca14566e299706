/**
 * A heal (the whole flow set replayed after Open vSwitch lost it) racing a CNI DEL, in both orders,
 * made deterministic by a switch whose bundles wait until the test lets them through: whatever
 * runs first, the deleted port's flows end up gone and the heal's replay happens.
 */
import assert from "node:assert/strict";
import type { Logger } from "@knitter/common";
import type { FlowInput } from "@knitter/wasm";
import { Dataplane } from "./dataplane.ts";
import type { Ovs } from "./ovs.ts";

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A switch that keeps its table as a set of lines; a bundle may be held at a gate. */
class GatedSwitch {
  table = new Set<string>();
  replaced = 0;
  private gate: { entered: () => void; release: Promise<void> } | null = null;

  /** Holds the next bundle: `entered` resolves when it arrives, `release()` lets it through. */
  hold(): { entered: Promise<void>; release: () => void } {
    let entered!: () => void;
    let release!: () => void;
    const enteredP = new Promise<void>((r) => (entered = r));
    const releaseP = new Promise<void>((r) => (release = r));
    this.gate = { entered, release: releaseP };
    return { entered: enteredP, release };
  }

  /** No service, no select group. */
  dumpGroups(): Promise<Map<number, string>> {
    return Promise.resolve(new Map());
  }

  async bundle(
    _bridge: string,
    add: string[],
    del: string[],
    opts: { replaceAll?: boolean } = {},
  ): Promise<void> {
    const gate = this.gate;
    this.gate = null;
    if (gate) {
      gate.entered();
      await gate.release;
    }
    if (opts.replaceAll) {
      this.table = new Set(add);
      this.replaced++;
      return;
    }
    for (const l of del) this.table.delete(l);
    for (const l of add) this.table.add(l);
  }
}

/** Two pods of one network on this node; `cookie` 2 is the one deleted. */
function model(): FlowInput {
  return {
    tunnelPort: 100,
    networks: [{ id: 1, type: "vxlan", segmentId: 5001 }],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 1 },
      { ofport: 2, network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], cookie: 2 },
    ],
    remotePorts: [],
  };
}

const DELETED = /^cookie=0x0000000100000002,/;

async function setup() {
  const sw = new GatedSwitch();
  let input = model();
  const config = {
    nodeName: "n1",
    bridge: "br-int",
    datapathType: "netdev" as const,
    tunnel: { port: "vxlan0", ofport: 100 },
    bridgeMappings: [],
  };
  const dp = new Dataplane(sw as unknown as Ovs, config, null as never, null as never, quiet);
  // The model is the test's: the agent's state and the manager's view are not involved.
  Object.defineProperty(dp, "model", { value: () => Promise.resolve(structuredClone(input)) });
  await dp.sync();
  assert.ok([...sw.table].some((l) => DELETED.test(l)), "both pods have flows at first");
  /** What a DEL does to the dataplane: the attachment goes, then a sync. */
  const del = () => {
    input = { ...input, localPorts: input.localPorts.filter((p) => p.cookie !== 2) };
    return dp.sync();
  };
  /** What a heal does: Open vSwitch lost its flows; the whole set is replayed. */
  const heal = () => {
    sw.table.clear();
    return dp.resync();
  };
  return { sw, dp, del, heal };
}

function leftOf(sw: GatedSwitch): string[] {
  return [...sw.table].filter((l) => DELETED.test(l));
}

Deno.test("race: a DEL during a heal's replay: the deleted port's flows go once the replay is in", async () => {
  const { sw, del, heal } = await setup();
  const replay = sw.hold();
  const healed = heal();
  await replay.entered; // the replay computed its set (with the pod) and is at the switch
  const deleted = del();
  replay.release();
  await Promise.all([healed, deleted]);
  assert.deepEqual(leftOf(sw), [], "no flow of the deleted port");
  assert.equal(sw.replaced, 2, "the heal replayed the table (after the first sync's)");
  assert.ok(sw.table.size > 0, "the other pod's flows are in");
});

Deno.test("race: a heal while a DEL's bundle is at the switch: the replay still happens, without the port", async () => {
  const { sw, del, heal } = await setup();
  const delBundle = sw.hold();
  const deleted = del();
  await delBundle.entered; // the DEL's difference is at the switch
  const healed = heal(); // meanwhile Open vSwitch lost every flow
  delBundle.release();
  await Promise.all([healed, deleted]);
  assert.equal(sw.replaced, 2, "the heal replayed the table after the DEL's bundle");
  assert.deepEqual(leftOf(sw), [], "no flow of the deleted port");
  assert.ok(sw.table.size > 0, "the other pod's flows are in");
});

Deno.test("race: a heal and a DEL asked together: one replay without the port", async () => {
  const { sw, del, heal } = await setup();
  await Promise.all([heal(), del()]);
  assert.deepEqual(leftOf(sw), []);
  assert.equal(sw.replaced, 2);
  assert.ok(sw.table.size > 0);
});
