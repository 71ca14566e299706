import assert from "node:assert/strict";
import { AgentState, type Attachment, RecordTooLargeError } from "./state.ts";

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

Deno.test("agent state: concurrent writes share commits, and each record lands as it last was", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const s = await AgentState.open(dir);
    const record = (id: string, status: "adding" | "ready") => ({
      containerId: id,
      ifName: "eth0",
      netns: "/ns",
      tenant: "t",
      status,
      interfaces: [],
      createdAt: "now",
    });
    const commits: unknown[] = [];
    // deno-lint-ignore no-explicit-any
    const kv = (s as any).kv as Deno.Kv;
    const atomic = kv.atomic.bind(kv);
    kv.atomic = () => {
      commits.push(null);
      return atomic();
    };
    await Promise.all([
      ...Array.from({ length: 100 }, (_, i) => s.putAttachment(record(`c${i}`, "adding"))),
      ...Array.from({ length: 100 }, (_, i) => s.putAttachment(record(`c${i}`, "ready"))),
      s.deleteAttachment("c7", "eth0"),
    ]);
    assert.ok(commits.length <= 4, `200 writes in ${commits.length} commits`);
    s.close();
    const again = await AgentState.open(dir);
    const all = await again.listAttachments();
    assert.equal(all.length, 99, "the deleted one stays deleted");
    assert.ok(all.every((a) => a.status === "ready"), "the last write of each record won");
    again.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

function record(containerId: string, extra: Partial<Attachment> = {}): Attachment {
  return {
    containerId,
    ifName: "eth0",
    netns: "/ns",
    tenant: "t",
    status: "adding",
    interfaces: [],
    createdAt: "now",
    ...extra,
  };
}

Deno.test("agent state: a record too large for Deno KV is refused before anything changes", async () => {
  const s = await AgentState.open(":memory:");
  try {
    await s.putAttachment(record("c1"));
    // Just below and just above what Deno KV itself takes.
    await s.putAttachment(record("c1", { result: "x".repeat(65_000) }));
    const huge = record("c1", { status: "ready", result: "x".repeat(66_000) });
    await assert.rejects(
      s.putAttachment(huge),
      (e) =>
        e instanceof RecordTooLargeError &&
        /c1\/eth0 would be 6\d KiB, too large .* at most 64 KiB/.test(e.message),
    );
    assert.equal((await s.getAttachment("c1", "eth0"))?.status, "adding", "memory unchanged");
    await assert.rejects(s.putAttachment(record("c".repeat(3000))), RecordTooLargeError);
    assert.equal((await s.listAttachments()).length, 1);
  } finally {
    s.close();
  }
});

Deno.test("agent state: holdersOf finds the other attachments on a manager port", async () => {
  const s = await AgentState.open(":memory:");
  try {
    const i = { hostIfName: "kn1", tenant: "t", network: "n", cookie: 1, defaultRoute: true };
    const a = record("a", { interfaces: [{ ...i, ifName: "eth0", portId: "stable:t:p-eth0" }] });
    const b = record("b", { interfaces: [{ ...i, ifName: "eth0", portId: "stable:t:p-eth0" }] });
    await s.putAttachment(a);
    const port = { tenant: "t", network: "n", portId: "stable:t:p-eth0" };
    assert.deepEqual(s.holdersOf(port, b).map((x) => x.containerId), ["a"]);
    assert.deepEqual(s.holdersOf(port, a), []);
    assert.deepEqual(s.holdersOf({ ...port, portId: "other" }), []);
    // Port IDs are per tenant: another tenant's port of that ID (a public network) is not held.
    assert.deepEqual(s.holdersOf({ ...port, tenant: "globex" }, b), []);
    assert.deepEqual(s.holdersOf({ ...port, network: "m" }, b), []);
  } finally {
    s.close();
  }
});

Deno.test("agent state: the size judged is that of the copy kept, as Deno KV measures it", async () => {
  const s = await AgentState.open(":memory:");
  try {
    // Parsed JSON arrays serialize smaller than their clones: 2000 entries fit, their clone not.
    const entries = JSON.parse(
      JSON.stringify(Array.from({ length: 2000 }, (_, i) => ({ name: `veth${i}`, mac: "02:00" }))),
    );
    const big = record("c1", { result: { interfaces: entries } });
    await assert.rejects(s.putAttachment(big), RecordTooLargeError);
    assert.equal(await s.getAttachment("c1", "eth0"), null);
  } finally {
    s.close();
  }
});
