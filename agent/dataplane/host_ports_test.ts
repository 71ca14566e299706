/** Which host ports the local ports' networks need, and the kernel commands of one. */
import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import { gatewayMac } from "@knitter/wasm";
import { createLogger } from "@knitter/common";
import type { Ovs, OvsPortSpec } from "./ovs.ts";
import {
  egressRouteCommands,
  hasAddress,
  HostPorts,
  hostPortSpecs,
  type KernelSeams,
  linkCommands,
  linkLocalOf,
} from "./host_ports.ts";
import { MAX_MARKED } from "./host_nft.ts";

function port(networkId: string, more: Partial<Port> = {}): Port {
  return {
    id: `p-${networkId}`,
    tenant: "acme",
    network: networkId,
    networkTenant: "acme",
    networkId,
    type: "vxlan",
    ip: "10.1.0.5",
    address: "10.1.0.5/24",
    family: 4,
    gateway: "10.1.0.1",
    mac: "02:00:0a:01:00:05",
    mtu: 1450,
    routes: [],
    dns: {},
    createdAt: "2026-11-25T00:00:00Z",
    ...more,
  };
}

Deno.test("host ports: one per network with egress or hostAccess and an IPv4 gateway", () => {
  const specs = hostPortSpecs([
    { port: port("a", { networkEgress: true }), number: 3 },
    { port: port("a", { networkEgress: true, ip: "10.1.0.6", address: "10.1.0.6/24" }), number: 3 },
    { port: port("b"), number: 4 },
    { port: port("c", { networkHostAccess: true, address: "10.9.8.7/16" }), number: 2 },
    { port: port("d", { networkEgress: true, gateway: undefined }), number: 5 },
  ]);
  assert.deepEqual(specs, [
    {
      number: 2,
      port: "kh2",
      egress: false,
      hostAccess: true,
      advertise: false,
      networkId: "c",
      mac: gatewayMac("c"),
      gateway: "10.1.0.1",
      prefix: 16,
      cidr: "10.9.0.0/16",
      mtu: 1450,
    },
    {
      number: 3,
      port: "kh3",
      egress: true,
      hostAccess: false,
      advertise: false,
      networkId: "a",
      mac: gatewayMac("a"),
      gateway: "10.1.0.1",
      prefix: 24,
      cidr: "10.1.0.0/24",
      mtu: 1450,
    },
  ]);
});

Deno.test("host ports: an advertised network gets one, its subnet in the main table (routed in from the fabric)", () => {
  const [adv] = hostPortSpecs([{ port: port("a", { networkAdvertise: true }), number: 3 }]);
  assert.deepEqual([adv.advertise, adv.egress, adv.hostAccess], [true, false, false]);
  assert.deepEqual(linkCommands(adv), [
    `link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
    "addr flush dev kh3",
    "addr add 10.1.0.1/24 dev kh3",
  ]);
});

Deno.test("host ports: egress alone keeps the subnet out of the main table, in the network's own", () => {
  const [egress] = hostPortSpecs([{ port: port("a", { networkEgress: true }), number: 3 }]);
  assert.deepEqual(linkCommands(egress), [
    `link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
    "addr flush dev kh3",
    "addr add 10.1.0.1/24 dev kh3 noprefixroute",
  ]);
  assert.deepEqual(egressRouteCommands(egress), [
    "route replace 10.1.0.0/24 dev kh3 src 10.1.0.1 table 1802371075",
    "rule add pref 2000 fwmark 0x30000/0xffff0000 lookup 1802371075",
  ]);
  const [access] = hostPortSpecs([{ port: port("a", { networkHostAccess: true }), number: 3 }]);
  assert.equal(linkCommands(access)[2], "addr add 10.1.0.1/24 dev kh3");
});

