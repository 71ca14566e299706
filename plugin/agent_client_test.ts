import assert from "node:assert/strict";
import { callAgent } from "./agent_client.ts";
import { AgentFailure, type AgentFailureKind } from "./errors.ts";

async function failure(p: Promise<unknown>): Promise<AgentFailureKind> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof AgentFailure, String(e));
    return e.kind;
  }
  assert.fail("expected an AgentFailure");
}

/** A raw socket server that hands each connection to `onConn`, for replies Deno.serve won't send. */
function rawServer(path: string, onConn: (c: Deno.Conn) => Promise<void>) {
  const listener = Deno.listen({ transport: "unix", path });
  const conns: Deno.Conn[] = [];
  const done = (async () => {
    for await (const c of listener) {
      conns.push(c);
      await onConn(c);
    }
  })();
  return {
    async close() {
      listener.close();
      await done;
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed by the handler */ }
      }
    },
  };
}

async function readRequest(c: Deno.Conn): Promise<string> {
  const buf = new Uint8Array(64 * 1024);
  const n = await c.read(buf);
  return new TextDecoder().decode(buf.subarray(0, n ?? 0));
}

Deno.test("agent client: POSTs to the route and returns status and body", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/agent.sock`;
  const seen: string[] = [];
  const server = Deno.serve({ path, transport: "unix", onListen() {} }, async (req) => {
    seen.push(`${req.method} ${new URL(req.url).pathname} ${await req.text()}`);
    return Response.json({ code: 7, msg: "no" }, { status: 400 });
  });
  try {
    const reply = await callAgent(path, "/v1/cni/check", '{"a":1}', 2000);
    assert.deepEqual(reply, { status: 400, body: '{"code":7,"msg":"no"}' });
    assert.deepEqual(seen, ['POST /v1/cni/check {"a":1}']);
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("agent client: missing socket, refused socket", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.equal(await failure(callAgent(`${dir}/none.sock`, "/", "{}", 1000)), "missing");
    // A stale socket file behaves like any non-listening path: refused.
    await Deno.writeTextFile(`${dir}/stale.sock`, "");
    assert.equal(await failure(callAgent(`${dir}/stale.sock`, "/", "{}", 1000)), "refused");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("agent client: silent, hanging-up and non-HTTP agents", async () => {
  const dir = await Deno.makeTempDir();
  const cases: [string, (c: Deno.Conn) => Promise<void>, AgentFailureKind][] = [
    ["silent", async () => {}, "timeout"],
    ["hangup", (c) => Promise.resolve(c.close()), "broken"],
    ["garbage", async (c) => {
      await readRequest(c);
      await c.write(new TextEncoder().encode("hello there\r\n\r\n"));
      c.close();
    }, "bad-reply"],
  ];
  try {
    for (const [name, handler, kind] of cases) {
      const server = rawServer(`${dir}/${name}.sock`, handler);
      try {
        assert.equal(await failure(callAgent(`${dir}/${name}.sock`, "/", "{}", 300)), kind, name);
      } finally {
        await server.close();
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("agent client: a chunked reply split across writes", async () => {
  const dir = await Deno.makeTempDir();
  const server = rawServer(`${dir}/a.sock`, async (c) => {
    await readRequest(c);
    const w = (s: string) => c.write(new TextEncoder().encode(s));
    await w("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}");
    await new Promise((r) => setTimeout(r, 20));
    await w("\r\n0\r\n\r\n");
    // Deliberately keep the connection open: the client must not wait for EOF.
  });
  try {
    assert.deepEqual(await callAgent(`${dir}/a.sock`, "/", "{}", 2000), {
      status: 200,
      body: "{}",
    });
  } finally {
    await server.close();
    await Deno.remove(dir, { recursive: true });
  }
});
