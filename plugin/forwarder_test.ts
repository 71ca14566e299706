/**
 * The CNI plugin as a runtime runs it: the built forwarder (knitter.c) exec'd with exactly the
 * CNI_* variables (`env -i`) and the config on stdin, against the agent's real HTTP app on a unix
 * socket (its commands scripted: the real agent's end-to-end tests live in tests/), and against
 * sockets served by the test that misbehave: silent, hanging up, answering garbage or another wire
 * version. Then a bounded fuzz of environments, stdin and agent behaviours.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { type Logger, run } from "@knitter/common";
import type { Attacher } from "../agent/cni/attach.ts";
import { agentApp } from "../agent/server/server.ts";
import { buildPlugin } from "./build.ts";
import { CNI_VERSIONS } from "./contract.ts";
import type { CniRequest } from "./protocol.ts";

const PLUGIN = await buildPlugin();
const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };
/** No call may hang the suite: the longest timeout a test sets is 30 s (the default). */
const GUARD_MS = 40_000;

const ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "0123abcd",
  CNI_NETNS: "/var/run/netns/cni-1234",
  CNI_IFNAME: "eth0",
  CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0",
  CNI_PATH: "/opt/cni/bin",
};
const CONF = { cniVersion: "1.0.0", name: "knitter", type: "knitter" };

const RESULT_1_1 = {
  cniVersion: "1.1.0",
  interfaces: [{ name: "eth0", mac: "02:42:0a:01:00:05", mtu: 1450, sandbox: ENV.CNI_NETNS }],
  ips: [{ address: "10.1.0.5/24", gateway: "10.1.0.1", interface: 0 }],
  routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1", priority: 100 }],
};

interface Outcome {
  code: number;
  stdout: string;
  // deno-lint-ignore no-explicit-any
  json: any;
}

/** Execs the plugin with exactly `env` and `stdin` (none at all when undefined). */
async function plugin(env: Record<string, string>, stdin?: string): Promise<Outcome> {
  const r = await run(["env", "-i", ...Object.entries(env).map(([k, v]) => `${k}=${v}`), PLUGIN], {
    stdin,
    check: false,
    timeoutMs: GUARD_MS,
  });
  let json: unknown;
  try {
    json = r.stdout === "" ? undefined : JSON.parse(r.stdout);
  } catch {
    assert.fail(`the plugin printed something that is not JSON: ${JSON.stringify(r.stdout)}`);
  }
  return { code: r.code, stdout: r.stdout, json };
}

/** The agent's real app on `socket`, its commands answered by `answer`; records each request. */
function realAgent(socket: string, answer: (req: CniRequest) => Promise<unknown>) {
  const seen: CniRequest[] = [];
  const record = (req: CniRequest) => {
    seen.push(req);
    return answer(req);
  };
  const attacher = { add: record, del: record, check: record, gc: record };
  const app = agentApp({
    attacher: attacher as unknown as Attacher,
    notReady: () => null,
    log: quiet,
  });
  const server = Deno.serve({ path: socket, transport: "unix", onListen() {} }, app.fetch);
  return { seen, close: () => server.shutdown() };
}

/** A unix socket whose every connection is handled by `behave` (raw bytes, no HTTP library). */
function rawAgent(socket: string, behave: (conn: Deno.UnixConn) => Promise<void>) {
  const listener = Deno.listen({ path: socket, transport: "unix" });
  const conns = new Set<Deno.UnixConn>();
  const done = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      behave(conn).catch(() => {}).finally(() => {
        conns.delete(conn);
        closeQuietly(conn);
      });
    }
  })().catch(() => {});
  return {
    close: async () => {
      listener.close();
      for (const c of conns) closeQuietly(c);
      await done;
    },
  };
}

function closeQuietly(c: { close(): void }) {
  try {
    c.close();
  } catch { /* already closed */ }
}

/** Reads a request up to the end of its headers and body (by Content-Length). */
async function readRequest(conn: Deno.Conn): Promise<string> {
  let text = "";
  const buf = new Uint8Array(65536);
  for (;;) {
    const n = await conn.read(buf);
    if (n === null) return text;
    text += new TextDecoder().decode(buf.subarray(0, n));
    const end = text.indexOf("\r\n\r\n");
    const length = Number(/content-length: *(\d+)/i.exec(text)?.[1] ?? 0);
    if (end >= 0 && new TextEncoder().encode(text.slice(end + 4)).length >= length) return text;
  }
}