Deno.test("host ports: a dual-stack network's port has its IPv6 gateway too, without DAD, its IPv6 subnet routed as the IPv4 one", () => {
  const dual = { address6: "fd00:1::5/64", ip6: "fd00:1::5", gateway6: "fd00:1::1" };
  const [egress] = hostPortSpecs([
    { port: port("a", { networkEgress: true, ...dual }), number: 3 },
  ]);
  assert.deepEqual(egress.v6, { gateway: "fd00:1::1", prefix: 64, cidr: "fd00:1::/64" });
  assert.deepEqual(linkCommands(egress), [
    `link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
    "addr flush dev kh3",
    "addr add 10.1.0.1/24 dev kh3 noprefixroute",
    "addr add fd00:1::1/64 dev kh3 nodad noprefixroute",
    `addr add ${linkLocalOf(gatewayMac("a"))}/64 dev kh3 nodad`,
  ]);
  assert.equal(linkLocalOf("0a:58:0a:01:00:05"), "fe80::858:aff:fe01:5");
  // Replies to the pods' IPv6 connections out find the network's own table by their mark too.
  assert.deepEqual(egressRouteCommands(egress, true), [
    "route replace fd00:1::/64 dev kh3 src fd00:1::1 table 1802371075",
    "rule add pref 2000 fwmark 0x30000/0xffff0000 lookup 1802371075",
  ]);
  const [access] = hostPortSpecs([
    { port: port("a", { networkHostAccess: true, ...dual }), number: 3 },
  ]);
  assert.equal(linkCommands(access)[3], "addr add fd00:1::1/64 dev kh3 nodad");
  // A port of an IPv4-only network: no IPv6 side, no IPv6 routes.
  const [v4] = hostPortSpecs([{ port: port("a", { networkEgress: true }), number: 3 }]);
  assert.equal(v4.v6, undefined);
  assert.deepEqual(egressRouteCommands(v4, true), []);
});

Deno.test("host ports: an IPv6-only network's port has its IPv6 gateway alone (no IPv4 address, no IPv4 route)", () => {
  const six = {
    ip: "fd00:6::5",
    address: "fd00:6::5/64",
    family: 6 as const,
    gateway: "fd00:6::1",
  };
  const [egress] = hostPortSpecs([{ port: port("a", { networkEgress: true, ...six }), number: 3 }]);
  assert.deepEqual(
    [egress.gateway, egress.cidr, egress.v6],
    [undefined, undefined, { gateway: "fd00:6::1", prefix: 64, cidr: "fd00:6::/64" }],
  );
  assert.deepEqual(linkCommands(egress), [
    `link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
    "addr flush dev kh3",
    "addr add fd00:6::1/64 dev kh3 nodad noprefixroute",
    `addr add ${linkLocalOf(gatewayMac("a"))}/64 dev kh3 nodad`,
  ]);
  assert.deepEqual(egressRouteCommands(egress), []);
  assert.equal(
    egressRouteCommands(egress, true)[0],
    "route replace fd00:6::/64 dev kh3 src fd00:6::1 table 1802371075",
  );
  // Its address shown as the port has it, with nothing of IPv4: kept over a restart.
  const shown = JSON.stringify([{
    addr_info: [
      { family: "inet6", local: "fd00:6::1", prefixlen: 64, scope: "global", noprefixroute: true },
      { family: "inet6", local: linkLocalOf(gatewayMac("a")), prefixlen: 64, scope: "link" },
    ],
  }]);
  assert.ok(hasAddress(shown, egress));
});

Deno.test("host ports: a dual-stack port is set up with IPv6 on (no RA, no redirects), IPv6 forwarding, and its IPv6 routes", async () => {
  const w = world();
  const dual = { address6: "fd00:1::5/64", ip6: "fd00:1::5", gateway6: "fd00:1::1" };
  const specs = hostPortSpecs([{ port: port("a", { networkEgress: true, ...dual }), number: 3 }]);
  await w.host.reconcile(specs);
  const calls = w.calls.filter(kernelChange);
  for (
    const want of [
      "sysctl net.ipv6.conf.all.forwarding=1",
      "sysctl net.ipv6.fwmark_reflect=1",
      "sysctl net.ipv6.conf.kh3.disable_ipv6=0",
      "sysctl net.ipv6.conf.kh3.accept_ra=0",
      "sysctl net.ipv6.conf.kh3.accept_redirects=0",
      "ip -6 -batch: route replace fd00:1::/64 dev kh3 src fd00:1::1 table 1802371075",
    ]
  ) assert.ok(calls.includes(want), `${want}\n${calls.join("\n")}`);
  // An IPv4-only node turns no IPv6 forwarding on.
  const v4 = world();
  await v4.host.reconcile(hostPortSpecs([{ port: port("a", { networkEgress: true }), number: 3 }]));
  assert.ok(!v4.calls.some((c) => c.includes("ipv6.conf.all")), v4.calls.join("\n"));
});

/** What changes the kernel (not the rules' removal, which may find none, nor `ip -j` reads). */
function kernelChange(call: string): boolean {
  return !/^ip (-6 )?rule/.test(call) && !call.startsWith("ip -j");
}

/** The sysctls of one host port, in order. */
function portSysctls(name: string): string[] {
  return [
    `sysctl net.ipv6.conf.${name}.disable_ipv6=1`,
    `sysctl net.ipv4.conf.${name}.src_valid_mark=1`,
    `sysctl net.ipv4.conf.${name}.arp_ignore=1`,
    `sysctl net.ipv4.conf.${name}.arp_announce=2`,
    `sysctl net.ipv4.conf.${name}.send_redirects=0`,
    `sysctl net.ipv4.conf.${name}.accept_redirects=0`,
  ];
}

