/**
 * A floating address following its pod (agent/README.md, "Floating addresses"): on a two-node
 * stack whose agents run BIRD 2 and peer with an "external router" netns (tests/support/
 * bgp_fabric.ts), a pod with a floating address is deleted on one node and made again with the same
 * port ID on the other, each round the other way. Per round: from the DEL's start, and from the
 * ADD's answer, until the host behind the router gets an echo over a new TCP connection to the
 * floating address (floating_probe.ts, a try every 20-100 ms: the figures' resolution), and until
 * the router has the /32 from the new node only (`birdc show route`, polled). The new pod's echo
 * server listens in its netns before the DEL (the pod's own start is not measured).
 *
 * `--flat`: no BGP, the pool on the nodes' LAN, where the router asks ARP for its addresses and
 * the hosting node answers (agent/dataplane/floating_kernel.ts); the router keeps its kernel's
 * default neighbour times. `--no-announce` with it: the router drops the gratuitous ARP the new
 * node sends for the address (an nftables arp rule in its netns), so it learns the move only when
 * its entry for the old node's MAC fails. `--old-node-gone` with it: each node drops what it would
 * forward to the address without NATing it (an nftables rule in its netns), as a node that died
 * would: otherwise the old node, still up, routes what the router sends it on to the new one (it
 * asks ARP for the address on the LAN like any neighbour), which hides a stale cache.
 *
 *   deno run -A tests/bench/floating_bench.ts [--rounds N] [--flat [--no-announce] [--old-node-gone]]
 */
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack } from "../../devstack/stack.ts";
import { type Fabric, HOST_SUBNET, ROUTER, speakBgp, startFabric } from "../support/bgp_fabric.ts";
import { ipNetnsName, knitterList, makePod, type Pod } from "../support/pods.ts";
import { serve } from "../support/traffic.ts";
import { log } from "./support.ts";

/** Without the announcement a neighbour's entry may stay valid for 45 s, then fails in 8 s. */
const BOUND_MS = 120_000;
const SANDBOX = { containerId: "f100d0000000000000000000000000be", podUid: "floating-bench-uid" };
const PORT_ID = `${SANDBOX.podUid}-${SANDBOX.containerId}-eth0`;
const PROBE = new URL("./floating_probe.ts", import.meta.url).pathname;
const ECHO_PORT = 7070;

async function main(): Promise<void> {
  const i = Deno.args.indexOf("--rounds");
  const rounds = i >= 0 ? Number(Deno.args[i + 1]) : 10;
  const flat = Deno.args.includes("--flat");
  const announced = !Deno.args.includes("--no-announce");
  const oldGone = Deno.args.includes("--old-node-gone");
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const fabric = flat ? await lan(cleanup, stack) : await bgp(cleanup, stack);
  await call(stack, "POST", "tenants", { name: "acme" });
  await call(stack, "POST", "floating-pools", {
    name: "ext",
    cidrs: [flat ? "192.0.2.200/29" : "203.0.113.0/28"],
  });
  await call(stack, "POST", "tenants/acme/networks", {
    name: "front",
    cidr: "10.90.0.0/24",
    gateway: "10.90.0.1",
  });
  const fip = (await call(stack, "POST", "tenants/acme/floating-ips", { pool: "ext" })).address;
  if (!announced) await dropAnnouncements(fabric, fip);
  if (oldGone) { for (const node of stack.nodes) await dropForwarded(node, fip); }
  let pod = await placed(cleanup, stack.nodes[0]);
  await call(stack, "POST", `tenants/acme/floating-ips/${fip}/bind`, {
    network: "front",
    port: PORT_ID,
  });
  if (!flat) await until(fabric, fip, stack.nodes[0]);
  await reachable(fabric, fip);

  const fromDel: number[] = [];
  const fromAdd: number[] = [];
  const routed: number[] = [];
  const how = flat
    ? `flat, ${announced ? "with" : "without"} the gratuitous ARP` +
      (oldGone ? ", the old node gone" : ", the old node up")
    : "BGP";
  log(
    `floating (${how}): ${rounds} rounds of a pod with a floating address moved between two nodes`,
  );
  for (let r = 0; r < rounds; r++) {
    const to = stack.nodes[(r + 1) % 2];
    const next = await makePod(to, `web${r}`, "acme", knitterList(["front"], [], "1.0.0"), SANDBOX);
    await serve(cleanup, ipNetnsName(next.netns), "tcp", ECHO_PORT, 600);
    const t0 = Date.now();
    const del = await pod.del();
    if (del.code !== 0) throw new Error(`DEL: ${JSON.stringify(del.out)}`);
    const add = await next.add();
    if (add.code !== 0) throw new Error(`ADD on ${to.name}: ${JSON.stringify(add.out)}`);
    const added = Date.now();
    const probe = reachable(fabric, fip);
    if (!flat) await until(fabric, fip, to);
    if (!flat) routed.push(Date.now() - t0);
    const back = await probe;
    fromDel.push(back - t0);
    fromAdd.push(back - added);
    pod = next;
  }
  console.log(JSON.stringify(
    {
      rounds,
      mode: how,
      delStartToReachableMs: figures(fromDel),
      addAnsweredToReachableMs: figures(fromAdd),
      ...(flat ? {} : { delStartToRouterHasNewNodeOnlyMs: figures(routed) }),
    },
    null,
    2,
  ));
}

