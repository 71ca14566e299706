/**
 * Every command in README.md and in docs/{architecture,concepts,operating}.md is run or checked
 * here, so the docs cannot drift. A fenced block in `text` is a picture or sample output and is
 * not run. Every other block carries a marker on a line of its own above it,
 * `<!-- test: MODE -->`; a block without one fails the test. The modes:
 *
 *   quick-start    `make demo` runs for real, as written, plus DEMO_DIR=<a temp dir>; its stack
 *                  stays up for the blocks below. `make test` cannot run inside the tests it runs:
 *                  `make -n test` must resolve to setup and `deno task ci`, and `.ci/run` (what
 *                  CI runs) must run `make test`.
 *   demo           run in document order (README first, then docs/), in one bash session with
 *                  -e -o pipefail, from the repository root, against that stack. The one change
 *                  made to the text is `.state/demo` -> the temp dir.
 *   cni-config     a JSON conflist: a pod on the demo's node n1 is ADDed, CHECKed and DELeted
 *                  through it, each plugin of the list in turn, as a container runtime does.
 *   demo-teardown  run after every `demo` block; then nothing of the stack may remain.
 *   dry-run        `make` targets too slow for a test (the benchmarks): `make -n` must resolve.
 *   cluster        needs a Kubernetes cluster, which CI lacks: for `kubectl apply -k DIR`,
 *                  DIR/kustomization.yaml and every file under its `resources:` must exist.
 *
 * The demo's own "explore" hints (scripts/demo.ts) must each appear in a `demo` block, so they
 * are run here too.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { exploreCommands } from "../scripts/demo.ts";
import type { Manifest } from "../scripts/stack.ts";
import { type Attachment, CniRuntime, type ConfList } from "./support/cni_runtime.ts";
import { makeDemo, output, ROOT, stackRemains } from "./support/demo.ts";

const DOCS = ["README.md", "docs/architecture.md", "docs/concepts.md", "docs/operating.md"];
const MODES = ["quick-start", "demo", "cni-config", "demo-teardown", "dry-run", "cluster"];
const DEMO_DIR = ".state/demo";

interface Block {
  file: string;
  line: number;
  lang: string;
  mode: string;
  text: string;
}

/** Fenced blocks with the marker above each (blank lines between are allowed). */
function blocksOf(file: string, markdown: string): Block[] {
  const lines = markdown.split("\n");
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    assert.ok(end > i, `${file}:${i + 1}: the block is never closed`);
    let k = i - 1;
    while (k >= 0 && lines[k].trim() === "") k--;
    const marker = /^<!-- test: (\S+) -->$/.exec(lines[k] ?? "");
    out.push({
      file,
      line: i + 1,
      lang: open[1],
      mode: marker?.[1] ?? "",
      text: lines.slice(i + 1, end).join("\n"),
    });
    i = end;
  }
  return out;
}

async function allBlocks(): Promise<Block[]> {
  const out: Block[] = [];
  for (const f of DOCS) out.push(...blocksOf(f, await Deno.readTextFile(`${ROOT}/${f}`)));
  return out;
}

