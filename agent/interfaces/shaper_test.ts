/**
 * The token buckets of shaper.ts on a real veth (root): what tc holds after shapeVeth, as
 * readVethLimits reads it back for CNI CHECK, after the pod drops its own, and after unshapeVeth.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { readVethLimits, shapeVeth, unshapeVeth, type VethEnds } from "./shaper.ts";

async function veth(cleanup: Cleanup): Promise<VethEnds> {
  const pod = cleanup.name("pod");
  const hostIfName = cleanup.name("h").slice(0, 15);
  cleanup.netns(pod);
  await run(["ip", "netns", "add", pod]);
  cleanup.defer(async () => void await run(["ip", "link", "del", hostIfName], { check: false }));
  await run([
    "ip",
    "link",
    "add",
    hostIfName,
    "type",
    "veth",
    "peer",
    "name",
    "eth0",
    "netns",
    pod,
  ]);
  return { netns: `/var/run/netns/${pod}`, ifName: "eth0", hostIfName };
}

const limit = (rate: number) => ({ rate, burst: 400_000, from: "the test" });

Deno.test("shaper: the rates set on each end read back; one the pod drops reads as gone; unshape clears both", async () => {
  await using cleanup = new Cleanup();
  const ends = await veth(cleanup);
  assert.deepEqual(await readVethLimits(ends), {});

  await shapeVeth(ends, { ingress: limit(20_000_000), egress: limit(10_000_000) });
  assert.deepEqual(await readVethLimits(ends), { ingress: 20_000_000, egress: 10_000_000 });

  await run(["tc", "qdisc", "del", "dev", "eth0", "root"], { netns: ends.netns });
  assert.deepEqual(await readVethLimits(ends), { ingress: 20_000_000 });

  await unshapeVeth(ends);
  assert.deepEqual(await readVethLimits(ends), {});
  // Idempotent, and a gone veth limits nothing.
  await unshapeVeth(ends);
  await run(["ip", "link", "del", ends.hostIfName]);
  assert.deepEqual(await readVethLimits(ends), {});
});
