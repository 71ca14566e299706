/**
 * The floating addresses' kernel side: a binding that leaves the node (or moves to another pod)
 * has its connections deleted from conntrack; without BGP the node answers ARP for its bindings on
 * the uplinks, and stops when they go.
 */
import assert from "node:assert/strict";
import { createLogger, type Logger, type Port } from "@knitter/common";
import { FloatingKernel, GARP_ROUNDS, MAX_GARP_SENDERS } from "./floating_kernel.ts";
import type { KernelSeams } from "./host_ports.ts";
import { hostPortSpecs } from "./host_ports.ts";
import type { HostNet } from "./host_nft.ts";

const GARP_ETH0 = "arping -q -U -S 203.0.113.5 -i eth0 -c 1 203.0.113.5";
/** Every round of an announcement. */
const rounds = (line: string) => Array<string>(GARP_ROUNDS).fill(line);
/** Rounds 1 ms apart. */
const QUICK = { gapMs: 1 };

/** `stderr` of a command by its name (none: it succeeds). */
function seams(calls: string[], stderr: Record<string, string> = {}): KernelSeams {
  return {
    run: (argv, opts) => {
      calls.push(
        [...argv, ...(opts?.stdin ? [opts.stdin.trim().replaceAll("\n", "; ")] : [])].join(" "),
      );
      // conntrack -D answers 1 when nothing matched, arping -U when nothing replied.
      const code = argv[0] === "conntrack" || argv[0] === "arping" ? 1 : 0;
      return Promise.resolve({ argv, code, stdout: "", stderr: stderr[argv[0]] ?? "", ms: 0 });
    },
    sysctl: (path, value) => {
      calls.push(`sysctl ${path}=${value}`);
      return Promise.resolve();
    },
  };
}

const net = (floating: HostNet["floating"]): HostNet => ({
  number: 5,
  port: "kh5",
  egress: false,
  hostAccess: false,
  advertise: false,
  gateway: "10.75.0.1",
  cidr: "10.75.0.0/24",
  floating,
});

Deno.test("floating kernel: ARP answered on the uplinks without BGP; a binding that goes or moves loses its connections and its answer", async () => {
  const calls: string[] = [];
  const k = new FloatingKernel(seams(calls), createLogger("test", "error"), true, QUICK);
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.5" }])], ["eth0"]);
  await k.announced();
  assert.deepEqual(calls, [
    "ip -batch - route replace 203.0.113.5/32 dev kh5; neigh replace proxy 203.0.113.5 dev eth0",
    ...rounds(GARP_ETH0),
  ]);
  calls.length = 0;
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.5" }])], ["eth0"]);
  assert.deepEqual(calls, [], "nothing changed: nothing done");
  // Bound to another pod: the old connections go, the answer is made again.
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.6" }])], ["eth0"]);
  await k.announced();
  assert.deepEqual(calls, [
    "ip -force -batch - route del 203.0.113.5/32 dev kh5; neigh del proxy 203.0.113.5 dev eth0",
    "conntrack -D --orig-dst 203.0.113.5",
    "conntrack -D --reply-dst 203.0.113.5",
    "ip -batch - route replace 203.0.113.5/32 dev kh5; neigh replace proxy 203.0.113.5 dev eth0",
    ...rounds(GARP_ETH0),
  ]);
  calls.length = 0;
  await k.reconcile([], []);
  assert.deepEqual(calls, [
    "ip -force -batch - route del 203.0.113.5/32 dev kh5; neigh del proxy 203.0.113.5 dev eth0",
    "conntrack -D --orig-dst 203.0.113.5",
    "conntrack -D --reply-dst 203.0.113.5",
  ]);
});

Deno.test("floating kernel: a binding that comes to the node (bound, or moved here) is announced by gratuitous ARP on every uplink, once; one that stays or leaves is not", async () => {
  const calls: string[] = [];
  const k = new FloatingKernel(seams(calls), createLogger("test", "error"), true, QUICK);
  const bound = [net([{ address: "203.0.113.5", pod: "10.75.0.5" }])];
  await k.reconcile(bound, ["eth0", "eth1"]);
  await k.announced();
  assert.deepEqual(calls.filter((c) => c.startsWith("arping")).sort(), [
    ...rounds(GARP_ETH0),
    ...rounds(GARP_ETH0.replace("eth0", "eth1")),
  ]);
  calls.length = 0;
  await k.reconcile(bound, ["eth0", "eth1"]);
  await k.reconcile([], ["eth0", "eth1"]);
  assert.deepEqual(calls.filter((c) => c.startsWith("arping")), [], "stayed, then left");
});