const enc = new TextEncoder();

/** What misbehaving agents do, by name: the fuzz picks among them too. */
const BEHAVIOURS: Record<string, (conn: Deno.UnixConn) => Promise<void>> = {
  "closes at once": () => Promise.resolve(),
  "hangs": async (conn) => {
    await readRequest(conn);
    await conn.read(new Uint8Array(1)); // the plugin closes first, at its timeout
  },
  "closes mid-answer": async (conn) => {
    await readRequest(conn);
    await conn.write(enc.encode(
      'HTTP/1.1 200 OK\r\nKnitter-Wire: 1\r\nKnitter-Exit-Code: 0\r\nContent-Length: 500\r\n\r\n{"cni',
    ));
  },
  "closes inside the headers": async (conn) => {
    await readRequest(conn);
    await conn.write(enc.encode("HTTP/1.1 200 OK\r\nKnitter-Wi"));
  },
  "answers garbage": async (conn) => {
    await readRequest(conn);
    await conn.write(enc.encode("\x00\x01garbage\nnot http at all\r\n\r\n"));
  },
  "is the agent before the forwarder": async (conn) => {
    await readRequest(conn);
    // What the agent of the Deno plugin's time answers a POST /v1/cni/exec: its route for a
    // command, a body that is no CniRequest, and no Knitter-Wire header.
    const body =
      '{"cniVersion":"1.1.0","code":6,"msg":"The agent got a malformed request: containerId: Invalid input"}';
    await conn.write(enc.encode(
      `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    ));
  },
  "speaks wire 2": async (conn) => {
    await readRequest(conn);
    const body = '{"cniVersion":"1.1.0","code":999,"msg":"wire 2 only"}\n';
    await conn.write(enc.encode(
      `HTTP/1.1 400 Bad Request\r\nKnitter-Wire: 2\r\nKnitter-Exit-Code: 1\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    ));
  },
};