/** The external router as every node's BGP peer. */
async function bgp(cleanup: Cleanup, stack: Stack): Promise<Fabric> {
  const fabric = await startFabric(cleanup, stack.nodes.map((n) => n.sim.underlayIp));
  for (const node of stack.nodes) await speakBgp(cleanup, node);
  return fabric;
}

/** The external router on the nodes' LAN, no BGP: the nodes reach the host through it. */
async function lan(cleanup: Cleanup, stack: Stack): Promise<Fabric> {
  const fabric = await startFabric(cleanup, []);
  for (const node of stack.nodes) {
    await run(["ip", "-n", node.sim.netns, "route", "add", HOST_SUBNET, "via", ROUTER]);
  }
  return fabric;
}

/** The router drops gratuitous ARP for `fip` (sender and target the address) before its cache. */
async function dropAnnouncements(fabric: Fabric, fip: string): Promise<void> {
  await run(["ip", "netns", "exec", fabric.router, "nft", "-f", "-"], {
    stdin: `table arp bench {\n chain input {\n type filter hook input priority 0;\n` +
      ` arp saddr ip ${fip} arp daddr ip ${fip} drop\n }\n}\n`,
  });
}

/** The node drops what it would forward to `fip` unNATed (DNATed packets are to the pod). */
async function dropForwarded(node: StackNode, fip: string): Promise<void> {
  await run(["ip", "netns", "exec", node.sim.netns, "nft", "-f", "-"], {
    stdin: `table ip bench {\n chain forward {\n type filter hook forward priority 0;\n` +
      ` ip daddr ${fip} drop\n }\n}\n`,
  });
}

/** The first pod, on `node`, with its echo server. */
async function placed(cleanup: Cleanup, node: StackNode): Promise<Pod> {
  const p = await makePod(node, "web", "acme", knitterList(["front"], [], "1.0.0"), SANDBOX);
  await serve(cleanup, ipNetnsName(p.netns), "tcp", ECHO_PORT, 600);
  const r = await p.add();
  if (r.code !== 0) throw new Error(`ADD: ${JSON.stringify(r.out)}`);
  return p;
}

/** The wall clock (ms) of the host's first echo over a new connection to the floating address. */
async function reachable(fabric: Fabric, fip: string): Promise<number> {
  const r = await run([
    ...["ip", "netns", "exec", fabric.host, Deno.execPath(), "run", "--quiet", "--allow-net"],
    ...[PROBE, fip, String(ECHO_PORT), String(BOUND_MS / 1000)],
  ]);
  return Number(r.stdout.trim());
}

function figures(ms: number[]): { median: number; p90: number; max: number } {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]);
  return { median: at(0.5), p90: at(0.9), max: Math.round(s[s.length - 1]) };
}

/** Polls the router's BIRD until it has the /32 from `node` alone. */
async function until(fabric: Fabric, fip: string, node: StackNode): Promise<void> {
  const deadline = performance.now() + BOUND_MS;
  const want = String([node.sim.underlayIp]);
  while (String((await fabric.learned()).get(`${fip}/32`)) !== want) {
    if (performance.now() > deadline) throw new Error(`not converged within ${BOUND_MS} ms`);
  }
}

// deno-lint-ignore no-explicit-any
async function call(stack: Stack, method: string, path: string, body?: unknown): Promise<any> {
  const r = await stack.api(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

if (import.meta.main) await main();
