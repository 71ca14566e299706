import assert from "node:assert/strict";
import { knitctlIn as knitctl } from "./test_support.ts";

/** A stand-in agent on a unix socket that answers GET /v1/flows/diff with `body`. */
async function fakeAgent(body: unknown): Promise<{ socket: string } & AsyncDisposable> {
  const dir = await Deno.makeTempDir({ prefix: "knitctl-flows-" });
  const socket = `${dir}/agent.sock`;
  const server = Deno.serve({ path: socket, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    if (req.method === "GET" && url.pathname === "/v1/flows/diff") return Response.json(body);
    return new Response("not found", { status: 404 });
  });
  return {
    socket,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const STATS = { heals: 2, checks: 5, repairs: 1, driftedFlows: 3 };

Deno.test("flows diff: + for missing, - for extra, a summary line, exit 1 as diff(1)", async () => {
  await using agent = await fakeAgent({
    bridge: "br-int",
    computed: 3,
    installed: 3,
    missing: ["cookie=0x0000000000000000,table=30,priority=0,actions=drop"],
    extra: ["cookie=0x0000000000000000,table=10,priority=200,ip,actions=drop"],
    ...STATS,
  });
  const r = await knitctl(["flows", "diff", "--agent-socket", agent.socket]);
  assert.equal(r.code, 1);
  assert.equal(r.err, "", "the difference is the output, not an error");
  assert.deepEqual(r.out.trimEnd().split("\n"), [
    "+ cookie=0x0000000000000000,table=30,priority=0,actions=drop",
    "- cookie=0x0000000000000000,table=10,priority=200,ip,actions=drop",
    "br-int: 3 flows installed, 3 computed: 1 missing (+), 1 extra (-); self-healing so far: 2 heals, 1 drift repairs in 5 checks",
  ]);
});

Deno.test("flows diff: the same flows exit 0; -o json prints the agent's answer", async () => {
  const body = { bridge: "br-int", computed: 2, installed: 2, missing: [], extra: [], ...STATS };
  await using agent = await fakeAgent(body);
  const r = await knitctl(["flows", "diff", "--agent-socket", agent.socket]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /^br-int: 2 flows installed, 2 computed: the same;/);
  const j = await knitctl(["flows", "diff", "--agent-socket", agent.socket, "-o", "json"]);
  assert.equal(j.code, 0, j.err);
  assert.deepEqual(JSON.parse(j.out), body);
});

Deno.test("flows: usage errors exit 2, a missing agent exits 1 naming the socket", async () => {
  for (
    const args of [["flows"], ["flows", "dump"], ["flows", "diff", "x"], [
      "flows",
      "diff",
      "--network",
      "n",
    ]]
  ) {
    const r = await knitctl(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.err}`);
  }
  const r = await knitctl(["flows", "diff", "--agent-socket", "/nonexistent/agent.sock"]);
  assert.equal(r.code, 1);
  assert.match(r.err, /No agent socket at \/nonexistent\/agent\.sock/);
});
