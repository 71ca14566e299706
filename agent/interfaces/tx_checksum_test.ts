import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { txChecksumIoctl } from "./tx_checksum.ts";

/** `ethtool -k` of a device, without its first line (which names the device). */
async function features(netns: string, dev: string): Promise<string> {
  const out = (await run(["ethtool", "-k", dev], { netns: `/var/run/netns/${netns}` })).stdout;
  return out.split("\n").slice(1).join("\n");
}

async function vethPairs(cleanup: Cleanup): Promise<string> {
  const ns = cleanup.name("tx");
  cleanup.netns(ns);
  await run(["ip", "netns", "add", ns]);
  for (const [a, b] of [["a0", "a1"], ["b0", "b1"]]) {
    await run(["ip", "-n", ns, "link", "add", "name", a, "type", "veth", "peer", "name", b]);
  }
  return ns;
}

Deno.test("txChecksumIoctl leaves a veth in another netns with exactly the features `ethtool -K tx off` leaves (SCTP's checksum included)", async () => {
  assert.ok(txChecksumIoctl, "FFI is allowed in this test, so the ioctl path must load");
  await using cleanup = new Cleanup();
  const ns = await vethPairs(cleanup);
  const before = await features(ns, "a0");
  assert.match(before, /^\ttx-checksum-sctp: on/m, "a veth starts with SCTP checksum offload");

  await run(["ethtool", "-K", "a0", "tx", "off"], { netns: `/var/run/netns/${ns}` });
  txChecksumIoctl(`/var/run/netns/${ns}`, "b0");
  const byEthtool = await features(ns, "a0");
  assert.notEqual(byEthtool, before);
  assert.equal(await features(ns, "b0"), byEthtool);
  assert.match(byEthtool, /^tx-checksumming: off/m);
  assert.match(byEthtool, /^\ttx-checksum-sctp: off/m);
  assert.match(await features(ns, "b1"), /^tx-checksumming: on/m, "the peer is left alone");

  txChecksumIoctl(`/var/run/netns/${ns}`, "b0");
  assert.equal(await features(ns, "b0"), byEthtool, "idempotent");
});

Deno.test("txChecksumIoctl: a missing device or netns is a clear error, and this thread stays in its own netns", async () => {
  assert.ok(txChecksumIoctl);
  await using cleanup = new Cleanup();
  const ns = await vethPairs(cleanup);
  const own = Deno.readLinkSync("/proc/thread-self/ns/net");
  assert.throws(
    () => txChecksumIoctl!(`/var/run/netns/${ns}`, "nope0"),
    /cannot turn off tx checksum offload on nope0: No such device/,
  );
  assert.throws(
    () => txChecksumIoctl!(`/var/run/netns/${ns}-gone`, "a0"),
    /cannot open the netns \/var\/run\/netns\/.*-gone: No such file or directory/,
  );
  assert.throws(
    () => txChecksumIoctl!(`/var/run/netns/${ns}`, "x".repeat(16)),
    /invalid interface/,
  );
  assert.equal(Deno.readLinkSync("/proc/thread-self/ns/net"), own);
  // A socket opened now is this netns's: it sees this netns's loopback, not the pod's devices.
  assert.throws(() => txChecksumIoctl!("/proc/thread-self/ns/net", "a0"), /No such device/);
});
