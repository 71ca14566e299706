import assert from "node:assert/strict";
import { run, start } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { type SimNode, startSimNode } from "../../devstack/sim_node.ts";
import { Ovs } from "./ovs.ts";

/** `count` veth pairs in the node's netns (one exec): "NAMEi" to plug into OVS, "NAMEi-p" spare. */
async function veths(node: SimNode, name: string, count: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `${name}${i}`);
  const stdin = names
    .map((n) => `link add ${n} up type veth peer name ${n}-p\nlink set ${n}-p up\n`)
    .join("");
  await run(["ip", "-n", node.netns, "-batch", "-"], { stdin });
  return names;
}

Deno.test("Ovs against a private Open vSwitch", async (t) => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "ovs", cleanup });
  const ovs = new Ovs(node.ovs);

  await t.step("ensureBridge is idempotent and sets datapath and fail mode", async () => {
    for (let i = 0; i < 2; i++) {
      await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
    }
    assert.equal(await ovs.vsctl(["list-br"]), "br-int\n");
    assert.equal(await ovs.vsctl(["get", "Bridge", "br-int", "fail_mode"]), "secure\n");
    assert.equal(await ovs.vsctl(["get", "Bridge", "br-int", "datapath_type"]), "netdev\n");
  });

  await t.step("addPorts: 1 port, then 50 in one transaction, with ofports", async () => {
    const [single] = await veths(node, "s", 1);
    let started = performance.now();
    const one = await ovs.addPorts("br-int", [{ name: single, externalIds: { pod: "a" } }]);
    const oneMs = performance.now() - started;
    assert.ok(one.get(single)! > 0);

    const names = await veths(node, "m", 50);
    const ports = names.map((name, i) => ({
      name,
      externalIds: { "iface-id": `port-${i}`, "odd key:=": 'a value, with "quotes"' },
      ...(i < 5 ? { ofportRequest: 200 + i } : {}),
      ...(i % 2 ? { tag: 100 + i } : {}),
    }));
    started = performance.now();
    const ofports = await ovs.addPorts("br-int", ports);
    const fiftyMs = performance.now() - started;
    assert.equal(ofports.size, 50);
    assert.equal(new Set(ofports.values()).size, 50);
    for (const [i, name] of names.entries()) {
      assert.ok(ofports.get(name)! > 0, name);
      if (i < 5) assert.equal(ofports.get(name), 200 + i);
    }
    assert.equal(await ovs.vsctl(["get", "Port", "m1", "tag"]), "101\n");
    // Running it again changes nothing and answers the same.
    assert.deepEqual(await ovs.addPorts("br-int", ports), ofports);
    console.log(
      `addPorts: 1 port ${oneMs.toFixed(1)} ms; 50 ports ${fiftyMs.toFixed(1)} ms ` +
        `(${(fiftyMs / 50).toFixed(1)} ms per port)`,
    );
  });

  await t.step("listPorts shows ofports and external IDs of this bridge only", async () => {
    await ovs.ensureBridge("br-other", { datapathType: "netdev" });
    const [other] = await veths(node, "o", 1);
    await ovs.addPorts("br-other", [{ name: other, externalIds: { pod: "elsewhere" } }]);
    const ports = await ovs.listPorts("br-int");
    assert.equal(ports.length, 51);
    const m7 = ports.find((p) => p.name === "m7");
    assert.deepEqual(m7?.externalIds, {
      "iface-id": "port-7",
      "odd key:=": 'a value, with "quotes"',
    });
    assert.ok(m7!.ofport > 0);
    assert.ok(!ports.some((p) => p.name === other || p.name === "br-int"));
  });

  await t.step("delPorts removes many in one transaction and tolerates missing ones", async () => {
    const gone = Array.from({ length: 25 }, (_, i) => `m${i}`);
    await ovs.delPorts("br-int", [...gone, "never-there"]);
    await ovs.delPorts("br-int", gone);
    const left = (await ovs.listPorts("br-int")).map((p) => p.name);
    assert.equal(left.length, 26);
    assert.ok(!left.some((name) => gone.includes(name)));
  });

  await t.step("a port OVS cannot attach is an error naming it", async () => {
    await assert.rejects(
      ovs.addPorts("br-int", [{ name: "nosuchdev" }]),
      /Cannot add port nosuchdev to "br-int": nosuchdev: could not open network device nosuchdev \(No such device\)/,
    );
    await ovs.delPorts("br-int", ["nosuchdev"]);
    await assert.rejects(ovs.addPorts("br-missing", [{ name: "s0" }]), /br-missing/);
  });

  await t.step("ensureVxlanPort and ensurePatchPair get their ofports, idempotently", async () => {
    for (let i = 0; i < 2; i++) {
      await ovs.ensureVxlanPort("br-int", "vx0", 100);
      await ovs.ensurePatchPair("br-int", "pi-x", "br-other", "pp-x", 101);
    }
    assert.equal(await ovs.vsctl(["get", "Interface", "vx0", "ofport"]), "100\n");
    assert.equal(await ovs.vsctl(["get", "Interface", "vx0", "options:remote_ip"]), "flow\n");
    assert.equal(await ovs.vsctl(["get", "Interface", "pi-x", "ofport"]), "101\n");
    assert.equal(await ovs.vsctl(["get", "Interface", "pp-x", "options:peer"]), "pi-x\n");
    // The outer header copies the inner DSCP (a network's marking), also on a port made before
    // the option existed: an agent upgraded over an existing bridge sets it.
    assert.equal(await ovs.vsctl(["get", "Interface", "vx0", "options:tos"]), "inherit\n");
    await ovs.vsctl(["remove", "Interface", "vx0", "options", "tos"]);
    await ovs.ensureVxlanPort("br-int", "vx0", 100);
    assert.equal(await ovs.vsctl(["get", "Interface", "vx0", "options:tos"]), "inherit\n");
    const [late] = await veths(node, "late", 1);
    await assert.rejects(
      ovs.addPorts("br-int", [{ name: late, ofportRequest: 100 }]),
      /late0 got ofport \d+, not 100 \(taken\?\)/,
    );
    await ovs.delPorts("br-int", [late]);
  });

  const flowA = "cookie=0x11,table=0,priority=10,in_port=200,actions=output:100";
  const flowB = "table=0,priority=10,in_port=100,tun_id=0x1e61,actions=output:200";
  const flowC = "table=1,priority=5,ip,nw_dst=10.0.0.1,actions=drop";

  await t.step("bundle adds and deletes; dumpFlows is normalized and sorted", async () => {
    await ovs.bundle("br-int", [flowA, flowB, flowC], []);
    const flows = await ovs.dumpFlows("br-int");
    assert.deepEqual(flows, [
      "cookie=0x11, priority=10,in_port=200 actions=output:100",
      "priority=10,tun_id=0x1e61,in_port=100 actions=output:200",
      "table=1, priority=5,ip,nw_dst=10.0.0.1 actions=drop",
    ]);
    assert.ok(!flows.some((f) => /duration|n_packets|n_bytes|idle_age/.test(f)));
    assert.deepEqual(await ovs.dumpFlows("br-int", "table=1"), [flows[2]]);
    // Deleting by a full flow (cookie, actions) as it was added, or as it was dumped.
    await ovs.bundle("br-int", [], [flowA, flows[2]]);
    assert.deepEqual(await ovs.dumpFlows("br-int"), [flows[1]]);
    await ovs.bundle("br-int", [flowA, flowC], []);
  });

  await t.step("a bad bundle applies nothing and names the line", async () => {
    const before = await ovs.dumpFlows("br-int");
    const added = "table=0,priority=20,ip,nw_dst=10.0.0.2,actions=drop";
    await assert.rejects(
      ovs.bundle("br-int", [added, "table=0,priority=20,ip,nw_dst=10.0.0.3,actions=bogus"], [
        flowA,
      ]),
      /nothing was applied\) at line 3 "flow add table=0,priority=20,ip,nw_dst=10\.0\.0\.3,actions=bogus": .*unknown action bogus/,
    );
    assert.deepEqual(await ovs.dumpFlows("br-int"), before);
    // Refused by the switch rather than by ovs-ofctl's parser: the failing flow mod is quoted.
    await assert.rejects(
      ovs.bundle("br-int", [added, "table=0,priority=20,ip,nw_dst=10.0.0.4,actions=group:77"], [
        flowA,
      ]),
      /nothing was applied\): .*OFPBAC_BAD_OUT_GROUP.*group:77/s,
    );
    assert.deepEqual(await ovs.dumpFlows("br-int"), before);
  });

  await t.step(
    "select groups go in one bundle with the flows that name them, before them; stale ones after",
    async () => {
      const group = (id: number, to: string) =>
        `group_id=${id},type=select,selection_method=hash,fields(ip_src,nw_proto,tcp_src),` +
        `bucket=bucket_id:0,actions=ct(commit,table=26,zone=1,nat(dst=${to}:8080))`;
      const uses = (id: number) => `table=22,priority=100,ip,nw_dst=10.0.0.100,actions=group:${id}`;
      const before = await ovs.dumpFlows("br-int");
      // The group and the flow that names it: one bundle (a flow before its group is refused).
      await ovs.bundle("br-int", [uses(16)], [], {
        groups: { add: [group(16, "10.0.0.3")], modify: [], del: [] },
      });
      assert.deepEqual([...(await ovs.dumpGroups("br-int")).values()], [group(16, "10.0.0.3")]);
      // A refused bundle changes neither the groups nor the flows.
      await assert.rejects(
        ovs.bundle("br-int", ["table=22,priority=100,ip,nw_dst=10.0.0.101,actions=bogus"], [], {
          groups: { add: [group(17, "10.0.0.4")], modify: [group(16, "10.0.0.9")], del: [] },
        }),
        /nothing was applied/,
      );
      assert.deepEqual([...(await ovs.dumpGroups("br-int")).keys()], [16]);
      assert.equal((await ovs.dumpGroups("br-int")).get(16), group(16, "10.0.0.3"));
      // Changed in place, then gone with the flow that named it, in one bundle.
      await ovs.bundle("br-int", [], [], {
        groups: { add: [], modify: [group(16, "10.0.0.4")], del: [] },
      });
      assert.equal((await ovs.dumpGroups("br-int")).get(16), group(16, "10.0.0.4"));
      await ovs.bundle("br-int", [], [uses(16)], { groups: { add: [], modify: [], del: [16] } });
      assert.deepEqual((await ovs.dumpGroups("br-int")).size, 0);
      assert.deepEqual(await ovs.dumpFlows("br-int"), before);
      // Replacing the table: groups first, flows, then the groups no flow names.
      await ovs.bundle("br-int", [...before.map(denormalize), uses(32)], [], {
        replaceAll: true,
        groups: { add: [group(32, "10.0.0.5")], modify: [], del: [] },
      });
      assert.deepEqual([...(await ovs.dumpGroups("br-int")).keys()], [32]);
      await ovs.bundle("br-int", before.map(denormalize), [], {
        replaceAll: true,
        groups: { add: [], modify: [], del: [32] },
      });
      assert.deepEqual((await ovs.dumpGroups("br-int")).size, 0);
      assert.deepEqual(await ovs.dumpFlows("br-int"), before);
    },
  );

  await t.step("bundle with replaceAll makes the table exactly the given flows", async () => {
    await ovs.bundle("br-int", [flowB, "table=2,priority=1,actions=drop"], [], {
      replaceAll: true,
    });
    assert.deepEqual(await ovs.dumpFlows("br-int"), [
      "priority=10,tun_id=0x1e61,in_port=100 actions=output:200",
      "table=2, priority=1 actions=drop",
    ]);
  });

  await t.step(
    "prestartBundles: bundles go through a waiting ovs-ofctl, close() ends it",
    async () => {
      const warm = new Ovs(node.ovs, { prestartBundles: true });
      try {
        assert.deepEqual(ofctlChildren(), [], "nothing waits before the first bundle");
        await warm.bundle("br-int", [flowC], []);
        const waiting = ofctlChildren();
        assert.equal(waiting.length, 1, "one ovs-ofctl waits for the next bundle");
        // The next bundle is fed to that very process, and another one starts for the one after.
        await warm.bundle("br-int", ["table=3,priority=1,actions=drop"], [flowC]);
        assert.ok(!ofctlChildren().includes(waiting[0]));
        assert.equal(ofctlChildren().length, 1);
        assert.deepEqual(await ovs.dumpFlows("br-int"), [
          "priority=10,tun_id=0x1e61,in_port=100 actions=output:200",
          "table=2, priority=1 actions=drop",
          "table=3, priority=1 actions=drop",
        ]);
        // A failing bundle through a waiting process fails as before, and the next one works.
        await assert.rejects(
          warm.bundle("br-int", ["table=0,priority=20,actions=bogus"], []),
          /nothing was applied\) at line 1 .*unknown action bogus/,
        );
        await warm.bundle("br-int", [], ["table=3,priority=1,actions=drop"]);
        assert.equal((await ovs.dumpFlows("br-int")).length, 2);
        // A waiting process killed from outside (an operator, the OOM killer) costs no bundle.
        const [victim] = ofctlChildren();
        Deno.kill(victim, "SIGKILL");
        await warm.bundle("br-int", ["table=4,priority=1,actions=drop"], []);
        assert.ok((await ovs.dumpFlows("br-int")).includes("table=4, priority=1 actions=drop"));
        await warm.bundle("br-int", [], ["table=4,priority=1,actions=drop"]);
      } finally {
        await warm.close();
      }
      assert.deepEqual(ofctlChildren(), [], "close() leaves no ovs-ofctl behind");
    },
  );

  await t.step(
    "a waiting ovs-ofctl whose input just ends (its agent died) changes nothing",
    async () => {
      const before = await ovs.dumpFlows("br-int");
      const orphan = start(
        ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "bundle", "br-int", "-"],
        {
          env: { OVS_RUNDIR: node.ovs.rundir! },
        },
      );
      const r = await orphan.finish("");
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(await ovs.dumpFlows("br-int"), before);
    },
  );
});

/** A dumped flow ("cookie=0x11, priority=10,… actions=…") as a line ovs-ofctl takes back. */
function denormalize(flow: string): string {
  return flow.replace(" actions=", ",actions=").replaceAll(", ", ",");
}

/** Pids of this process's ovs-ofctl children. */
function ofctlChildren(): number[] {
  const pids: number[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    let stat: string;
    try {
      stat = Deno.readTextFileSync(`/proc/${e.name}/stat`);
    } catch {
      continue; // exited meanwhile
    }
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (comm === "ovs-ofctl" && ppid === Deno.pid) pids.push(Number(e.name));
  }
  return pids;
}