Deno.test("floating kernel: a gratuitous ARP that cannot be sent is logged with what to do, and the address is still answered", async () => {
  const calls: string[] = [];
  const lines: string[] = [];
  const keep = (msg: string, fields?: Record<string, unknown>) =>
    lines.push(JSON.stringify({ msg, ...fields }));
  const log: Logger = { debug: keep, info: keep, warn: keep, error: keep };
  const k = new FloatingKernel(
    seams(calls, { arping: "libnet_init: No such device" }),
    log,
    true,
    QUICK,
  );
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.5" }])], ["eth0"]);
  await k.announced();
  assert.equal(calls[0].startsWith("ip -batch - route replace 203.0.113.5/32"), true);
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0], /cannot send gratuitous ARP/);
  assert.match(lines[0], /203\.0\.113\.5/);
  assert.match(lines[0], /No such device/);
  assert.match(lines[0], /arping/);
});

Deno.test("floating kernel: a node that answers many addresses at once (an agent start) runs at most a few arping at a time, and announces every one", async () => {
  const calls: string[] = [];
  let running = 0;
  let most = 0;
  const base = seams(calls);
  const k = new FloatingKernel(
    {
      ...base,
      run: async (argv, opts) => {
        if (argv[0] !== "arping") return await base.run(argv, opts);
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 1));
        running--;
        return await base.run(argv, opts);
      },
    },
    createLogger("test", "error"),
    true,
    QUICK,
  );
  const floating = Array.from({ length: 40 }, (_, i) => ({
    address: `203.0.113.${i + 1}`,
    pod: `10.75.0.${i + 1}`,
  }));
  await k.reconcile([net(floating)], ["eth0"]);
  await k.announced();
  assert.equal(most, MAX_GARP_SENDERS);
  const announced = calls.filter((c) => c.startsWith("arping")).map((c) => c.split(" ").at(-1));
  assert.deepEqual(announced.sort(), floating.flatMap((f) => rounds(f.address)).sort());
});

Deno.test("floating kernel: with BGP no ARP is answered, and connections are still deleted when a binding goes", async () => {
  const calls: string[] = [];
  const k = new FloatingKernel(seams(calls), createLogger("test", "error"), false);
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.5" }])], ["eth0"]);
  assert.deepEqual(calls, []);
  await k.reconcile([net([])], ["eth0"]);
  assert.deepEqual(calls, [
    "conntrack -D --orig-dst 203.0.113.5",
    "conntrack -D --reply-dst 203.0.113.5",
  ]);
});

Deno.test("host ports: a network whose pods have floating addresses gets a host port, with each active port's binding", () => {
  const base = {
    tenant: "acme",
    network: "n",
    networkTenant: "acme",
    networkId: "n",
    type: "vxlan" as const,
    family: 4 as const,
    gateway: "10.75.0.1",
    mtu: 1450,
    routes: [],
    dns: {},
    createdAt: "2026-11-28T00:00:00Z",
  };
  const port = (ip: string, more: Partial<Port> = {}): Port => ({
    ...base,
    id: ip,
    ip,
    address: `${ip}/24`,
    mac: "02:00:00:00:00:01",
    ...more,
  });
  const specs = hostPortSpecs([
    { port: port("10.75.0.7"), number: 5 },
    { port: port("10.75.0.6", { floating: "203.0.113.6" }), number: 5 },
    { port: port("10.75.0.5", { floating: "203.0.113.5" }), number: 5 },
    { port: port("10.75.0.8", { floating: "203.0.113.8", active: false }), number: 5 },
  ]);
  assert.equal(specs.length, 1);
  assert.deepEqual(specs[0].floating, [
    { address: "203.0.113.5", pod: "10.75.0.5" },
    { address: "203.0.113.6", pod: "10.75.0.6" },
  ]);
  assert.deepEqual(hostPortSpecs([{ port: port("10.75.0.7"), number: 5 }]), []);
});