/** A switch and a kernel that record what the host ports ask of them. */
function world() {
  const ports = new Map<string, { ofport: number; externalIds: Record<string, string> }>();
  const calls: string[] = [];
  let next = 1;
  const ovs = {
    listPorts: () => Promise.resolve([...ports].map(([name, p]) => ({ name, ...p }))),
    addPorts: (_bridge: string, specs: OvsPortSpec[]) => {
      for (const s of specs) {
        if (!ports.has(s.name)) {
          ports.set(s.name, { ofport: next++, externalIds: s.externalIds ?? {} });
          calls.push(`add ${s.name} ${s.type}`);
        }
      }
      return Promise.resolve(new Map(specs.map((s) => [s.name, ports.get(s.name)!.ofport])));
    },
    delPorts: (_bridge: string, names: string[]) => {
      for (const n of names) {
        ports.delete(n);
        calls.push(`del ${n}`);
      }
      return Promise.resolve();
    },
  } as unknown as Ovs;
  const kernel: KernelSeams = {
    run: (argv, opts) => {
      const what = argv[0] === "nft"
        ? `nft ${opts?.stdin?.includes("ct original zone") ? "table" : "guard"}`
        : argv.slice(0, 3).join(" ") + (opts?.stdin ? `: ${opts.stdin.trim().split("\n")[0]}` : "");
      calls.push(what);
      // `ip rule del` (`ip -6 rule del`) fails once there is no rule left.
      const code = argv.slice(1, 3).includes("rule") ? 1 : 0;
      return Promise.resolve({ argv, code, stdout: "", stderr: "", ms: 0 });
    },
    sysctl: (path, value) => {
      calls.push(`sysctl ${path}=${value}`);
      return Promise.resolve();
    },
  };
  const log = createLogger("test", "error");
  return { ports, calls, host: new HostPorts(ovs, "br-int", log, kernel) };
}

Deno.test("host ports: reconcile sets up new ports, leaves unchanged ones alone, removes what is no longer wanted", async () => {
  const w = world();
  const [a, c] = hostPortSpecs([
    { port: port("a", { networkEgress: true }), number: 3 },
    { port: port("c", { networkHostAccess: true, address: "10.9.8.7/16" }), number: 2 },
  ]).sort((x, y) => x.number - y.number).reverse();
  const first = await w.host.reconcile([c, a]);
  assert.deepEqual([...first], [[2, 1], [3, 2]]);
  // The table first (a port it does not know yet is closed), then the ports.
  assert.deepEqual(w.calls.filter(kernelChange), [
    "nft table",
    "add kh2 internal",
    "add kh3 internal",
    "sysctl net.ipv4.ip_forward=1",
    "sysctl net.ipv4.fwmark_reflect=1",
    ...portSysctls("kh2"),
    `ip -batch -: link set dev kh2 address ${gatewayMac("c")} mtu 1450 up`,
    ...portSysctls("kh3"),
    `ip -batch -: link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
  ]);
  assert.deepEqual(w.host.portNames, ["kh2", "kh3"]);

  // The same set again: nothing at all.
  w.calls.length = 0;
  await w.host.reconcile([c, a]);
  assert.equal(w.calls.length, 0, w.calls.join("\n"));

  // c leaves, a turns hostAccess on: c's port goes, a is set up again, the table made again.
  w.calls.length = 0;
  const a2 = { ...a, hostAccess: true };
  const second = await w.host.reconcile([a2]);
  assert.deepEqual([...second], [[3, 2]]);
  assert.deepEqual(w.calls.filter(kernelChange), [
    "nft table",
    "del kh2",
    "sysctl net.ipv4.ip_forward=1",
    "sysctl net.ipv4.fwmark_reflect=1",
    ...portSysctls("kh3"),
    `ip -batch -: link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
  ]);

  // After a heal (invalidate) everything is set up again, though nothing changed.
  w.calls.length = 0;
  w.host.invalidate();
  await w.host.reconcile([a2]);
  assert.ok(w.calls.includes("nft table") && w.calls.some((c) => c.includes("link set dev kh3")));

  // None left: the port goes, the kernel keeps only the guard of the pods' veths.
  w.calls.length = 0;
  await w.host.reconcile([]);
  assert.deepEqual(w.calls.filter(kernelChange), ["nft guard", "del kh3"]);
  assert.deepEqual(w.host.portNames, []);
  // A node that never had a host port is not touched at all.
  const fresh = world();
  await fresh.host.reconcile([]);
  assert.equal(fresh.calls.length, 0, fresh.calls.join("\n"));
});

