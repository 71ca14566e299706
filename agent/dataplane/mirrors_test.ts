import assert from "node:assert/strict";
import { createLogger, type MirrorInfo, type MirrorRemote, run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { startSimNode } from "../../devstack/sim_node.ts";
import { Ovs } from "./ovs.ts";
import { OvsdbClient } from "./ovsdb.ts";
import {
  awaySources,
  collectorsAtNodes,
  MIRROR_ID,
  MirrorRows,
  mirrorRows,
  tunnelName,
  tunnelOf,
} from "./mirrors.ts";
import { portKey } from "./port_key.ts";

const port = (id: string) => ({ network: "blue", networkId: "n1", id });

const mirror = (name: string, direction: MirrorInfo["direction"], sources: string[]) => ({
  name,
  tenant: "acme",
  sources: sources.map(port),
  direction,
  collector: port("tap"),
  createdAt: "2026-11-28T00:00:00Z",
});

const LOCAL = new Map(
  ["web", "db", "tap"].map((
    id,
  ) => [portKey({ tenant: "acme", networkId: "n1", id }), `veth-${id}`]),
);

Deno.test("mirrorRows: the mirrors whose collector is here, their local sources by direction", () => {
  const mirrors = [
    mirror("both", "both", ["web", "far"]),
    mirror("out", "out", ["db", "web"]),
    mirror("in", "in", ["web"]),
    // Its sources are all elsewhere: nothing to copy here.
    mirror("away", "both", ["far"]),
    // Its collector is elsewhere.
    { ...mirror("there", "both", ["web"]), collector: port("far") },
  ];
  assert.deepEqual(mirrorRows(mirrors, LOCAL), [
    { id: "acme/both", srcPorts: ["veth-web"], dstPorts: ["veth-web"], output: "veth-tap" },
    { id: "acme/out", srcPorts: ["veth-db", "veth-web"], dstPorts: [], output: "veth-tap" },
    { id: "acme/in", srcPorts: [], dstPorts: ["veth-web"], output: "veth-tap" },
  ]);
  assert.deepEqual(awaySources(mirrors, LOCAL), ["acme/both: far", "acme/away: far"]);
});

Deno.test("attack: another tenant's port of the same ID on a shared network is never a mirror's port", () => {
  // acme's and globex's ports "web" and "tap" on one public network: their IDs are the same.
  const ports = [
    { tenant: "acme", networkId: "pub", id: "web", name: "veth-a-web" },
    { tenant: "acme", networkId: "pub", id: "tap", name: "veth-a-tap" },
    { tenant: "globex", networkId: "pub", id: "web", name: "veth-g-web" },
    { tenant: "globex", networkId: "pub", id: "tap", name: "veth-g-tap" },
  ];
  const local = new Map(ports.map((p) => [portKey(p), p.name]));
  const onShared = (tenant: string) => ({
    ...mirror("m", "both", []),
    tenant,
    sources: [{ network: "pub", networkId: "pub", id: "web" }],
    collector: { network: "pub", networkId: "pub", id: "tap" },
  });
  assert.deepEqual(mirrorRows([onShared("acme"), onShared("globex")], local), [
    { id: "acme/m", srcPorts: ["veth-a-web"], dstPorts: ["veth-a-web"], output: "veth-a-tap" },
    { id: "globex/m", srcPorts: ["veth-g-web"], dstPorts: ["veth-g-web"], output: "veth-g-tap" },
  ]);
});

Deno.test("attack: a remote collector at a node's address gets no row (its tunnel port would take the copies into a network)", () => {
  const remote = (name: string, ip: string) => ({
    ...mirror(name, "both", ["web"]),
    collector: { remote: { ip, protocol: "vxlan" as const, vni: 5001 } },
  });
  const mirrors = [remote("node", "192.0.2.2"), remote("host", "192.0.2.250")];
  const nodes = new Set(["192.0.2.1", "192.0.2.2"]);
  assert.deepEqual(mirrorRows(mirrors, LOCAL, nodes).map((r) => r.id), ["acme/host"]);
  assert.deepEqual(collectorsAtNodes(mirrors, nodes), ["acme/node: 192.0.2.2"]);
});

Deno.test("MirrorRows makes, corrects and removes its Mirror rows on a private Open vSwitch", async (t) => {
  await using cleanup = new Cleanup();
  const node = await startSimNode({ name: "mirrors", cleanup });
  const ovs = new Ovs(node.ovs);
  await ovs.ensureBridge("br-int", { datapathType: "netdev", failMode: "secure" });
  const veth = (name: string) =>
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
  for (const name of ["veth-web", "veth-db", "veth-tap"]) await veth(name);
  await ovs.addPorts("br-int", [{ name: "veth-web" }, { name: "veth-db" }, { name: "veth-tap" }]);
  const db = new OvsdbClient(node.ovs.dbSock!);
  cleanup.defer(() => Promise.resolve(db.close()));
  const rows = new MirrorRows(db, "br-int", createLogger("test", "error"));
  /** The Mirror rows as ovs-vsctl lists them: name, then port names by column. */
  const listed = async () => {
    const out = await ovs.vsctl([
      "--format=json",
      "--columns=name,select_src_port,select_dst_port,output_port,external_ids",
      "list",
      "Mirror",
    ]);
    const uuidName = new Map<string, string>();
    const ports = JSON.parse(
      await ovs.vsctl(["--format=json", "--columns=_uuid,name", "list", "Port"]),
    ).data as [[string, string], string][];
    for (const [[, uuid], name] of ports) uuidName.set(uuid, name);
    const names = (v: unknown) => {
      const [kind, value] = v as [string, unknown];
      const list = kind === "set" ? (value as [string, string][]) : [[kind, value as string]];
      return list.map(([, u]) => uuidName.get(u)).sort();
    };
    return (JSON.parse(out).data as unknown[][]).map(([name, src, dst, output, ids]) => ({
      name,
      src: names(src),
      dst: names(dst),
      output: names(output),
      ours: Object.fromEntries((ids as [string, [string, string][]])[1])[MIRROR_ID] !== undefined,
    })).sort((a, b) => String(a.name).localeCompare(String(b.name)));
  };

  await t.step("a mirror of the operator's own is left alone", async () => {
    await ovs.vsctl([
      "--",
      "--id=@p",
      "get",
      "Port",
      "veth-db",
      "--",
      "--id=@m",
      "create",
      "Mirror",
      "name=hand",
      "select_all=true",
      "output_port=@p",
      "--",
      "add",
      "Bridge",
      "br-int",
      "mirrors",
      "@m",
    ]);
  });

  await t.step("the wanted rows are made, in one transaction; again: nothing changes", async () => {
    await rows.reconcile(mirrorRows([mirror("m1", "both", ["web"])], LOCAL));
    const want = [
      { name: "acme/m1", src: ["veth-web"], dst: ["veth-web"], output: ["veth-tap"], ours: true },
      { name: "hand", src: [], dst: [], output: ["veth-db"], ours: false },
    ];
    assert.deepEqual(await listed(), want);
    const [before] =
      JSON.parse(await ovs.vsctl(["--format=json", "--columns=_uuid", "list", "Mirror", "acme/m1"]))
        .data;
    await rows.reconcile(mirrorRows([mirror("m1", "both", ["web"])], LOCAL));
    const [after] =
      JSON.parse(await ovs.vsctl(["--format=json", "--columns=_uuid", "list", "Mirror", "acme/m1"]))
        .data;
    assert.deepEqual(after, before, "the row was made again");
  });

  await t.step("a changed mirror is corrected, a removed one's row goes", async () => {
    await rows.reconcile(
      mirrorRows([mirror("m1", "out", ["web", "db"]), mirror("m2", "in", ["db"])], LOCAL),
    );
    assert.deepEqual(await listed(), [
      { name: "acme/m1", src: ["veth-db", "veth-web"], dst: [], output: ["veth-tap"], ours: true },
      { name: "acme/m2", src: [], dst: ["veth-db"], output: ["veth-tap"], ours: true },
      { name: "hand", src: [], dst: [], output: ["veth-db"], ours: false },
    ]);
    await rows.reconcile(mirrorRows([mirror("m2", "in", ["db"])], LOCAL));
    assert.deepEqual((await listed()).map((m) => m.name), ["acme/m2", "hand"]);
    await rows.reconcile([]);
    assert.deepEqual((await listed()).map((m) => m.name), ["hand"]);
  });

  await t.step(
    "a remote collector: a GRE port of its own, gone with the last mirror to it",
    async () => {
      const remote = (name: string, ip: string) => ({
        ...mirror(name, "both", ["web"]),
        collector: { remote: { ip, protocol: "gre" as const } },
      });
      assert.equal(tunnelName("192.0.2.250"), "kmir-c00002fa");
      await rows.reconcile(
        mirrorRows([remote("r1", "192.0.2.250"), remote("r2", "192.0.2.250")], LOCAL),
      );
      assert.deepEqual(await listed(), [
        {
          name: "acme/r1",
          src: ["veth-web"],
          dst: ["veth-web"],
          output: ["kmir-c00002fa"],
          ours: true,
        },
        {
          name: "acme/r2",
          src: ["veth-web"],
          dst: ["veth-web"],
          output: ["kmir-c00002fa"],
          ours: true,
        },
        { name: "hand", src: [], dst: [], output: ["veth-db"], ours: false },
      ]);
      const iface = async (name: string) =>
        (await ovs.vsctl(["--columns=type,options,ofport_request", "list", "Interface", name]))
          .replace(/\s+/g, " ").trim();
      assert.equal(
        await iface("kmir-c00002fa"),
        'type : gre options : {remote_ip="192.0.2.250"} ofport_request : 900',
      );
      await rows.reconcile(
        mirrorRows([remote("r2", "192.0.2.250"), remote("r3", "192.0.2.251")], LOCAL),
      );
      assert.deepEqual((await listed()).map((m) => [m.name, m.output]), [
        ["acme/r2", ["kmir-c00002fa"]],
        ["acme/r3", ["kmir-c00002fb"]],
        ["hand", ["veth-db"]],
      ]);
      assert.match(await iface("kmir-c00002fb"), /ofport_request : 901$/);
      await rows.reconcile([]);
      assert.deepEqual((await listed()).map((m) => m.name), ["hand"]);
      const ports = await ovs.vsctl(["list-ports", "br-int"]);
      assert.deepEqual(ports.split("\n").filter((p) => p.startsWith("kmir-")), []);
    },
  );

  await t.step(
    "ERSPAN and VXLAN collectors: a port each of their kind, key and address; a VNI per port",
    async () => {
      const remote = (name: string, r: MirrorRemote["remote"]) => ({
        ...mirror(name, "both", ["web"]),
        collector: { remote: r },
      });
      const wanted = [
        remote("e1", { ip: "192.0.2.250", protocol: "erspan", session: 7 }),
        remote("v1", { ip: "192.0.2.250", protocol: "vxlan", vni: 5001 }),
        remote("v2", { ip: "192.0.2.250", protocol: "vxlan", vni: 5002 }),
      ];
      await rows.reconcile(mirrorRows(wanted, LOCAL));
      const [e1, v1, v2] = wanted.map((m) => tunnelOf(m.collector).name);
      assert.equal(new Set([e1, v1, v2]).size, 3, "one port per collector");
      assert.deepEqual((await listed()).map((m) => [m.name, m.output]), [
        ["acme/e1", [e1]],
        ["acme/v1", [v1]],
        ["acme/v2", [v2]],
        ["hand", ["veth-db"]],
      ]);
      const iface = async (name: string) =>
        (await ovs.vsctl(["--columns=type,options", "list", "Interface", name]))
          .replace(/\s+/g, " ").trim();
      assert.equal(
        await iface(e1),
        'type : erspan options : {erspan_idx="0x1", erspan_ver="1", key="7", remote_ip="192.0.2.250"}',
      );
      assert.equal(await iface(v2), 'type : vxlan options : {key="5002", remote_ip="192.0.2.250"}');
      assert.ok(e1.length <= 15 && v1.length <= 15, "names fit an interface name");
      await rows.reconcile([]);
      const ports = await ovs.vsctl(["list-ports", "br-int"]);
      assert.deepEqual(ports.split("\n").filter((p) => p.startsWith("kmir-")), []);
    },
  );

  await t.step("a port not on the bridge yet gets no row until it is", async () => {
    const local = new Map([
      ...LOCAL,
      [portKey({ tenant: "acme", networkId: "n1", id: "new" }), "veth-new"],
    ]);
    await rows.reconcile(mirrorRows([mirror("m3", "both", ["new"])], local));
    assert.deepEqual((await listed()).map((m) => m.name), ["hand"]);
    await veth("veth-new");
    await ovs.addPorts("br-int", [{ name: "veth-new" }]);
    await rows.reconcile(mirrorRows([mirror("m3", "both", ["new"])], local));
    assert.deepEqual((await listed()).map((m) => m.name), ["acme/m3", "hand"]);
  });

  await t.step(
    "nothing wanted, nothing of ours: no read until forget() (after a heal)",
    async () => {
      await rows.reconcile([]); // removes acme/m3
      await rows.reconcile([]); // finds nothing of its own: clean
      assert.deepEqual((await listed()).map((m) => m.name), ["hand"]);
      // A row that says it is the agent's, made behind its back: a clean agent does not look.
      await ovs.vsctl([
        ...["--", "--id=@p", "get", "Port", "veth-tap"],
        ...["--", "--id=@m", "create", "Mirror", "name=stale", "select_all=true", "output_port=@p"],
        `external_ids:${MIRROR_ID}=acme/stale`,
        ...["--", "add", "Bridge", "br-int", "mirrors", "@m"],
      ]);
      await rows.reconcile([]);
      assert.deepEqual((await listed()).map((m) => m.name), ["hand", "stale"]);
      rows.forget();
      await rows.reconcile([]);
      assert.deepEqual((await listed()).map((m) => m.name), ["hand"]);
    },
  );
});