Deno.test("floating kernel: an address unbound while it is being announced gets no gratuitous ARP once it is no longer answered", async () => {
  const calls: string[] = [];
  const k = new FloatingKernel(seams(calls), createLogger("test", "error"), true, { gapMs: 20 });
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.5" }])], ["eth0"]);
  // Unbound at once (the pod deleted right after its move): the other rounds are not sent.
  await k.reconcile([net([])], ["eth0"]);
  const unanswered = calls.length;
  await k.announced();
  const after = calls.slice(unanswered).filter((c) => c.startsWith("arping"));
  assert.deepEqual(after, [], "a gratuitous ARP after the node stopped answering");
  assert.ok(
    calls.every((c) => !c.startsWith("arping") || c.includes(" -c 1 ")),
    `each round is one arping of its own, so the next can be called off: ${calls.join("\n")}`,
  );
});

Deno.test("floating kernel: without BGP an IPv6 floating address is answered by proxy NDP on the IPv6 uplinks (no route, no ARP); unbound or moved, it is answered no more and its connections go", async () => {
  const calls: string[] = [];
  const k = new FloatingKernel(seams(calls), createLogger("test", "error"), true, QUICK);
  const six = (pod: string): HostNet => ({
    ...net(undefined),
    v6: { gateway: "fd00:75::1", cidr: "fd00:75::/64" },
    floating6: [{ address: "2001:db8:f::5", pod }],
  });
  await k.reconcile([six("fd00:75::5")], ["eth0"], ["eth1"]);
  await k.announced();
  assert.deepEqual(calls, [
    "sysctl net.ipv6.conf.eth1.proxy_ndp=1",
    "ip -batch - neigh replace proxy 2001:db8:f::5 dev eth1",
  ]);
  calls.length = 0;
  await k.reconcile([six("fd00:75::5")], ["eth0"], ["eth1"]);
  assert.deepEqual(calls, [], "nothing changed: nothing done");
  await k.reconcile([six("fd00:75::6")], ["eth0"], ["eth1"]);
  assert.deepEqual(calls, [
    "ip -force -batch - neigh del proxy 2001:db8:f::5 dev eth1",
    "conntrack -D -f ipv6 --orig-dst 2001:db8:f::5",
    "conntrack -D -f ipv6 --reply-dst 2001:db8:f::5",
    "sysctl net.ipv6.conf.eth1.proxy_ndp=1",
    "ip -batch - neigh replace proxy 2001:db8:f::5 dev eth1",
  ]);
  calls.length = 0;
  await k.reconcile([], [], []);
  assert.deepEqual(calls, [
    "ip -force -batch - neigh del proxy 2001:db8:f::5 dev eth1",
    "conntrack -D -f ipv6 --orig-dst 2001:db8:f::5",
    "conntrack -D -f ipv6 --reply-dst 2001:db8:f::5",
  ]);
});

Deno.test("host ports: a dual-stack port's IPv6 floating address stands for its IPv6 address (floating6), beside its IPv4 one", () => {
  const specs = hostPortSpecs([{
    port: {
      tenant: "acme",
      network: "n",
      networkTenant: "acme",
      networkId: "n",
      type: "vxlan",
      family: 4,
      gateway: "10.75.0.1",
      gateway6: "fd00:75::1",
      mtu: 1450,
      routes: [],
      dns: {},
      createdAt: "2026-11-28T00:00:00Z",
      id: "p",
      ip: "10.75.0.5",
      address: "10.75.0.5/24",
      address6: "fd00:75::5/64",
      mac: "02:00:00:00:00:01",
      floating: "203.0.113.5",
      floating6: "2001:db8:f::5",
    },
    number: 5,
  }]);
  assert.equal(specs.length, 1);
  assert.deepEqual(specs[0].floating, [{ address: "203.0.113.5", pod: "10.75.0.5" }]);
  assert.deepEqual(specs[0].floating6, [{ address: "2001:db8:f::5", pod: "fd00:75::5" }]);
});
