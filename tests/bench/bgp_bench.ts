/**
 * BGP convergence (agent/README.md, "BGP advertisement"): on a two-node stack whose agents run
 * BIRD 2 and peer with an "external router" netns (tests/support/bgp_fabric.ts), how long from an
 * admin's change to what the router's BIRD has learned, polled there (`birdc show route`, a few
 * ms a poll: the figures' resolution). Per round: a network created with `advertise` and its
 * first pod ADDed on n1, until the router has the network's CIDR; the admin's PATCH
 * `advertise: false`, until it is gone; the pod DELeted and the network deleted. Then, a few
 * times: n2's agent stopped, until n2's routes are gone, and started again, until they are back.
 *
 *   deno run -A tests/bench/bgp_bench.ts [--rounds N]     (as root)
 */
import { Cleanup } from "../../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack } from "../../devstack/stack.ts";
import { type Fabric, speakBgp, startFabric } from "../support/bgp_fabric.ts";
import { knitterList, makePod, type Pod } from "../support/pods.ts";
import { log } from "./support.ts";

const BOUND_MS = 60_000;

async function main(): Promise<void> {
  const i = Deno.args.indexOf("--rounds");
  const rounds = i >= 0 ? Number(Deno.args[i + 1]) : 20;
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    manager: { bgp: { advertisableRanges: ["10.64.0.0/10"] } },
  });
  const [n1, n2] = stack.nodes;
  const fabric = await startFabric(cleanup, stack.nodes.map((n) => n.sim.underlayIp));
  for (const node of stack.nodes) await speakBgp(cleanup, node);
  await call(stack, "POST", "tenants", { name: "acme" });
  // A network with a pod on n2 throughout: its session is up before the first round.
  await network(stack, "stay", "10.90.255.0/24");
  const stay = await pod(n2, "stay", "stay");
  await until(fabric, (m) => m.has("10.90.255.0/24"));

  const created: number[] = [];
  const afterAdd: number[] = [];
  const withdrawn: number[] = [];
  log(`bgp: ${rounds} rounds of create + ADD → learned, PATCH off → withdrawn`);
  for (let r = 0; r < rounds; r++) {
    const cidr = `10.90.${r}.0/24`;
    const t0 = performance.now();
    await network(stack, `b${r}`, cidr);
    const p = await pod(n1, `p${r}`, `b${r}`);
    const added = performance.now();
    await until(fabric, (m) => m.has(cidr));
    const learned = performance.now();
    created.push(learned - t0);
    afterAdd.push(learned - added);
    const t1 = performance.now();
    await call(stack, "PATCH", `tenants/acme/networks/b${r}`, { advertise: false });
    await until(fabric, (m) => !m.has(cidr));
    withdrawn.push(performance.now() - t1);
    await p.del();
    await call(stack, "DELETE", `tenants/acme/networks/b${r}`);
  }
  const stops: number[] = [];
  const starts: number[] = [];
  for (let r = 0; r < 3; r++) {
    const t0 = performance.now();
    await n2.stopAgent();
    await until(fabric, (m) => !m.has(`${stay.ip}/32`));
    stops.push(performance.now() - t0);
    const t1 = performance.now();
    await n2.startAgent();
    await until(fabric, (m) => m.has(`${stay.ip}/32`));
    starts.push(performance.now() - t1);
  }
  console.log(JSON.stringify(
    {
      rounds,
      createAndAddToLearnedMs: figures(created),
      addAnsweredToLearnedMs: figures(afterAdd),
      patchOffToWithdrawnMs: figures(withdrawn),
      agentStopToWithdrawnMs: figures(stops),
      agentStartToLearnedMs: figures(starts),
    },
    null,
    2,
  ));
}

function figures(ms: number[]): { median: number; p90: number; max: number } {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]);
  return { median: at(0.5), p90: at(0.9), max: Math.round(s[s.length - 1]) };
}

/** Polls the router's BIRD until `done` holds. */
async function until(fabric: Fabric, done: (m: Map<string, string[]>) => boolean) {
  const deadline = performance.now() + BOUND_MS;
  while (!done(await fabric.learned())) {
    if (performance.now() > deadline) throw new Error(`not converged within ${BOUND_MS} ms`);
  }
}

async function network(stack: Stack, name: string, cidr: string): Promise<void> {
  const gateway = cidr.replace(/0\/24$/, "1");
  await call(stack, "POST", "tenants/acme/networks", { name, cidr, gateway, advertise: true });
}

async function pod(node: StackNode, name: string, network: string) {
  const p = await makePod(node, name, "acme", knitterList([network], [], "1.0.0"));
  const r = await p.add();
  if (r.code !== 0) throw new Error(`ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const ip = String(r.out.ips[0].address).split("/")[0];
  return Object.assign(p, { ip }) as Pod & { ip: string };
}

async function call(stack: Stack, method: string, path: string, body?: unknown) {
  const r = await stack.api(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
}

if (import.meta.main) await main();
