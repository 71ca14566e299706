/** The manager as a process: HTTPS, one process per store file, flags and configuration errors. */
import assert from "node:assert/strict";
import { type ManagerConfig, startManager } from "./mod.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const TOKEN = "server-test-admin-token-0123456789";

function config(dir: string, extra: Partial<ManagerConfig> = {}): ManagerConfig {
  return {
    listen: { hostname: "127.0.0.1", port: 0 },
    store: { path: `${dir}/manager.kv` },
    tokens: [{ token: TOKEN, scope: "admin" }],
    vniRanges: ["5000-16777215"],
    underlayMtu: 1500,
    logLevel: "error",
    ...extra,
  };
}

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-server-test-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function run(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "manager/main.ts",
      ...args,
    ],
    cwd: ROOT,
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function openssl(dir: string, args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  assert.equal(out.code, 0, `openssl ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
}

/** A throwaway CA and a server certificate for 127.0.0.1 signed by it. */
async function makeCertificates(dir: string): Promise<void> {
  await openssl(dir, [
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=knitter-test-ca",
    "-keyout",
    "ca-key.pem",
    "-out",
    "ca.pem",
  ]);
  await openssl(dir, [
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=127.0.0.1",
    "-keyout",
    "key.pem",
    "-out",
    "server.csr",
  ]);
  await Deno.writeTextFile(
    `${dir}/server.ext`,
    "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
  );
  await openssl(dir, [
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca-key.pem",
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    "server.ext",
    "-out",
    "cert.pem",
  ]);
}

Deno.test("manager serves HTTPS when given a certificate and key", async () => {
  await withDir(async (dir) => {
    await makeCertificates(dir);
    const m = await startManager(
      config(dir, { tls: { certFile: `${dir}/cert.pem`, keyFile: `${dir}/key.pem` } }),
    );
    const client = Deno.createHttpClient({ caCerts: [await Deno.readTextFile(`${dir}/ca.pem`)] });
    try {
      assert.match(m.url, /^https:\/\/127\.0\.0\.1:\d+$/);
      const r = await fetch(`${m.url}/api/v1/tenants`, {
        client,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(r.status, 200);
      const body = await r.json();
      assert.deepEqual(body.items.map((t: { name: string }) => t.name), ["admin"]);
    } finally {
      client.close();
      await m.shutdown();
    }
  });
});

Deno.test("the feed socket port serves TLS with the API's certificate", async () => {
  await withDir(async (dir) => {
    await makeCertificates(dir);
    const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const feedSocketPort = (free.addr as Deno.NetAddr).port;
    free.close();
    const m = await startManager(config(dir, {
      listen: { hostname: "127.0.0.1", port: 0, feedSocketPort },
      tls: { certFile: `${dir}/cert.pem`, keyFile: `${dir}/key.pem` },
    }));
    const caCerts = [await Deno.readTextFile(`${dir}/ca.pem`)];
    const client = Deno.createHttpClient({ caCerts });
    const conn = await Deno.connectTls({ hostname: "127.0.0.1", port: feedSocketPort, caCerts });
    try {
      const r = await fetch(`${m.url}/api/v1/feed`, {
        client,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      const { cursor } = await r.json();
      const head = `GET /api/v1/feed?after=${cursor}&stream=websocket HTTP/1.1\r\n` +
        "host: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n" +
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n" +
        `authorization: Bearer ${TOKEN}\r\n\r\n`;
      await conn.write(new TextEncoder().encode(head));
      const buffer = new Uint8Array(4096);
      const n = await conn.read(buffer);
      assert.match(new TextDecoder().decode(buffer.subarray(0, n ?? 0)), /^HTTP\/1\.1 101 /);
    } finally {
      conn.close();
      client.close();
      await m.shutdown();
    }
  });
});

Deno.test("a second manager process on the same store file is refused with a clear error", async () => {
  await withDir(async (dir) => {
    const m = await startManager(config(dir));
    try {
      const r = await run(["--store", `${dir}/manager.kv`, "--listen", "127.0.0.1:0"], {
        KNITTER_MANAGER_ADMIN_TOKEN: TOKEN,
      });
      assert.equal(r.code, 2);
      assert.match(r.stderr, /another process has it open/);
      assert.match(r.stderr, /One manager process per Deno KV file/);
      // The first manager is unharmed.
      const h = await fetch(`${m.url}/readyz`);
      assert.equal(h.status, 200);
      await h.body?.cancel();
    } finally {
      await m.shutdown();
    }
  });
});

Deno.test("manager --help prints usage and exits 0", async () => {
  const r = await run(["--help"]);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /Usage: /);
  assert.match(r.stdout, /KNITTER_MANAGER_ADMIN_TOKEN/);
});

Deno.test("manager without tokens refuses to start and says what to set", async () => {
  await withDir(async (dir) => {
    const r = await run(["--store", `${dir}/x.kv`]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /No API tokens configured/);
    assert.match(r.stderr, /KNITTER_MANAGER_ADMIN_TOKEN/);
  });
});

Deno.test("manager with an unknown flag says so and shows usage", async () => {
  const r = await run(["--bogus"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /bogus/);
  assert.match(r.stderr, /Usage: /);
});
