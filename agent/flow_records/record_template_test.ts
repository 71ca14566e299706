/**
 * The agent's own records (record_template.ts) through the IPFIX codec and back, as knitctl's
 * collector reads them; and the agent's flowRecords configuration (file and environment).
 */
import assert from "node:assert/strict";
import { loadAgentConfig } from "../config.ts";
import {
  encodeFlowRecords,
  type FlowRecord,
  KNITTER_PEN,
  readMessage,
  RECORD_TEMPLATES,
  TemplateStore,
} from "./record_template.ts";

function record(over: Partial<FlowRecord> = {}): FlowRecord {
  return {
    src: "10.0.0.1",
    dst: "10.0.0.2",
    protocol: 6,
    srcPort: 40000,
    dstPort: 8080,
    bytes: 2 ** 40 + 7,
    packets: 123456,
    start: 1_764_370_000_123,
    end: 1_764_370_009_456,
    reason: "end",
    tenant: "acme",
    network: "app",
    srcPod: "acme/client",
    dstPod: "acme/server",
    decision: "allow",
    node: "n1",
    ...over,
  };
}

Deno.test("records: IPv4 and IPv6 records read back as they were sent, whatever their strings' lengths", () => {
  const records = [
    record(),
    record({
      src: "fd00::1",
      dst: "fd00:0:0:1::2",
      protocol: 17,
      decision: "deny",
      reason: "idle",
    }),
    record({ srcPod: "", dstPod: "ns/" + "p".repeat(300), reason: "active" }),
  ];
  const { messages, sequence } = encodeFlowRecords(records, {
    exportTime: 9,
    sequence: 5,
    domain: 1,
  });
  assert.equal(sequence, 8);
  const store = new TemplateStore();
  // A message holds a data set per template: the IPv4 records, then the IPv6 ones.
  const byText = (rs: FlowRecord[]) => rs.map((r) => JSON.stringify(r)).sort();
  const read = messages.flatMap((m) => readMessage(m, store, "agent"));
  assert.deepEqual(byText(read), byText(records));
});

Deno.test("records: many records go in several messages of at most 1,400 bytes, each with the templates", () => {
  const records = Array.from({ length: 100 }, (_, i) => record({ srcPort: 1000 + i }));
  const { messages, sequence } = encodeFlowRecords(records, {
    exportTime: 1,
    sequence: 0,
    domain: 1,
  });
  assert.ok(messages.length > 1);
  assert.equal(sequence, 100);
  for (const m of messages) {
    assert.ok(m.length <= 1400, `${m.length} bytes`);
    // Each alone is readable: a collector that starts late loses nothing after it.
    assert.ok(readMessage(m, new TemplateStore(), "late").length > 0);
  }
  const store = new TemplateStore();
  assert.deepEqual(
    messages.flatMap((m) => readMessage(m, store, "a")).map((r) => r.srcPort),
    records.map((r) => r.srcPort),
  );
});

Deno.test("records: the strings are enterprise elements under the placeholder number", () => {
  for (const t of RECORD_TEMPLATES) {
    const ours = t.fields.filter((f) => f.enterprise !== undefined);
    assert.equal(ours.length, 6);
    assert.ok(ours.every((f) => f.enterprise === KNITTER_PEN && f.length === 65535));
  }
});

const BASE = {
  manager: { url: "http://127.0.0.1:9527", token: "0123456789abcdef" },
  underlayIp: "192.0.2.1",
};

async function load(file: unknown, env: Record<string, string> = {}) {
  const path = await Deno.makeTempFile();
  try {
    await Deno.writeTextFile(path, JSON.stringify(file));
    return (await loadAgentConfig(["--config", path], (n) => env[n])).config;
  } finally {
    await Deno.remove(path);
  }
}

Deno.test("config: flowRecords has its defaults; the environment turns it on and sets the sampling", async () => {
  assert.equal((await load(BASE)).flowRecords, undefined, "off unless asked for");
  const on = await load({
    ...BASE,
    flowRecords: { collectors: ["[fd00::9]:4739", "flows.example:2055"] },
  });
  assert.deepEqual(on.flowRecords, {
    collectors: ["[fd00::9]:4739", "flows.example:2055"],
    sampling: 1,
    activeTimeout: 60,
    idleTimeout: 15,
    collectorSetId: 1,
    listenPort: 0,
  });
  const env = await load(BASE, {
    KNITTER_AGENT_FLOW_COLLECTORS: "10.0.0.9:4739, 10.0.0.10:4739",
    KNITTER_AGENT_FLOW_SAMPLING: "100",
  });
  assert.deepEqual(env.flowRecords?.collectors, ["10.0.0.9:4739", "10.0.0.10:4739"]);
  assert.equal(env.flowRecords?.sampling, 100);
});

Deno.test("config: a bad flowRecords says what, where from and what to do", async () => {
  await assert.rejects(
    load({ ...BASE, flowRecords: { collectors: ["10.0.0.9"] } }),
    /Invalid configuration at "flowRecords.collectors.0": must be "host:port".*\(from the file/,
  );
  await assert.rejects(
    load({ ...BASE, flowRecords: { collectors: ["10.0.0.9:70000"] } }),
    /flowRecords.collectors.0/,
  );
  await assert.rejects(
    load(BASE, { KNITTER_AGENT_FLOW_COLLECTORS: "a:1", KNITTER_AGENT_FLOW_SAMPLING: "often" }),
    /KNITTER_AGENT_FLOW_SAMPLING="often" is not a whole number; correct it/,
  );
  await assert.rejects(
    load(BASE, { KNITTER_AGENT_FLOW_SAMPLING: "10" }),
    /Invalid configuration at "flowRecords.collectors".*give it in .* or by KNITTER_AGENT_FLOW_COLLECTORS/,
  );
  await assert.rejects(
    load({ ...BASE, flowRecords: { collectors: ["a:1"], sampling: 0 } }),
    /flowRecords.sampling/,
  );
});
