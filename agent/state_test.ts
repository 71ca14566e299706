import assert from "node:assert/strict";
import { AgentState } from "./state.ts";

Deno.test("agent state: network numbers are stable, port numbers unique", async () => {
  const s = await AgentState.open(":memory:");
  try {
    const a = await s.networkNumber("net-a");
    const b = await s.networkNumber("net-b");
    assert.notEqual(a, b);
    assert.equal(await s.networkNumber("net-a"), a);
    const ports = (await Promise.all(Array.from({ length: 20 }, () => s.portNumbers(2)))).flat();
    assert.equal(new Set(ports).size, 40);
    assert.ok(ports.every((p) => p > 0));
  } finally {
    s.close();
  }
});

Deno.test("agent state: attachments are kept across a reopen of the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const s = await AgentState.open(dir);
    await s.putAttachment({
      containerId: "c1",
      ifName: "eth0",
      netns: "/ns",
      tenant: "t",
      status: "ready",
      interfaces: [],
      createdAt: "now",
    });
    s.close();
    const again = await AgentState.open(dir);
    assert.equal((await again.getAttachment("c1", "eth0"))?.status, "ready");
    assert.equal((await again.listAttachments()).length, 1);
    await again.deleteAttachment("c1", "eth0");
    assert.equal(await again.getAttachment("c1", "eth0"), null);
    again.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
