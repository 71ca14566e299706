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
  ruleArgs,
} from "./host_ports.ts";

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
      networkId: "a",
      mac: gatewayMac("a"),
      gateway: "10.1.0.1",
      prefix: 24,
      cidr: "10.1.0.0/24",
      mtu: 1450,
    },
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
  ]);
  assert.deepEqual(ruleArgs(3), ["pref", "2000", "fwmark", "1802371075", "lookup", "1802371075"]);
  const [access] = hostPortSpecs([{ port: port("a", { networkHostAccess: true }), number: 3 }]);
  assert.equal(linkCommands(access)[2], "addr add 10.1.0.1/24 dev kh3");
  // An address the port has already (an agent restarted) is kept as it is.
  assert.deepEqual(linkCommands(access, true), [linkCommands(access)[0]]);
});

Deno.test("host ports: the address is kept only when it is exactly the wanted one, prefix route included", () => {
  const [egress] = hostPortSpecs([{ port: port("a", { networkEgress: true }), number: 3 }]);
  const access = { ...egress, egress: false, hostAccess: true };
  const shown = (...addrs: Record<string, unknown>[]) =>
    JSON.stringify([{ ifname: "kh3", addr_info: addrs }]);
  const mine = { family: "inet", local: "10.1.0.1", prefixlen: 24 };
  assert.ok(hasAddress(shown({ ...mine, noprefixroute: true }), egress));
  assert.ok(!hasAddress(shown(mine), egress), "egress alone: no prefix route in main");
  assert.ok(hasAddress(shown(mine), access));
  assert.ok(!hasAddress(shown({ ...mine, noprefixroute: true }), access));
  assert.ok(!hasAddress(shown({ ...mine, prefixlen: 16 }), access));
  assert.ok(!hasAddress(shown(mine, { ...mine, local: "10.1.0.9" }), access));
  assert.ok(hasAddress(shown(mine, { family: "inet6", local: "fe80::1", prefixlen: 64 }), access));
  assert.ok(!hasAddress("", access));
  assert.ok(!hasAddress(shown(), access));
});

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
        ? `nft ${opts?.stdin?.includes("chain forward") ? "table" : "guard"}`
        : argv.slice(0, 3).join(" ") + (opts?.stdin ? `: ${opts.stdin.trim().split("\n")[0]}` : "");
      calls.push(what);
      // `ip rule del` fails once there is no rule left.
      const code = argv[1] === "rule" && argv[2] === "del" ? 1 : 0;
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
  assert.deepEqual(w.calls.filter((c) => !/^ip (rule|-j)/.test(c)), [
    "add kh2 internal",
    "add kh3 internal",
    "sysctl net.ipv4.ip_forward=1",
    "sysctl net.ipv6.conf.kh2.disable_ipv6=1",
    "sysctl net.ipv4.conf.kh2.src_valid_mark=1",
    `ip -batch -: link set dev kh2 address ${gatewayMac("c")} mtu 1450 up`,
    "sysctl net.ipv6.conf.kh3.disable_ipv6=1",
    "sysctl net.ipv4.conf.kh3.src_valid_mark=1",
    `ip -batch -: link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
    "nft table",
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
  assert.deepEqual(w.calls.filter((c) => !/^ip (rule|-j)/.test(c)), [
    "del kh2",
    "sysctl net.ipv4.ip_forward=1",
    "sysctl net.ipv6.conf.kh3.disable_ipv6=1",
    "sysctl net.ipv4.conf.kh3.src_valid_mark=1",
    `ip -batch -: link set dev kh3 address ${gatewayMac("a")} mtu 1450 up`,
    "nft table",
  ]);

  // After a heal (invalidate) everything is set up again, though nothing changed.
  w.calls.length = 0;
  w.host.invalidate();
  await w.host.reconcile([a2]);
  assert.ok(w.calls.includes("nft table") && w.calls.some((c) => c.includes("link set dev kh3")));

  // None left: the port goes, the kernel keeps only the guard of the pods' veths.
  w.calls.length = 0;
  await w.host.reconcile([]);
  assert.deepEqual(w.calls.filter((c) => !/^ip (rule|-j)/.test(c)), ["del kh3", "nft guard"]);
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
