import assert from "node:assert/strict";
import { CniError } from "@knitter/plugin/contract";
import { netnsIdNow, netnsProblem, podNetns } from "./netns.ts";

const NSFS = 4;
const own = { dev: NSFS, ino: 100, kind: "file" } as const;
const host = { dev: NSFS, ino: 1, kind: "file" } as const;

Deno.test("netnsProblem: only a network namespace other than the host's and the agent's will do", () => {
  const pod = { dev: NSFS, ino: 200, kind: "file" } as const;
  assert.equal(netnsProblem(pod, own, host), undefined);
  assert.equal(netnsProblem(pod, own, host, "net"), undefined);
  assert.equal(netnsProblem(pod, own, "denied"), undefined, "pid 1 unreadable: not compared");
  const cases: [Parameters<typeof netnsProblem>, RegExp][] = [
    [["missing", own, host], /^does not exist/],
    [["denied", own, host], /^cannot be read by the agent/],
    [[{ dev: 65024, ino: 7, kind: "file" }, own, host], /not a network namespace \(it is a file\)/],
    [[{ dev: 65024, ino: 8, kind: "directory" }, own, host], /\(it is a directory\)/],
    [[{ dev: NSFS, ino: 300, kind: "file" }, own, host, "uts"], /\(it is a uts namespace\)/],
    [[{ ...own }, own, host], /^is the agent's own network namespace/],
    [[{ ...host }, own, host], /^is the host's network namespace/],
  ];
  for (const [args, message] of cases) assert.match(netnsProblem(...args) ?? "", message);
});

Deno.test("podNetns: this process's own netns, a file, a directory and a missing path are code 4", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/f`;
    await Deno.writeTextFile(file, "");
    for (
      const [path, message] of [
        ["/proc/self/ns/net", /agent's own/],
        [`/proc/${Deno.pid}/ns/net`, /agent's own/],
        [`/proc/${Deno.pid}/ns/uts`, /uts namespace/],
        [file, /it is a file/],
        [dir, /it is a directory/],
        [`${dir}/none`, /does not exist/],
        [`${file}/below`, /does not exist/],
        ["", /CNI_NETNS is required/],
      ] as const
    ) {
      await assert.rejects(
        podNetns(path),
        (e) => e instanceof CniError && e.code === 4 && message.test(e.message),
        path,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("netnsIdNow: a netns path's identity, or missing", async () => {
  assert.match((await netnsIdNow("/proc/self/ns/net"))!, /^\d+:\d+$/);
  assert.equal(await netnsIdNow("/var/run/netns/knitter-no-such-netns-here"), "missing");
});
