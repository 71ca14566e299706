/**
 * The floating addresses' kernel side: a binding that leaves the node (or moves to another pod)
 * has its connections deleted from conntrack; without BGP the node answers ARP for its bindings on
 * the uplinks, and stops when they go.
 */
import assert from "node:assert/strict";
import { createLogger, type Port } from "@knitter/common";
import { FloatingKernel } from "./floating_kernel.ts";
import type { KernelSeams } from "./host_ports.ts";
import { hostPortSpecs } from "./host_ports.ts";
import type { HostNet } from "./host_nft.ts";

function seams(calls: string[]): KernelSeams {
  return {
    run: (argv, opts) => {
      calls.push(
        [...argv, ...(opts?.stdin ? [opts.stdin.trim().replaceAll("\n", "; ")] : [])].join(" "),
      );
      // conntrack -D answers 1 when nothing matched.
      const code = argv[0] === "conntrack" ? 1 : 0;
      return Promise.resolve({ argv, code, stdout: "", stderr: "", ms: 0 });
    },
    sysctl: () => Promise.resolve(),
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
  const k = new FloatingKernel(seams(calls), createLogger("test", "error"), true);
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.5" }])], ["eth0"]);
  assert.deepEqual(calls, [
    "ip -batch - route replace 203.0.113.5/32 dev kh5; neigh replace proxy 203.0.113.5 dev eth0",
  ]);
  calls.length = 0;
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.5" }])], ["eth0"]);
  assert.deepEqual(calls, [], "nothing changed: nothing done");
  // Bound to another pod: the old connections go, the answer is made again.
  await k.reconcile([net([{ address: "203.0.113.5", pod: "10.75.0.6" }])], ["eth0"]);
  assert.deepEqual(calls, [
    "ip -force -batch - route del 203.0.113.5/32 dev kh5; neigh del proxy 203.0.113.5 dev eth0",
    "conntrack -D --orig-dst 203.0.113.5",
    "conntrack -D --reply-dst 203.0.113.5",
    "ip -batch - route replace 203.0.113.5/32 dev kh5; neigh replace proxy 203.0.113.5 dev eth0",
  ]);
  calls.length = 0;
  await k.reconcile([], []);
  assert.deepEqual(calls, [
    "ip -force -batch - route del 203.0.113.5/32 dev kh5; neigh del proxy 203.0.113.5 dev eth0",
    "conntrack -D --orig-dst 203.0.113.5",
    "conntrack -D --reply-dst 203.0.113.5",
  ]);
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
