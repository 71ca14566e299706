import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { LinkDeleter } from "./link_deleter.ts";

const root = Deno.uid() === 0;

async function links(netns: string): Promise<string[]> {
  const out = JSON.parse((await run(["ip", "-n", netns, "-j", "link", "show"])).stdout);
  return out.map((l: { ifname: string }) => l.ifname).sort();
}

Deno.test({
  name:
    "link deleter: concurrent deletions share a batch; a gone link is false, the rest deleted with their peers",
  ignore: !root,
  async fn() {
    const ns = `kt-ld${Math.floor(Math.random() * 1e6)}`;
    const peer = `${ns}p`;
    await run(["ip", "netns", "add", ns]);
    await run(["ip", "netns", "add", peer]);
    try {
      const lines = Array.from(
        { length: 20 },
        (_, i) => `link add h${i} type veth peer name p${i} netns ${peer}`,
      );
      await run(["ip", "-n", ns, "-batch", "-"], { stdin: lines.join("\n") + "\n" });
      const deleter = new LinkDeleter();
      const path = `/var/run/netns/${ns}`;
      const results = await Promise.all([
        ...Array.from({ length: 20 }, (_, i) => deleter.delete(`h${i}`, path)),
        deleter.delete("nothere", path),
      ]);
      assert.deepEqual(results, [...Array(20).fill(true), false]);
      assert.deepEqual(await links(ns), ["lo"]);
      assert.deepEqual(await links(peer), ["lo"], "the pod ends went with them");
      assert.equal(await deleter.delete("h1", path), false, "deleting again is not an error");
    } finally {
      await run(["ip", "netns", "del", ns], { check: false });
      await run(["ip", "netns", "del", peer], { check: false });
    }
  },
});
