import assert from "node:assert/strict";
import { CommandError, onRun, run, type RunResult, start } from "./run.ts";

Deno.test("run captures stdout, trimmed stderr, exit code and duration", async () => {
  const result = await run(["sh", "-c", "echo out; echo '  err  ' >&2"]);
  assert.equal(result.code, 0);
  assert.equal(result.stdout, "out\n");
  assert.equal(result.stderr, "err");
  assert.deepEqual(result.argv, ["sh", "-c", "echo out; echo '  err  ' >&2"]);
  assert.ok(result.ms >= 0);
});

Deno.test("run throws a CommandError naming the command, exit code and stderr", async () => {
  const script = "echo 'RTNETLINK answers: File exists' >&2; exit 2";
  const err = await failure(run(["sh", "-c", script]));
  assert.ok(err instanceof CommandError);
  assert.equal(err.message, `"sh -c '${script}'" failed (exit 2): RTNETLINK answers: File exists`);
  assert.equal(err.result.code, 2);
  assert.equal(err.result.stderr, "RTNETLINK answers: File exists");
});

Deno.test("run with check: false returns the failure", async () => {
  const result = await run(["sh", "-c", "exit 3"], { check: false });
  assert.equal(result.code, 3);
});

Deno.test("run feeds stdin and adds env", async () => {
  const result = await run(["sh", "-c", 'cat; echo "$KT_VALUE"'], {
    stdin: "line one\nline two\n",
    env: { KT_VALUE: "from-env" },
  });
  assert.equal(result.stdout, "line one\nline two\nfrom-env\n");
});

Deno.test("run streams a large stdin and stdout at once", async () => {
  const text = "0123456789abcdef\n".repeat(1 << 16);
  const result = await run(["cat"], { stdin: text });
  assert.equal(result.stdout.length, text.length);
});

Deno.test("run ignores a command that does not read its stdin", async () => {
  const result = await run(["true"], { stdin: "x".repeat(1 << 20) });
  assert.equal(result.code, 0);
});

Deno.test("a missing binary names it and the Debian package to install", async () => {
  await assert.rejects(
    run(["/nonexistent/ip", "link"]),
    (err: Error) => {
      assert.ok(err instanceof CommandError);
      assert.match(
        err.message,
        /"\/nonexistent\/ip" not found; install the Debian package "iproute2"/,
      );
      return true;
    },
  );
  await assert.rejects(run(["kt-no-such-binary"]), /"kt-no-such-binary" not found\)/);
});

Deno.test("a missing binary inside a netns path is reported the same way", async () => {
  await assert.rejects(
    run(["/nonexistent/ovs-vsctl"], { netns: `/proc/${Deno.pid}/ns/net` }),
    /"\/nonexistent\/ovs-vsctl" not found; install the Debian package "openvswitch-switch"/,
  );
});

Deno.test("run with timeoutMs kills the command", async () => {
  const started = performance.now();
  await assert.rejects(run(["sleep", "10"], { timeoutMs: 100 }), /timed out after 100 ms/);
  assert.ok(performance.now() - started < 5000);
});

Deno.test("run enters a netns by path (nsenter) and by name (ip netns exec)", async () => {
  const own = await run(["readlink", "/proc/self/ns/net"]);
  const byPath = await run(["readlink", "/proc/self/ns/net"], {
    netns: `/proc/${Deno.pid}/ns/net`,
  });
  assert.equal(byPath.argv[0], "nsenter");
  assert.equal(byPath.stdout, own.stdout);

  const name = `kt-${crypto.randomUUID().slice(0, 4)}-run`;
  await run(["ip", "netns", "add", name]);
  try {
    const byName = await run(["readlink", "/proc/self/ns/net"], { netns: name });
    assert.deepEqual(byName.argv.slice(0, 4), ["ip", "netns", "exec", name]);
    assert.notEqual(byName.stdout, own.stdout);
    await assert.rejects(
      run(["kt-no-such-binary"], { netns: name }),
      /"kt-no-such-binary" not found\)/,
    );
  } finally {
    await run(["ip", "netns", "del", name]);
  }
});

