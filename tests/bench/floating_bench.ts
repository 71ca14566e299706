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
 *   deno run -A tests/bench/floating_bench.ts [--rounds N]     (as root)
 */
import { run } from "@knitter/common";
import { Cleanup } from "../../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack } from "../../devstack/stack.ts";
import { type Fabric, speakBgp, startFabric } from "../support/bgp_fabric.ts";
import { ipNetnsName, knitterList, makePod, type Pod } from "../support/pods.ts";
import { serve } from "../support/traffic.ts";
import { log } from "./support.ts";

const BOUND_MS = 60_000;
const SANDBOX = { containerId: "f100d0000000000000000000000000be", podUid: "floating-bench-uid" };
const PORT_ID = `${SANDBOX.podUid}-${SANDBOX.containerId}-eth0`;
const PROBE = new URL("./floating_probe.ts", import.meta.url).pathname;
const ECHO_PORT = 7070;

async function main(): Promise<void> {
  const i = Deno.args.indexOf("--rounds");
  const rounds = i >= 0 ? Number(Deno.args[i + 1]) : 10;
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const fabric = await startFabric(cleanup, stack.nodes.map((n) => n.sim.underlayIp));
  for (const node of stack.nodes) await speakBgp(cleanup, node);
  await call(stack, "POST", "tenants", { name: "acme" });
  await call(stack, "POST", "floating-pools", { name: "ext", cidrs: ["203.0.113.0/28"] });
  await call(stack, "POST", "tenants/acme/networks", {
    name: "front",
    cidr: "10.90.0.0/24",
    gateway: "10.90.0.1",
  });
  const fip = (await call(stack, "POST", "tenants/acme/floating-ips", { pool: "ext" })).address;
  let pod = await placed(cleanup, stack.nodes[0]);
  await call(stack, "POST", `tenants/acme/floating-ips/${fip}/bind`, {
    network: "front",
    port: PORT_ID,
  });
  await until(fabric, fip, stack.nodes[0]);
  await reachable(fabric, fip);

  const fromDel: number[] = [];
  const fromAdd: number[] = [];
  const routed: number[] = [];
  log(`floating: ${rounds} rounds of a pod with a floating address moved between two nodes`);
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
    await until(fabric, fip, to);
    routed.push(Date.now() - t0);
    const back = await probe;
    fromDel.push(back - t0);
    fromAdd.push(back - added);
    pod = next;
  }
  console.log(JSON.stringify(
    {
      rounds,
      delStartToReachableMs: figures(fromDel),
      addAnsweredToReachableMs: figures(fromAdd),
      delStartToRouterHasNewNodeOnlyMs: figures(routed),
    },
    null,
    2,
  ));
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
