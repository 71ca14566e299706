/**
 * `make demo`, the README's main job, as CI runs it (with --down): it succeeds, its connectivity
 * matrix is what isolation promises (worked out here from the plan, not taken from the demo),
 * what it printed is what it measured, and nothing of its stack is left. And it refuses, saying
 * what to do, when it lacks root or programs.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { NETWORKS, PODS } from "../scripts/demo_plan.ts";
import {
  makeDemo,
  output,
  printedMatrix,
  readSummary,
  ROOT,
  stackRemains,
} from "./support/demo.ts";

Deno.test("make demo: every expectation holds, the printed matrix is the measured one, --down leaves nothing", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "kt-demo-" });
  const dir = `${tmp}/demo`;
  try {
    const r = await makeDemo(dir, ["--down", "--json", `${tmp}/summary.json`]);
    assert.equal(r.code, 0, output(r));
    const s = await readSummary(`${tmp}/summary.json`);
    assert.equal(s.ok, true);
    assert.equal(s.down, true);

    // The networks the plan asks for, with segment IDs from the right pools.
    const byName = new Map(s.networks.map((n) => [`${n.tenant}/${n.name}`, n]));
    for (const n of NETWORKS) {
      const got = byName.get(`${n.tenant}/${n.name}`);
      assert.ok(got, `network ${n.tenant}/${n.name} listed`);
      assert.equal(got.type, n.type);
      assert.equal(got.cidr, n.cidr);
      if (n.type === "vlan") assert.ok(got.segmentId! >= 100 && got.segmentId! <= 199);
      else assert.ok(got.segmentId! >= 1);
    }
    const control = byName.get("tenant-a/control")!;
    const other = byName.get("tenant-b/private")!;
    assert.equal(control.cidr, other.cidr, "two tenants, one CIDR");
    assert.notEqual(control.segmentId, other.segmentId, "but separate VNIs");

    // Every pod interface, one of them on a pod with two networks; addresses unique.
    const wanted = PODS.flatMap((p) => p.networks.map((n) => `${p.name}:${p.tenant}/${n}`));
    assert.deepEqual(s.endpoints.map((e) => `${e.pod}:${e.tenant}/${e.network}`), wanted);
    assert.ok(PODS.some((p) => p.networks.length === 2));
    assert.equal(new Set(s.endpoints.map((e) => e.address)).size, s.endpoints.length);

    // The matrix: every pair of interfaces of different pods, measured as expected.
    const pairs = s.endpoints.flatMap((a) =>
      s.endpoints.filter((b) => b.pod !== a.pod).map((b) => ({ a, b }))
    );
    assert.equal(s.matrix.length, pairs.length);
    for (const { a, b } of pairs) {
      const from = `${a.pod}/${a.ifName}`, to = `${b.pod}/${b.ifName}`;
      const cell = s.matrix.find((c) => c.from === from && c.to === to);
      assert.ok(cell, `${from} -> ${to} measured`);
      // tenant-a's router connects control and mgmt: pods reach each other through the gateways
      // their first interface's default route points at.
      const routed = ["control", "mgmt"].includes(a.network) &&
        ["control", "mgmt"].includes(b.network) && a.ifName === "eth0" && b.ifName === "eth0";
      const shouldReach = a.tenant === b.tenant && (a.network === b.network || routed);
      assert.equal(cell.expected, shouldReach, `${from} -> ${to} expectation`);
      assert.equal(cell.reached, shouldReach, `${from} -> ${to}: reached ${cell.reached}`);
      // Reaching means every protocol, with the payload back intact; isolation means none.
      for (const proto of ["icmp", "tcp", "udp"] as const) {
        assert.equal(cell[proto], shouldReach, `${from} -> ${to}: ${proto} ${cell[proto]}`);
      }
    }
    assert.equal(
      s.matrix.filter((c) => c.reached).length,
      16,
      "4 networks x 2 directions, and control <-> mgmt: 2 x 2 pods x 2 directions",
    );
    // Routed, with one TTL less: the router's rows reached across the two networks.
    assert.ok(s.matrix.some((c) => c.from === "edge/eth0" && c.to === "oam1/eth0" && c.reached));
    assert.equal(s.mismatches, 0);

    // What it printed is what it measured.
    const printed = printedMatrix(r.stdout);
    assert.equal(printed.size, s.matrix.length);
    for (const c of s.matrix) {
      assert.equal(printed.get(`${c.from}>${c.to}`), c.reached ? "✓" : "·", `${c.from}>${c.to}`);
    }
    assert.match(r.stdout, /\[6\/6\]/);
    assert.match(r.stdout, /every expectation held/);
    for (const n of NETWORKS) assert.match(r.stdout, new RegExp(`${n.tenant}\\s+${n.name}\\s`));

    assert.deepEqual(await stackRemains(s), [], "nothing of the demo's stack is left");
  } finally {
    if (await Deno.stat(`${dir}/stack.json`).then(() => true, () => false)) {
      await run([Deno.execPath(), "run", "-A", `${ROOT}/scripts/stack.ts`, "down", "--dir", dir], {
        check: false,
      });
    }
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});

Deno.test("make demo refuses without root, and names the programs it lacks; it starts nothing", async () => {
  const tmp = await Deno.makeTempDir({ prefix: "kt-demo-" });
  try {
    // The Makefile's check, as an unprivileged user (a copy: the checkout may not be readable).
    await Deno.copyFile(`${ROOT}/Makefile`, `${tmp}/Makefile`);
    await Deno.chmod(tmp, 0o755);
    const user = await run(
      ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "make", "-C", tmp, "demo"],
      { check: false },
    );
    assert.notEqual(user.code, 0);
    assert.match(user.stderr, /needs root/);
    assert.match(user.stderr, /sudo make demo/);

    // The demo's own check, with Open vSwitch and ping off the PATH.
    const bin = `${tmp}/bin`;
    await Deno.mkdir(bin);
    await Deno.symlink("/usr/bin/env", `${bin}/env`);
    const r = await run(
      [Deno.execPath(), "run", "-A", `${ROOT}/scripts/demo.ts`, "--dir", `${tmp}/demo`],
      { check: false, env: { PATH: bin, NO_COLOR: "1" } },
    );
    assert.equal(r.code, 1, output(r));
    assert.match(r.stderr, /ovs-vsctl.*not found/);
    assert.match(r.stderr, /apt-get install -y .*openvswitch-switch/);
    assert.match(r.stderr, /iputils-ping/);
    assert.ok(!(await Deno.stat(`${tmp}/demo`).then(() => true, () => false)), "no stack made");
  } finally {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
});
