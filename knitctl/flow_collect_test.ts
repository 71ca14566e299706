/**
 * knitctl flows collect (flow_collect.ts): records sent as an agent sends them (the agent's own
 * encoder) arrive, add up per network and pair, print as a table or JSON; other messages are
 * counted as unreadable; bad flags are usage errors.
 */
import assert from "node:assert/strict";
import dgram from "node:dgram";
import { encodeFlowRecords, type FlowRecord } from "@knitter/agent/flow_records";
import { knitctlIn as knitctl } from "./test_support.ts";
import { topTalkers } from "./flow_collect.ts";

// A record as an agent sends it: its tuple, counts and times, and names.
const TUPLE = { src: "10.0.0.1", dst: "10.0.0.2", protocol: 6, srcPort: 40000, dstPort: 8080 };
const COUNTS = { bytes: 1000, packets: 10, start: 1, end: 2, reason: "idle" as const };
const NAMES = { tenant: "acme", network: "app", srcPod: "acme/client", dstPod: "acme/server" };

function record(over: Partial<FlowRecord>): FlowRecord {
  return { ...TUPLE, ...COUNTS, ...NAMES, decision: "allow", node: "n1", ...over };
}

const RECORDS = [
  record({}),
  record({ srcPort: 40001, bytes: 500 }),
  record({ dstPort: 9090, bytes: 60, packets: 1, decision: "deny" }),
  record({ network: "db", src: "10.1.0.1", dst: "10.1.0.2", srcPod: "", bytes: 7 }),
];

/** Sends the records (and one message that is not IPFIX) until `done` settles. */
function sendUntil(port: number, done: Promise<unknown>): Promise<number> {
  const socket = dgram.createSocket("udp4");
  const { messages } = encodeFlowRecords(RECORDS, { exportTime: 1, sequence: 0, domain: 1 });
  let rounds = 0;
  const timer = setInterval(() => {
    rounds++;
    for (const m of [...messages, new Uint8Array([0, 9, 0, 4])]) socket.send(m, port, "127.0.0.1");
  }, 50);
  return done.finally(() => {
    clearInterval(timer);
    socket.close();
  }).then(() => rounds);
}

Deno.test("flows collect: the agents' records add up per network and pair, as JSON", async () => {
  const port = 30000 + Math.floor(Math.random() * 20000);
  const run = knitctl([
    "flows",
    "collect",
    "--listen",
    `127.0.0.1:${port}`,
    "--seconds",
    "1",
    "-o",
    "json",
  ]);
  await sendUntil(port, run);
  const r = await run;
  assert.equal(r.code, 0, r.err);
  const out = JSON.parse(r.out);
  const n = out.records.length / RECORDS.length;
  assert.ok(n >= 1 && Number.isInteger(n), `whole messages: ${out.records.length} records`);
  assert.ok(out.malformed >= 1, "the message that is not IPFIX is counted");
  assert.deepEqual(out.talkers, topTalkers(out.records));
  assert.deepEqual(
    out.talkers.map((
      t: { network: string; src: string; dst: string; bytes: number; decision: string },
    ) => [t.network, t.src, t.dst, t.bytes / n, t.decision]),
    [
      ["app", "acme/client", "acme/server", 1500, "allow"],
      ["app", "acme/client", "acme/server", 60, "deny"],
      ["db", "10.1.0.1", "acme/server", 7, "allow"],
    ],
  );
});

Deno.test("flows collect: a table of the talkers and a summary line", async () => {
  const port = 30000 + Math.floor(Math.random() * 20000);
  const run = knitctl(["flows", "collect", "--listen", `127.0.0.1:${port}`, "--seconds", "1"]);
  await sendUntil(port, run);
  const r = await run;
  assert.equal(r.code, 0, r.err);
  const lines = r.out.trimEnd().split("\n");
  assert.match(lines[0], /^NETWORK\s+SOURCE\s+DESTINATION\s+PROTO\s+BYTES\s+PACKETS\s+DECISION$/);
  assert.match(
    lines[1],
    /^acme\/app\s+acme\/client\s+acme\/server\s+tcp\/8080\s+\d+\s+\d+\s+allow$/,
  );
  assert.match(lines.at(-1)!, /^\d+ records in 1 s on 127\.0\.0\.1:\d+, \d+ unreadable messages$/);
});

Deno.test("flows collect: bad flags are usage errors saying what to give", async () => {
  const cases: [string[], RegExp][] = [
    [["--listen", "4739"], /--listen "4739" must be HOST:PORT, e.g. 127.0.0.1:4739/],
    [["--seconds", "0"], /--seconds "0" must be a whole number of seconds/],
    [["--agent-socket", "/x"], /flows collect does not take --agent-socket/],
  ];
  for (const [flags, error] of cases) {
    const r = await knitctl(["flows", "collect", ...flags]);
    assert.equal(r.code, 2, r.err);
    assert.match(r.err, error);
  }
  const diff = await knitctl(["flows", "diff", "--listen", "127.0.0.1:1"]);
  assert.match(diff.err, /flows diff does not take --listen/);
});
