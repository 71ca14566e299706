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

Deno.test("agent state: port numbers survive a reopen once an attachment holds them, and reads are copies", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const s = await AgentState.open(dir);
    const [c1, c2] = await s.portNumbers(2);
    await s.putAttachment({
      containerId: "c1",
      ifName: "eth0",
      netns: "/ns",
      tenant: "t",
      status: "adding",
      interfaces: [
        {
          ifName: "eth0",
          hostIfName: "h0",
          portId: "p0",
          tenant: "t",
          network: "n",
          cookie: c1,
          defaultRoute: true,
        },
        {
          ifName: "net1",
          hostIfName: "h1",
          portId: "p1",
          tenant: "t",
          network: "n",
          cookie: c2,
          defaultRoute: false,
        },
      ],
      createdAt: "now",
    });
    // Changing what was read changes nothing stored until it is written back.
    const read = (await s.getAttachment("c1", "eth0"))!;
    read.status = "ready";
    assert.equal((await s.getAttachment("c1", "eth0"))?.status, "adding");
    assert.equal([...s.attachmentsView()].length, 1);
    // Numbers handed out but never stored may come again; stored ones never do.
    await s.portNumbers(5);
    s.close();
    const again = await AgentState.open(dir);
    const [next] = await again.portNumbers(1);
    assert.ok(next > c2, `${next} after ${c2}`);
    again.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
