/**
 * knitctl capture end to end (issue 30) on a simulated node with real Open vSwitch: a TCP payload
 * between two pods, captured by `knitctl capture` through the node's agent, is in the pcap file
 * that `tcpdump -r` reads; the BPF filter keeps other traffic out; a bad filter is a 400 that
 * names it; another tenant's token captures nothing (403); the seconds bound ends a quiet capture.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { startStack } from "../devstack/stack.ts";
import { expectExit, type KnitctlRun } from "../knitctl/test_support.ts";
import { knitctlOn } from "./support/knitctl_stack.ts";
import { addressOf, createNetwork, createTenant, knitterList, makePod } from "./support/pods.ts";
import { api } from "./support/stack_api.ts";
import { inNetns, serve } from "./support/traffic.ts";
import { contains } from "./support/pcap.ts";

const PORT = 24681;
const ACME = `acme-${crypto.randomUUID()}`;
const GLOBEX = `globex-${crypto.randomUUID()}`;
const SENDER = new URL("./support/payload_send.ts", import.meta.url).pathname;

/** The lines `tcpdump -r` prints of a pcap file: it must open it. */
async function readBack(file: string): Promise<string[]> {
  const r = await run(["tcpdump", "-nn", "-r", file], { check: false });
  assert.equal(r.code, 0, `tcpdump -r ${file}: ${r.stderr}`);
  return r.stdout.split("\n").filter((l) => l.trim() !== "");
}

async function exists(file: string): Promise<boolean> {
  return await Deno.stat(file).then(() => true, () => false);
}

Deno.test("e2e capture: knitctl capture writes a pcap tcpdump reads, with the pods' TCP payload and only what the filter takes; another tenant's token and a bad filter are refused", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1"],
    tokens: [
      { token: ACME, scope: "tenant", tenant: "acme" },
      { token: GLOBEX, scope: "tenant", tenant: "globex" },
    ],
  });
  const [n1] = stack.nodes;
  const ctl = await knitctlOn(stack);
  for (const name of ["acme", "globex"]) await createTenant(stack, name);
  await createNetwork(stack, "acme", "data", "10.60.0.0/24");
  const client = await makePod(n1, "client", "acme", knitterList(["data"]));
  const server = await makePod(n1, "server", "acme", knitterList(["data"]));
  const ips: Record<string, string> = {};
  for (const pod of [client, server]) {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    ips[pod.name] = addressOf(r.out);
  }
  const portId = (await api(stack, "GET", "ports?pod=acme/client", undefined, 200)).items[0]
    .id as string;
  const dir = await cleanup.tempDir();
  const target = ["--node", "n1", "--network", "data", "--port", portId];

  await t.step("attack: globex's token cannot capture acme's port (403, no file)", async () => {
    for (const tenant of ["acme", "globex"]) {
      const file = `${dir}/stolen-${tenant}.pcap`;
      const r = expectExit(
        await ctl(["--token", GLOBEX, "-t", tenant, "capture", ...target, "-w", file]),
        1,
        `globex capturing acme's port as tenant ${tenant}`,
      );
      assert.match(r.stderr, /Capture of port .* refused: the manager does not show this port/);
      assert.match(r.stderr, /agent: 403 forbidden/);
      assert.equal(await exists(file), false, "nothing written");
    }
  });

  await t.step(
    "acme's token: the TCP payload between the pods, only what the filter takes",
    async () => {
      const payload = crypto.getRandomValues(new Uint8Array(800));
      const payloadFile = `${dir}/payload`;
      await Deno.writeFile(payloadFile, payload);
      const echo = await serve(cleanup, server.netns, "tcp", PORT, 60);
      const file = `${dir}/client.pcap`;
      let done: KnitctlRun | undefined;
      const capturing = ctl([
        ...["--token", ACME, "-t", "acme", "capture", ...target, "-c", "30", "--seconds", "60"],
        ...["--filter", `tcp port ${PORT}`, "-w", file],
      ]).then((r) => done = r);
      try {
        // Until the capture has its packets: a connection with the payload and its echo each time
        // (the first may come before tcpdump listens), and pings the filter must leave out.
        while (!done) {
          await run(["ping", "-c", "2", "-i", "0.2", ips.server], {
            netns: client.netns,
            check: false,
          });
          const r = await run(
            [...inNetns(client.netns), Deno.execPath(), "run", "--quiet", "--allow-net"]
              .concat(["--allow-read", SENDER, ips.server, String(PORT), payloadFile]),
            { check: false },
          );
          assert.ok(JSON.parse(r.stdout).ok, `the stream itself: ${r.stdout} ${r.stderr}`);
        }
      } finally {
        await capturing;
        await echo.stop();
      }
      expectExit(done!, 0, "capture of acme's own port");
      assert.match(done!.stdout, new RegExp(`^30 packets of acme/data/${portId} written to `));
      const lines = await readBack(file);
      assert.equal(lines.length, 30, "-c 30: thirty packets");
      for (const l of lines) {
        assert.match(l, new RegExp(`IP (${ips.client}|${ips.server})\\.\\d+ > .*\\.\\d+: Flags`));
        assert.ok(l.includes(`.${PORT}`), `only tcp port ${PORT}: ${l}`);
      }
      assert.ok(
        contains(await Deno.readFile(file), payload),
        "the payload's bytes are in the file",
      );
    },
  );

  await t.step("--direction out: only what the pod sends", async () => {
    const file = `${dir}/out.pcap`;
    let done: KnitctlRun | undefined;
    const capturing = ctl(["-t", "acme", "capture", ...target, "--direction", "out", "-c", "4"]
      .concat(["--seconds", "60", "--filter", "icmp", "-w", file])).then((r) => done = r);
    try {
      while (!done) {
        await run(["ping", "-c", "2", "-i", "0.2", ips.server], {
          netns: client.netns,
          check: false,
        });
      }
    } finally {
      await capturing;
    }
    expectExit(done!, 0, "capture of what the pod sends");
    const lines = await readBack(file);
    assert.equal(lines.length, 4);
    for (const l of lines) {
      assert.match(l, new RegExp(`IP ${ips.client} > ${ips.server}: ICMP echo request`));
    }
  });

  await t.step("a bad filter: a 400 that names it and what tcpdump says, no file", async () => {
    const file = `${dir}/bad.pcap`;
    const r = expectExit(
      await ctl(["-t", "acme", "capture", ...target, "--filter", "tcp port nope", "-w", file]),
      1,
      "a bad filter",
    );
    assert.match(r.stderr, /The capture filter "tcp port nope" is not valid: tcpdump says: .+/);
    assert.match(r.stderr, /agent: 400 bad_request/);
    assert.equal(await exists(file), false);
  });

  await t.step(
    "the seconds bound (admin token, the port found by --pod): a quiet capture, no packets",
    async () => {
      const file = `${dir}/quiet.pcap`;
      const r = expectExit(
        await ctl(["-t", "acme", "capture", "--node", "n1", "--pod", "acme/client"]
          .concat(["--seconds", "1", "--filter", "udp port 9", "-w", file])),
        0,
        "a capture nothing matches",
      );
      assert.equal(r.stdout, `0 packets of acme/data/${portId} written to ${file}\n`, "--pod");
      assert.deepEqual(await readBack(file), []);
    },
  );
});
