/**
 * Anti-spoofing end to end: a pod may only send from the MAC and addresses it was given. Frames
 * from anything else are dropped at its port, which captures at the targets prove (a failed ping
 * alone could also be a lost reply).
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { startCapture } from "./support/capture.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  ipNetnsName,
  knitterList,
  makePod,
  pingFrom,
  pings,
  type Pod,
} from "./support/pods.ts";
import { startStack } from "../devstack/stack.ts";

Deno.test("e2e security: a pod spoofing another pod's IP or a foreign MAC is dropped, its genuine traffic passes", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  // The attacker, targets on its node and on the other, and a victim whose address it borrows.
  const ips: Record<string, string> = {};
  const macs: Record<string, string> = {};
  const pods: Record<string, Pod> = {};
  for (const [node, name] of [[n1, "evil"], [n1, "near"], [n2, "far"], [n2, "victim"]] as const) {
    pods[name] = await makePod(node, name, "acme", knitterList(["control"]));
    const r = await pods[name].add();
    assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)}`);
    ips[name] = addressOf(r.out);
    macs[name] = r.out.interfaces.find((i: { sandbox?: string }) => i.sandbox).mac;
  }
  const { evil, near, far, victim } = pods;
  const evilNs = ipNetnsName(evil.netns);
  // Static neighbours: the spoofed packets themselves are sent, not held back by a failed ARP.
  for (const to of ["near", "far"]) {
    await run(["ip", "-n", evilNs, "neigh", "replace", ips[to], "lladdr", macs[to], "dev", "eth0"]);
  }

  /** What matches `filter` on the attacker's eth0 (sent) and the target's (received). */
  async function capture(to: Pod, filter: string, send: () => Promise<unknown>) {
    const opts = { count: 1, timeoutMs: 3000 };
    const sent = await startCapture(cleanup, evilNs, "eth0", filter, opts);
    const received = await startCapture(cleanup, ipNetnsName(to.netns), "eth0", filter, opts);
    await send();
    // The ping waited for its replies: whatever it sent has arrived by now.
    return { sent: (await sent.done(300)).length, received: (await received.done(300)).length };
  }

  await t.step("genuine traffic passes", async () => {
    assert.ok(await pings(evil, ips.far), "across nodes");
    assert.ok(await pings(evil, ips.near), "on the same node");
    const seen = await capture(
      far,
      `icmp[icmptype] = icmp-echo and src host ${ips.evil}`,
      () => pingFrom(evilNs, ips.far, []),
    );
    assert.deepEqual(seen, { sent: 1, received: 1 }, "the captures see genuine requests");
  });

  await t.step("a spoofed source IP (another pod's address) is dropped", async () => {
    await run(["ip", "-n", evilNs, "addr", "add", `${ips.victim}/24`, "dev", "eth0"]);
    for (const to of [far, near]) {
      const seen = await capture(
        to,
        `icmp[icmptype] = icmp-echo and src host ${ips.victim}`,
        () => pingFrom(evilNs, ips[to.name], ["-I", ips.victim]),
      );
      assert.deepEqual(seen, { sent: 1, received: 0 }, `spoofed requests never reach ${to.name}`);
    }
    assert.ok(await pings(evil, ips.far), "while its own address still works");
    await run(["ip", "-n", evilNs, "addr", "del", `${ips.victim}/24`, "dev", "eth0"]);
  });

  await t.step("a spoofed source MAC is dropped", async () => {
    const mac = JSON.parse(
      (await run(["ip", "-n", evilNs, "-j", "link", "show", "eth0"])).stdout,
    )[0].address;
    const fake = "02:00:de:ad:be:ef";
    await run(["ip", "-n", evilNs, "link", "set", "eth0", "address", fake]);
    const seen = await capture(far, `ether src ${fake}`, () => pingFrom(evilNs, ips.far, []));
    assert.deepEqual(seen, { sent: 1, received: 0 }, "nothing from that MAC reaches the other pod");
    await run(["ip", "-n", evilNs, "link", "set", "eth0", "address", mac]);
    assert.ok(await pings(evil, ips.far), "with its own MAC back, it reaches the other pod again");
  });

  for (const pod of [evil, near, far, victim]) assert.equal((await pod.del()).code, 0);
});