Deno.test("onRun hooks see every command, also failures, until removed", async () => {
  const seen: RunResult[] = [];
  const stop = onRun((r) => seen.push(r));
  const broken = onRun(() => {
    throw new Error("a broken hook");
  });
  try {
    await run(["true"]);
    await run(["false"], { check: false });
    await assert.rejects(run(["kt-no-such-binary"]));
  } finally {
    stop();
    broken();
  }
  await run(["true"]);
  assert.deepEqual(seen.map((r) => [r.argv[0], r.code]), [
    ["true", 0],
    ["false", 1],
    ["kt-no-such-binary", 127],
  ]);
});

Deno.test("start runs the command at once and feeds it later; its ms is the wait", async () => {
  const marker = await Deno.makeTempFile();
  try {
    // The command's first step runs before any input is given.
    const cmd = start(["sh", "-c", `echo started > ${marker}; cat`]);
    for (let i = 0; i < 200 && (await Deno.readTextFile(marker)) === ""; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(await Deno.readTextFile(marker), "started\n");
    await new Promise((r) => setTimeout(r, 300));
    const result = await cmd.finish("fed later\n");
    assert.equal(result.stdout, "fed later\n");
    assert.ok(result.ms < 300, `ms counts from finish(), not from the start: ${result.ms}`);
    await assert.rejects(cmd.finish("again"), /already finished or abandoned/);
    await cmd.abandon(); // after finish: nothing to do
  } finally {
    await Deno.remove(marker);
  }
});

Deno.test("send gives a started command lines it works on before the rest comes; a command that has exited is no error until finish", async () => {
  const marker = await Deno.makeTempFile();
  try {
    // Each line is run as it arrives (as ip -batch does), the input staying open.
    const cmd = start(["sh", "-c", `while read l; do echo "$l" >> ${marker}; done; echo done`]);
    await cmd.send("first\n");
    for (let i = 0; i < 200 && (await Deno.readTextFile(marker)) === ""; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(await Deno.readTextFile(marker), "first\n", "run before the input ends");
    const result = await cmd.finish("second\n");
    assert.equal(await Deno.readTextFile(marker), "first\nsecond\n");
    assert.equal(result.stdout, "done\n");
    assert.throws(() => cmd.send("late"), /already finished or abandoned/);
  } finally {
    await Deno.remove(marker);
  }
  const gone = start(["sh", "-c", "exit 3"], { check: false });
  await new Promise((r) => setTimeout(r, 100));
  await gone.send("nobody reads this\n");
  assert.equal((await gone.finish("")).code, 3);
});

Deno.test("a started command fails like run: CommandError with stderr, or check: false", async () => {
  const script = "cat >/dev/null; echo 'Command failed -:2' >&2; exit 1";
  const err = await failure(start(["sh", "-c", script]).finish("a\nb\n"));
  assert.ok(err instanceof CommandError);
  assert.equal(err.result.stderr, "Command failed -:2");
  const result = await start(["sh", "-c", script], { check: false }).finish("");
  assert.equal(result.code, 1);
  assert.throws(() => start(["kt-no-such-binary"]), /"kt-no-such-binary" not found\)/);
});

Deno.test("abandon kills a started command that waits for input, once", async () => {
  const seen: RunResult[] = [];
  const stop = onRun((r) => seen.push(r));
  try {
    const cmd = start(["cat"]);
    await cmd.abandon();
    await cmd.abandon();
    await assert.rejects(cmd.finish("late"), /already finished or abandoned/);
  } finally {
    stop();
  }
  assert.deepEqual(seen, [], "an abandoned command ran nothing anyone waited for");
});

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error("expected a failure");
}

Deno.test("printed says when a started command's first output came, while its input is still open; false when it ended without", async () => {
  // As ip -batch: a line whose output tells that the lines before it are done.
  const cmd = start(["sh", "-c", "read a; echo made; read b; echo rest"]);
  await cmd.send("first\n");
  assert.equal(await cmd.printed(), true, "before its input ends");
  const result = await cmd.finish("second\n");
  assert.equal(result.stdout, "made\nrest\n", "the whole output, as finish always gave it");
  const silent = start(["sh", "-c", "read a; exit 2"], { check: false });
  await silent.send("x\n");
  assert.equal(await silent.printed(), false);
  assert.equal((await silent.finish("")).code, 2);
  const killed = start(["cat"]);
  await killed.abandon();
  assert.equal(await killed.printed(), false);
});
