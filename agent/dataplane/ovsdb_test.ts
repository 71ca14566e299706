import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { ovsPid, startSimNode } from "../../devstack/sim_node.ts";
import { Ovs } from "./ovs.ts";
import { JsonSplitter, OvsdbClient } from "./ovsdb.ts";
import { PortPlugger } from "./port_plugger.ts";

Deno.test("JsonSplitter cuts concatenated JSON texts, whatever the chunking", () => {
  const texts = ['{"a":"}{","b":[1,{"c":"\\"]"}]}', '[1,2,"x"]', '{"id":3,"result":{}}'];
  const stream = texts.join("\n");
  for (const size of [1, 2, 7, stream.length]) {
    const splitter = new JsonSplitter();
    const out: string[] = [];
    for (let i = 0; i < stream.length; i += size) {
      out.push(...splitter.push(stream.slice(i, i + size)));
    }
    assert.deepEqual(out.map((t) => JSON.parse(t)), texts.map((t) => JSON.parse(t)));
  }
});

Deno.test("OvsdbClient and PortPlugger against a private Open vSwitch", async (t) => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "ovsdb", cleanup });
  const ovs = new Ovs(node.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  const names = Array.from({ length: 20 }, (_, i) => `p${i}`);
  await run(["ip", "-n", node.netns, "-batch", "-"], {
    stdin: names.map((n) => `link add ${n} up type veth peer name ${n}-x\n`).join(""),
  });
  const plugger = new PortPlugger(node.ovs.dbSock, "br-int");
  cleanup.defer(() => Promise.resolve(plugger.close()));
  const addVeth = (name: string) =>
    run([
      "ip",
      "-n",
      node.netns,
      "link",
      "add",
      name,
      "up",
      "type",
      "veth",
      "peer",
      "name",
      `${name}-x`,
    ]);

  await t.step("concurrent adds share transactions and get the ofports asked for", async () => {
    const wanted = names.map(() => plugger.takeOfport());
    const got = await Promise.all(
      names.map((name, i) =>
        plugger.add([{ name, ofportRequest: wanted[i], externalIds: { "knitter-port": `x-${i}` } }])
      ),
    );
    assert.deepEqual(got.map((m, i) => m.get(names[i])), wanted);
    // What ovs-vsctl sees is what the switch uses.
    const listed = new Map((await ovs.listPorts("br-int")).map((p) => [p.name, p]));
    for (const [i, name] of names.entries()) {
      assert.equal(listed.get(name)?.ofport, wanted[i]);
      assert.equal(listed.get(name)?.externalIds["knitter-port"], `x-${i}`);
    }
    // Adding again (a retried ADD) changes nothing; beside a new port, that one is added.
    assert.equal(
      (await plugger.add([{ name: "p0", ofportRequest: wanted[0] }])).get("p0"),
      wanted[0],
    );
    await addVeth("mixed");
    const fresh = plugger.takeOfport();
    const client = new OvsdbClient(node.ovs.dbSock!);
    cleanup.defer(() => Promise.resolve(client.close()));
    const both = await client.addPorts("br-int", [
      { name: "p0", ofportRequest: wanted[0] },
      { name: "mixed", ofportRequest: fresh },
    ]);
    assert.deepEqual([...both].map(([n, st]) => [n, st.ofport]), [["p0", wanted[0]], [
      "mixed",
      fresh,
    ]]);
    await plugger.remove(["mixed"]);
  });

  await t.step("label replaces a port's external IDs; an unknown port is an error", async () => {
    await plugger.label("p2", { "knitter-port": "x-2", "knitter-network": "owner/net" });
    const p2 = (await ovs.listPorts("br-int")).find((p) => p.name === "p2");
    assert.deepEqual(p2?.externalIds, { "knitter-port": "x-2", "knitter-network": "owner/net" });
    await assert.rejects(
      plugger.label("never-there", {}),
      /Cannot set the external IDs of never-there on "br-int": no interface "never-there"/,
    );
  });

  await t.step("a taken ofport or a missing device is an error naming the port", async () => {
    const taken = (await ovs.listPorts("br-int")).find((p) => p.name === "p1")!.ofport;
    await addVeth("late");
    await assert.rejects(
      plugger.add([{ name: "late", ofportRequest: taken }]),
      new RegExp(`late got ofport \\d+, not ${taken}`),
    );
    await assert.rejects(
      plugger.add([{ name: "nosuchdev" }]),
      /nosuchdev: could not open network device nosuchdev/,
    );
    await plugger.remove(["late", "nosuchdev"]);
  });

  await t.step("remove deletes ports, skips unknown names, and is idempotent", async () => {
    await plugger.remove([...names.slice(0, 10), "never-there"]);
    await plugger.remove(names.slice(0, 10));
    const left = (await ovs.listPorts("br-int")).map((p) => p.name).sort();
    assert.deepEqual(left, names.slice(10).sort());
  });

  await t.step(
    "a removal answers once the database has it; the name added again gets the new device",
    async () => {
      const [old] = (await ovs.listPorts("br-int")).filter((p) => p.name === "p10");
      const vswitchd = await ovsPid(node, "vswitchd");
      Deno.kill(vswitchd, "SIGSTOP");
      let again: Promise<Map<string, number>>;
      try {
        // ovs-vswitchd lets a port go at its own pace (on the userspace datapath one RCU grace
        // period per port): DEL does not wait for it, the database no longer has the port.
        await plugger.remove(["p10"]);
        assert.ok(!(await ovs.listPorts("br-int")).some((p) => p.name === "p10"));
        // A new device of the same name, plugged with the same ofport (an agent restarted meanwhile
        // may ask for it): it must not be taken for the old one, whose device is gone.
        await run(["ip", "-n", node.netns, "link", "del", "p10"]);
        await addVeth("p10");
        again = plugger.add([{ name: "p10", ofportRequest: old.ofport }]);
      } finally {
        Deno.kill(vswitchd, "SIGCONT");
      }
      assert.equal((await again).get("p10"), old.ofport);
      const link = JSON.parse(
        (await run(["ip", "-n", node.netns, "-j", "link", "show", "p10"])).stdout,
      );
      const ifindex = await ovs.vsctl(["get", "Interface", "p10", "ifindex"]);
      assert.equal(Number(ifindex), link[0].ifindex, "the switch uses the new device");
    },
  );

  await t.step(
    "a bridge that does not exist, a server that is not there: clear errors",
    async () => {
      const other = new PortPlugger(node.ovs.dbSock, "br-missing");
      cleanup.defer(() => Promise.resolve(other.close()));
      await assert.rejects(other.add([{ name: "solo" }]), /Bridge "br-missing" does not exist/);
      const nowhere = new OvsdbClient(`${node.stateDir}/no-such.sock`);
      await assert.rejects(
        nowhere.addPorts("br-int", [{ name: "p19" }]),
        /Cannot reach ovsdb-server at .*no-such\.sock.*is Open vSwitch running/,
      );
    },
  );
});