Deno.test("host ports: a failure is logged and tried again at the next reconcile", async () => {
  const w = world();
  const [a] = hostPortSpecs([{ port: port("a", { networkEgress: true }), number: 3 }]);
  let fail = true;
  const kernel = (w.host as unknown as { kernel: KernelSeams }).kernel;
  const run = kernel.run;
  kernel.run = (argv, opts) => {
    if (argv[0] === "nft" && fail) return Promise.reject(new Error("nft: not found"));
    return run(argv, opts);
  };
  await w.host.reconcile([a]);
  fail = false;
  w.calls.length = 0;
  await w.host.reconcile([a]);
  assert.ok(w.calls.includes("nft table"), w.calls.join("\n"));
});

Deno.test("host ports: the flows get no host port whose kernel side failed; a failed table leaves only the unchanged ports", async () => {
  const w = world();
  const [c, a] = hostPortSpecs([
    { port: port("a", { networkEgress: true }), number: 3 },
    { port: port("c", { networkHostAccess: true, address: "10.9.8.7/16" }), number: 2 },
  ]);
  const kernel = (w.host as unknown as { kernel: KernelSeams }).kernel;
  const { run, sysctl } = kernel;
  let failing = "kh3";
  kernel.sysctl = (path, value) =>
    path.includes(`.${failing}.`)
      ? Promise.reject(new Error("no such device"))
      : sysctl(path, value);
  // kh3's sysctls fail: only kh2 is handed to the flows; kh3 is tried again.
  assert.deepEqual([...await w.host.reconcile([c, a])], [[2, 1]]);
  failing = "";
  assert.deepEqual([...await w.host.reconcile([c, a])], [[2, 1], [3, 2]]);
  // egress turned off on a, and the table cannot be applied: a is closed (its old rules would
  // still let it out), c goes on.
  kernel.run = (argv, opts) =>
    argv[0] === "nft" ? Promise.reject(new Error("nft: not found")) : run(argv, opts);
  const off = { ...a, egress: false, hostAccess: true };
  assert.deepEqual([...await w.host.reconcile([c, off])], [[2, 1]]);
  kernel.run = run;
  assert.deepEqual([...await w.host.reconcile([c, off])], [[2, 1], [3, 2]]);
});

Deno.test("host ports: a network whose CIDR overlaps the node's own addresses, or with hostAccess its routes, gets no host port", async () => {
  const w = world();
  const kernel = (w.host as unknown as { kernel: KernelSeams }).kernel;
  const { run } = kernel;
  const node: Record<string, unknown[]> = {
    addr: [
      { ifname: "lo", addr_info: [{ local: "127.0.0.1", prefixlen: 8 }] },
      { ifname: "eth0", addr_info: [{ local: "192.168.1.20", prefixlen: 24 }] },
      { ifname: "kh9", addr_info: [{ local: "10.1.0.1", prefixlen: 24 }] },
    ],
    route: [{ dst: "default", dev: "eth0" }, { dst: "10.96.0.0/12", dev: "eth0" }],
  };
  kernel.run = async (argv, opts) => {
    const r = await run(argv, opts);
    return argv[1] === "-j" ? { ...r, stdout: JSON.stringify(node[argv[3]] ?? []) } : r;
  };
  const specs = hostPortSpecs([
    // Inside the node's LAN: refused, egress or not.
    {
      port: port("lan", { networkEgress: true, address: "192.168.1.5/25", gateway: "192.168.1.1" }),
      number: 1,
    },
    // Shadows the node's route, in the main table: refused with hostAccess only.
    {
      port: port("svc", {
        networkHostAccess: true,
        address: "10.100.0.5/24",
        gateway: "10.100.0.1",
      }),
      number: 2,
    },
    {
      port: port("svc2", { networkEgress: true, address: "10.100.0.5/24", gateway: "10.100.0.1" }),
      number: 3,
    },
    // Overlaps only what the host ports and loopback hold: fine.
    { port: port("ok", { networkHostAccess: true }), number: 4 },
  ]);
  assert.deepEqual([...await w.host.reconcile(specs)].map(([n]) => n), [3, 4]);
  assert.deepEqual(w.host.portNames, ["kh3", "kh4"]);
});

Deno.test("host ports: a network whose number is beyond the marks' bits gets no host port", async () => {
  const w = world();
  const specs = hostPortSpecs([
    { port: port("a", { networkEgress: true }), number: MAX_MARKED + 1 },
    { port: port("b", { networkEgress: true, address: "10.2.0.5/24" }), number: MAX_MARKED },
  ]);
  assert.deepEqual([...(await w.host.reconcile(specs)).keys()], [MAX_MARKED]);
});