/** Command lines of a shell block: comments dropped, `\` continuations joined. */
function commands(text: string): string[] {
  return text.replace(/\\\n/g, " ").split("\n").map((l) => l.replace(/\s+#.*$/, "").trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

function where(b: Block): string {
  return `${b.file}:${b.line}`;
}

Deno.test("readme: every block of the README and docs is a picture or marked with how it is tested", async () => {
  const blocks = await allBlocks();
  assert.ok(blocks.length > 5, "the README has command blocks");
  for (const b of blocks) {
    if (b.lang === "text") continue;
    assert.ok(MODES.includes(b.mode), `${where(b)}: a \`${b.lang}\` block without a test marker`);
    if (b.mode === "cni-config") assert.equal(b.lang, "json", where(b));
    else assert.equal(b.lang, "sh", `${where(b)}: a ${b.mode} block is \`sh\``);
  }
  const demo = blocks.filter((b) => b.mode === "demo").map((b) => b.text).join("\n");
  for (const { commands: cs } of exploreCommands(DEMO_DIR)) {
    for (const c of cs) assert.ok(demo.includes(c), `the demo's hint "${c}" is in a demo block`);
  }
});

Deno.test("readme: make test, the benchmarks and the cluster commands resolve", async () => {
  const blocks = await allBlocks();
  const quick = blocks.filter((b) => b.mode === "quick-start").flatMap((b) => commands(b.text));
  assert.deepEqual(quick.toSorted(), ["make demo", "make test"], "the quick start's two commands");

  const test = await run(["make", "--no-print-directory", "-n", "-C", ROOT, "test"]);
  assert.match(test.stdout, /scripts\/setup\.sh/);
  assert.match(test.stdout, /deno task ci$/m);
  assert.match(await Deno.readTextFile(`${ROOT}/.ci/run`), /^make test$/m, "CI runs make test");

  for (const b of blocks.filter((b) => b.mode === "dry-run")) {
    for (const c of commands(b.text)) {
      const argv = c.split(/\s+/);
      assert.equal(argv[0], "make", `${where(b)}: a dry-run block holds make commands: ${c}`);
      const r = await run(["make", "-n", "-C", ROOT, ...argv.slice(1)], { check: false });
      assert.equal(r.code, 0, `${where(b)}: make -n ${argv.slice(1).join(" ")}: ${r.stderr}`);
    }
  }

  for (const b of blocks.filter((b) => b.mode === "cluster")) {
    for (const c of commands(b.text)) {
      const m = /^kubectl apply -k (\S+)$/.exec(c);
      assert.ok(m, `${where(b)}: a cluster block holds kubectl apply -k: ${c}`);
      const dir = `${ROOT}/${m[1].replace(/\/$/, "")}`;
      const kustomization = await Deno.readTextFile(`${dir}/kustomization.yaml`);
      for (const file of resourcesOf(kustomization)) {
        assert.ok(await exists(`${dir}/${file}`), `${where(b)}: ${m[1]} lists ${file}`);
      }
    }
  }
});

/** The items of the top-level `resources:` list of a kustomization. */
function resourcesOf(yaml: string): string[] {
  const lines = yaml.split("\n");
  const start = lines.findIndex((l) => /^resources:\s*$/.test(l));
  assert.ok(start >= 0, "the kustomization has resources");
  const out: string[] = [];
  for (const l of lines.slice(start + 1)) {
    const item = /^\s+-\s+(\S+)\s*$/.exec(l);
    if (!item) break;
    out.push(item[1]);
  }
  return out;
}

Deno.test("readme: make demo, then every demo command and the CNI config against its stack, then its teardown", async (t) => {
  const blocks = await allBlocks();
  const tmp = await Deno.makeTempDir({ prefix: "kt-readme-" });
  const dir = `${tmp}/demo`;
  const local = (text: string) => text.replaceAll(DEMO_DIR, dir);
  try {
    const demo = await makeDemo(dir, []);
    assert.equal(demo.code, 0, output(demo));
    const m: Manifest = JSON.parse(await Deno.readTextFile(`${dir}/stack.json`));

    await t.step("the demo blocks, in order, in one shell", async () => {
      const script = blocks.filter((b) => b.mode === "demo").map((b) =>
        `echo '### ${where(b)}' >&2\n${local(b.text)}`
      ).join("\n");
      const r = await run(["bash", "-e", "-o", "pipefail", "-x", "-c", `cd '${ROOT}'\n${script}`], {
        check: false,
        env: { NO_COLOR: "1", INIT_CWD: ROOT },
        timeoutMs: 120_000,
      });
      assert.equal(
        r.code,
        0,
        `a README/docs command failed (the last ### names its block):\n${output(r)}`,
      );
      // What the blocks say they show.
      assert.match(r.stdout, /no reply, as expected/, "tenant-b does not reach tenant-a");
      assert.match(r.stdout, /net2\s+\S+\s+10\.30\.0\.\d+\/24/, "attach gave edge a VLAN address");
      assert.match(r.stdout, /"code":7/, "the pod asking for a missing network gets CNI code 7");
    });

    await t.step("the CNI config blocks attach a pod through the plugins they list", async () => {
      const node = m.nodes[0];
      const runtime = new CniRuntime(node.netns, node.agentSocket);
      for (const [i, b] of blocks.filter((b) => b.mode === "cni-config").entries()) {
        const list: ConfList = JSON.parse(b.text);
        const name = `${node.netns}-readme${i}`;
        await run(["ip", "netns", "add", name]);
        const att: Attachment = {
          containerId: `readme${i}`,
          netns: `/var/run/netns/${name}`,
          ifName: "eth0",
          args: {
            IgnoreUnknown: "1",
            K8S_POD_NAMESPACE: "tenant-a",
            K8S_POD_NAME: `readme${i}`,
          },
        };
        const add = await runtime.add(list, att);
        assert.equal(add.code, 0, `${where(b)}: ADD: ${JSON.stringify(add.out)} ${add.stderr}`);
        const inPod = add.out.interfaces.filter((x: { sandbox?: string }) => x.sandbox);
        assert.ok(inPod.length >= 1, `${where(b)}: the result names the pod's interfaces`);
        const check = await runtime.check(list, att);
        assert.equal(check.code, 0, `${where(b)}: CHECK: ${JSON.stringify(check.out)}`);
        const del = await runtime.del(list, att);
        assert.equal(del.code, 0, `${where(b)}: DEL: ${JSON.stringify(del.out)}`);
        await run(["ip", "netns", "del", name]);
      }
    });

    await t.step("the teardown leaves nothing of the stack", async () => {
      for (const b of blocks.filter((b) => b.mode === "demo-teardown")) {
        const r = await run([
          "bash",
          "-e",
          "-o",
          "pipefail",
          "-c",
          `cd '${ROOT}'\n${local(b.text)}`,
        ], {
          check: false,
          env: { NO_COLOR: "1" },
        });
        assert.equal(r.code, 0, `${where(b)}:\n${output(r)}`);
      }
      assert.deepEqual(await stackRemains(m), [], "nothing of the demo's stack is left");
    });
  } finally {
    if (await exists(`${dir}/stack.json`)) {
      await run([Deno.execPath(), "run", "-A", `${ROOT}/scripts/stack.ts`, "down", "--dir", dir], {
        check: false,
      });
    }
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}