async function inTempDir(test: (dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "knitter-fwd-" });
  try {
    await test(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function stdin(conf: Record<string, unknown>): string {
  return JSON.stringify(conf);
}

Deno.test("forwarder: VERSION answers on its own, with contract.ts's versions", async () => {
  const v = await plugin({ CNI_COMMAND: "VERSION" }, stdin({ cniVersion: "0.4.0" }));
  assert.deepEqual([v.code, v.json], [0, { cniVersion: "0.4.0", supportedVersions: CNI_VERSIONS }]);
  const huge = `{"cniVersion":"1.0.0","pad":"${"x".repeat(2 << 20)}"}`;
  const big = await plugin({ CNI_COMMAND: "VERSION" }, huge);
  assert.deepEqual([big.code, big.json.cniVersion], [0, "1.0.0"], "a probe of any size");
  for (const odd of [undefined, "", "{", '{"cniVersion":1}', "\x00\x01"]) {
    const r = await plugin({ CNI_COMMAND: "VERSION", KNITTER_AGENT_SOCKET: "/nowhere" }, odd);
    assert.deepEqual([r.code, r.json.cniVersion], [0, "1.1.0"], String(odd));
  }
});

Deno.test("forwarder against the agent: ADD answered in 1.1.0, 1.0.0 and 0.4.0, the call forwarded as it came", async () => {
  await inTempDir(async (dir) => {
    const agent = realAgent(`${dir}/a.sock`, () => Promise.resolve(RESULT_1_1));
    try {
      const env = { ...ENV, KNITTER_AGENT_SOCKET: `${dir}/a.sock` };
      for (const version of CNI_VERSIONS) {
        const r = await plugin(env, stdin({ ...CONF, cniVersion: version }));
        assert.equal(r.code, 0, r.stdout);
        assert.equal(r.json.cniVersion, version);
        assert.equal("mtu" in r.json.interfaces[0], version === "1.1.0");
        assert.equal(r.json.ips[0].version, version === "0.4.0" ? "4" : undefined);
      }
      assert.deepEqual(agent.seen[0], {
        command: "ADD",
        containerId: ENV.CNI_CONTAINERID,
        netns: ENV.CNI_NETNS,
        ifName: "eth0",
        args: { IgnoreUnknown: "1", K8S_POD_NAMESPACE: "shop", K8S_POD_NAME: "web-0" },
        path: ENV.CNI_PATH,
        config: { ...CONF, cniVersion: "0.4.0" },
      });
    } finally {
      await agent.close();
    }
  });
});

Deno.test("forwarder against the agent: the config's agentSocket wins over KNITTER_AGENT_SOCKET; stdin of any text is forwarded intact", async () => {
  await inTempDir(async (dir) => {
    const agent = realAgent(`${dir}/conf.sock`, () => Promise.resolve(undefined));
    try {
      const conf = {
        ...CONF,
        agentSocket: `${dir}/conf.sock`,
        note: 'quotes " \\ tabs\t newlines\n ünïcödé \u0001 \u007f',
        networks: ["a", { name: "b", interface: "net1" }],
      };
      const env = { ...ENV, CNI_COMMAND: "CHECK", KNITTER_AGENT_SOCKET: `${dir}/nothing.sock` };
      const r = await plugin(env, JSON.stringify(conf, null, 2));
      assert.deepEqual([r.code, r.stdout], [0, ""]);
      assert.deepEqual(agent.seen[0].config, conf);
    } finally {
      await agent.close();
    }
  });
});

Deno.test("forwarder against the agent: its errors and exit status are relayed byte for byte; DEL of the unknown is success", async () => {
  await inTempDir(async (dir) => {
    const { CniError } = await import("./contract.ts");
    const agent = realAgent(`${dir}/a.sock`, (req) =>
      Promise.reject(
        new CniError(req.command === "DEL" ? 3 : 7, "no such network", "ask your admin"),
      ));
    try {
      const env = { ...ENV, KNITTER_AGENT_SOCKET: `${dir}/a.sock` };
      const add = await plugin(env, stdin({ ...CONF, cniVersion: "0.4.0" }));
      assert.equal(add.code, 1);
      assert.equal(
        add.stdout,
        '{"cniVersion":"0.4.0","code":7,"msg":"no such network","details":"ask your admin"}\n',
      );
      const del = await plugin({ ...env, CNI_COMMAND: "DEL" }, stdin(CONF));
      assert.deepEqual([del.code, del.stdout], [0, ""]);
      const noCommand = await plugin({ KNITTER_AGENT_SOCKET: `${dir}/a.sock` }, stdin(CONF));
      assert.deepEqual([noCommand.code, noCommand.json.code], [1, 4]);
      const garbage = await plugin(env, "{not json");
      assert.deepEqual([garbage.code, garbage.json.code], [1, 6]);
    } finally {
      await agent.close();
    }
  });
});

Deno.test("forwarder: no agent is 11 naming the socket and what to do (DEL too), 50 for STATUS, in the config's version", async () => {
  await inTempDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/file`, "not a socket");
    // A socket file nobody listens on: a second name for a listener's socket, kept after it closes.
    const listener = Deno.listen({ path: `${dir}/listening.sock`, transport: "unix" });
    await Deno.link(`${dir}/listening.sock`, `${dir}/refused.sock`);
    listener.close();
    const cases: [string, RegExp][] = [
      [
        `${dir}/missing.sock`,
        /No such file or directory; is the knitter-agent DaemonSet pod running/,
      ],
      [`${dir}/file`, /exists but is not a socket; agentSocket in the network config/],
      [dir, /exists but is not a socket/],
      [`${dir}/refused.sock`, /nothing accepts connections on it/],
    ];
    for (const [socket, why] of cases) {
      for (const command of ["ADD", "DEL", "STATUS"]) {
        const conf = { ...CONF, cniVersion: "0.4.0", agentSocket: socket };
        const r = await plugin({ ...ENV, CNI_COMMAND: command }, stdin(conf));
        assert.equal(r.code, 1);
        assert.equal(r.json.cniVersion, "0.4.0");
        assert.equal(r.json.code, command === "STATUS" ? 50 : 11);
        assert.ok(r.json.msg.includes(socket), r.json.msg);
        assert.match(r.json.details, why);
      }
    }
  });
});

Deno.test("forwarder: a usable socket path or code 7 from the plugin itself", async () => {
  for (const agentSocket of ["relative.sock", 5, null, `/${"x".repeat(120)}`, "/a\\u0041"]) {
    const r = await plugin(ENV, stdin({ ...CONF, agentSocket }));
    assert.deepEqual([r.code, r.json.code], [1, 7], String(agentSocket));
    assert.match(r.json.msg, /agentSocket/);
  }
  const env = await plugin({ ...ENV, KNITTER_AGENT_SOCKET: "here.sock" }, stdin(CONF));
  assert.deepEqual([env.code, env.json.code], [1, 7]);
});

Deno.test("forwarder: a hung agent is 11 after agentTimeoutSeconds, 50 for STATUS", async () => {
  await inTempDir(async (dir) => {
    const agent = rawAgent(`${dir}/a.sock`, BEHAVIOURS["hangs"]);
    try {
      const conf = { ...CONF, agentSocket: `${dir}/a.sock`, agentTimeoutSeconds: 0.3 };
      for (const command of ["ADD", "STATUS"]) {
        const r = await plugin({ ...ENV, CNI_COMMAND: command }, stdin(conf));
        assert.deepEqual([r.code, r.json.code], [1, command === "STATUS" ? 50 : 11]);
        assert.match(r.json.details, /no answer within 0.3s; the agent may be overloaded or stuck/);
      }
    } finally {
      await agent.close();
    }
  });
});

Deno.test("forwarder: an agent that hangs up, answers garbage or another wire is a CNI error saying which", async () => {
  const expect: Record<string, [number, RegExp]> = {
    "closes at once": [11, /closed the connection without an answer|connection dropped/],
    "closes mid-answer": [
      11,
      /body has 5 bytes, its Content-Length says 500: the connection closed in the middle/,
    ],
    "closes inside the headers": [11, /closed inside the answer's headers/],
    "answers garbage": [999, /not HTTP\/1.x/],
    "is the agent before the forwarder": [
      999,
      /HTTP 400 without a Knitter-Wire header: it is older than the plugin/,
    ],
    "speaks wire 2": [999, /it speaks wire version 2/],
  };
  await inTempDir(async (dir) => {
    for (const [name, [code, details]] of Object.entries(expect)) {
      const socket = `${dir}/${name.replaceAll(" ", "-")}.sock`;
      const agent = rawAgent(socket, BEHAVIOURS[name]);
      try {
        const r = await plugin(ENV, stdin({ ...CONF, agentSocket: socket }));
        assert.deepEqual([r.code, r.json.code], [1, code], name);
        assert.match(r.json.details, details, name);
        if (code === 999) assert.match(r.json.msg, /does not speak this plugin's wire version 1/);
      } finally {
        await agent.close();
      }
    }
  });
});

Deno.test("forwarder: stdin above 1 MiB is code 6 without asking the agent", async () => {
  const big = stdin({ ...CONF, pad: "x".repeat(1 << 20) });
  const r = await plugin({ ...ENV, KNITTER_AGENT_SOCKET: "/nowhere.sock" }, big);
  assert.deepEqual([r.code, r.json.code, r.json.cniVersion], [1, 6, "1.0.0"]);
  // Below the raw limit, but above it once JSON-encoded for the agent.
  const escaped = stdin({ ...CONF, pad: '"'.repeat(300_000) });
  const e = await plugin({ ...ENV, KNITTER_AGENT_SOCKET: "/nowhere.sock" }, escaped);
  assert.deepEqual([e.code, e.json.code], [1, 6]);
  assert.match(e.json.msg, /too large to forward/);
});

Deno.test("agent wire: a request of the Deno plugin (wire 0) still works; one of wire 2 is refused naming both versions", async () => {
  await inTempDir(async (dir) => {
    const socket = `${dir}/a.sock`;
    const agent = realAgent(socket, () => Promise.resolve(RESULT_1_1));
    const client = Deno.createHttpClient({ proxy: { transport: "unix", path: socket } });
    try {
      const old: CniRequest = {
        command: "ADD",
        containerId: "c1",
        netns: "/var/run/netns/p",
        ifName: "eth0",
        args: {},
        path: "",
        config: { ...CONF },
      };
      const r0 = await fetch("http://agent/v1/cni/add", {
        method: "POST",
        body: JSON.stringify(old),
        client,
      });
      assert.deepEqual([r0.status, await r0.json()], [200, RESULT_1_1]);
      const r2 = await fetch("http://agent/v1/cni/exec", {
        method: "POST",
        headers: { "Knitter-Wire": "2" },
        body: JSON.stringify({ wire: 2, env: ENV, stdin: stdin(CONF), extra: "new" }),
        client,
      });
      assert.equal(r2.headers.get("Knitter-Wire"), "1");
      assert.equal(r2.headers.get("Knitter-Exit-Code"), "1");
      const body = await r2.json();
      assert.deepEqual([body.cniVersion, body.code], ["1.0.0", 999]);
      assert.match(body.msg, /the knitter plugin speaks wire version 2, this agent 1/);
      assert.equal(agent.seen.length, 1);
    } finally {
      client.close();
      await agent.close();
    }
  });
});

/** Random variables of a runtime, some missing, some odd. */
const envArb = fc.record({
  CNI_COMMAND: fc.constantFrom("ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "", "add", "X"),
  CNI_CONTAINERID: fc.oneof(fc.constant("c1"), fc.string({ maxLength: 80 })),
  CNI_NETNS: fc.oneof(fc.constant("/var/run/netns/p"), fc.string({ maxLength: 40 })),
  CNI_IFNAME: fc.oneof(fc.constant("eth0"), fc.string({ maxLength: 20 })),
  CNI_ARGS: fc.oneof(fc.constant("K8S_POD_NAME=p"), fc.string({ maxLength: 60 })),
  CNI_PATH: fc.string({ maxLength: 30 }),
}, { requiredKeys: [] }).map((env) =>
  // env(1) takes NAME=VALUE words: a value can hold anything but NUL.
  Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.replaceAll("\0", "")]))
);

type Stdin = { text?: string; timeout: boolean };

/** stdin: a config (with a short timeout, so a hung agent costs little), mangled or not, or garbage. */
const stdinArb: fc.Arbitrary<Stdin> = fc.oneof(
  fc.record({
    cniVersion: fc.constantFrom("1.1.0", "1.0.0", "0.4.0", "0.3.1", "", 1),
    name: fc.constantFrom("knitter", "bad/name", ""),
    type: fc.constant("knitter"),
    networks: fc.oneof(fc.constant(["a"]), fc.anything()),
    extra: fc.jsonValue({ maxDepth: 3 }),
  }, { requiredKeys: ["cniVersion", "type"] }).map((c) => ({
    text: JSON.stringify({ ...c, agentTimeoutSeconds: 0.3 }),
    timeout: true,
  })),
  fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.constant(undefined), fc.constant("{"))
    .map((
      text,
    ) => ({ text, timeout: false })),
  fc.uint8Array({ maxLength: 300 }).map((bytes) => ({
    text: new TextDecoder().decode(bytes),
    timeout: false,
  })),
);

Deno.test("forwarder fuzz: any environment, stdin and agent behaviour gives JSON on stdout and exit 0 or 1", async () => {
  const runs = Number(Deno.env.get("KNITTER_FUZZ_RUNS") ?? 200);
  await inTempDir(async (dir) => {
    const sockets: Record<string, string> = {};
    const closers: (() => Promise<void>)[] = [];
    for (const name of Object.keys(BEHAVIOURS)) {
      sockets[name] = `${dir}/${name.replaceAll(" ", "-")}.sock`;
      closers.push(rawAgent(sockets[name], BEHAVIOURS[name]).close);
    }
    sockets["the agent"] = `${dir}/agent.sock`;
    const { CniError } = await import("./contract.ts");
    closers.push(
      realAgent(
        sockets["the agent"],
        (req) =>
          req.command === "ADD" && req.containerId.length % 2 === 0
            ? Promise.resolve(RESULT_1_1)
            : Promise.reject(new CniError(7, "scripted failure")),
      ).close,
    );
    sockets["no socket"] = `${dir}/none.sock`;
    try {
      await fc.assert(
        fc.asyncProperty(
          envArb,
          stdinArb,
          fc.constantFrom(...Object.keys(sockets)),
          async (env, input, agent) => {
            // Without a timeout in the config, the default 30 s would make a hang slow, not wrong.
            fc.pre(agent !== "hangs" || input.timeout || env.CNI_COMMAND === "VERSION");
            const r = await plugin({ ...env, KNITTER_AGENT_SOCKET: sockets[agent] }, input.text);
            assert.ok(r.code === 0 || r.code === 1, `exit ${r.code}`);
            if (r.code === 1) {
              assert.ok(Number.isInteger(r.json.code) && typeof r.json.msg === "string");
              assert.ok(typeof r.json.cniVersion === "string");
            }
            if (r.code === 0 && env.CNI_COMMAND !== "DEL") {
              assert.ok(r.json !== undefined || env.CNI_COMMAND !== "ADD");
            }
          },
        ),
        { numRuns: runs },
      );
    } finally {
      for (const close of closers) await close();
    }
  });
});
