/**
 * A service reached through a router end to end (issue 28; agent/PIPELINE.md, "Services", "Through
 * a router"): two simulated nodes with real Open vSwitch (userspace datapath, conntrack NAT, select
 * groups). acme's router joins red and blue; the service's VIP is on blue, its three backends on
 * n2. A client on red on n1 (a node with no pod on blue: its agent balances for the routed network)
 * and one on red on n2 (the backends' node: their replies are routed back) reach the VIP by TCP,
 * spread over the backends, and exchange a payload; green (on no router) and globex (the same
 * CIDRs, no router) do not reach it.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type StackNode, startStack } from "../devstack/stack.ts";
import { knitterList, makePod, podBook } from "./support/pods.ts";
import { startReady } from "./support/traffic.ts";
import { api } from "./support/stack_api.ts";
import { knitctlOn } from "./support/knitctl_stack.ts";
import { expectExit } from "../knitctl/test_support.ts";
import type { TraceReport } from "../knitctl/trace.ts";
import {
  assertSpread,
  bucketsAre,
  count,
  hold,
  ns,
  PEER,
  portId,
  TARGET,
} from "./support/service_checks.ts";

Deno.test("e2e services routed: a client on another network behind the tenant's router reaches the VIP, spread over the backends; no router, no VIP", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  for (const name of ["acme", "globex"]) await api(stack, "POST", "tenants", { name }, 201);
  const nets = [
    { name: "red", cidr: "10.91.0.0/24", gateway: "10.91.0.1" },
    { name: "blue", cidr: "10.92.0.0/24", gateway: "10.92.0.1" },
  ];
  for (const body of [...nets, { name: "green", cidr: "10.93.0.0/24", gateway: "10.93.0.1" }]) {
    await api(stack, "POST", "tenants/acme/networks", body, 201);
  }
  // globex: the same CIDRs, no router.
  for (const body of nets) await api(stack, "POST", "tenants/globex/networks", body, 201);
  await api(stack, "POST", "tenants/acme/routers", { name: "planes", networks: ["red", "blue"] });

  const book = podBook();
  const pod = async (node: StackNode, name: string, tenant: string, net: string) => {
    const p = await makePod(node, name, tenant, knitterList([net]));
    await book.add(p);
    return p;
  };
  const backends = [
    await pod(n2, "b1", "acme", "blue"),
    await pod(n2, "b2", "acme", "blue"),
    await pod(n2, "b3", "acme", "blue"),
  ];
  for (const b of backends) {
    const script = [PEER, "serve", String(TARGET), b.name, "600"];
    const server = await startReady(cleanup, ns(b), script, { what: `backend ${b.name}` });
    cleanup.defer(() => server.stop());
  }
  const made = await api(stack, "POST", "tenants/acme/services", {
    name: "front",
    network: "blue",
    ports: [{ protocol: "TCP", port: 80, targetPort: TARGET }],
    backends: await Promise.all(backends.map((b) => portId(stack, b))),
  }, 201);
  const vip = made.vip as string;
  const ips = backends.map((b) => book.ips[b.name]);
  const names = backends.map((b) => b.name);
  const far = await pod(n1, "red-1", "acme", "red");
  const near = await pod(n2, "red-2", "acme", "red");

  for (
    const [client, node, where] of [[far, n1, "n1, no pod on blue"], [near, n2, "n2"]] as const
  ) {
    await t.step(
      `red on ${where}: 200 connections to the VIP through the router spread over the 3 backends, and a payload echoed`,
      async () => {
        await bucketsAre(node, ips);
        assertSpread(await count(client, vip, 200), names, 200, `red on ${node.name}`);
        const stream = hold(client, vip, 2);
        cleanup.pid(stream.pid);
        const r = await stream.result;
        assert.ok(r.ok && r.rounds > 0 && names.includes(r.name), JSON.stringify(r));
      },
    );
  }

  await t.step(
    "knitctl trace --offline from red on n1 to the VIP names the group and every candidate",
    async () => {
      const ctl = await knitctlOn(stack);
      const args = ["trace", "--offline", "--src", book.ips[far.name], "-t", "acme", "--dst", vip];
      const r = expectExit(
        await ctl([...args, "--proto", "tcp", "--dport", "80", "-o", "json"]),
        0,
        args.join(" "),
      ).json() as TraceReport;
      const steps = r.hops[0].steps;
      assert.deepEqual(
        steps.slice(2, 6).map((s) => s.kind),
        ["routeIn", "routeTo", "serviceVipRouted", "serviceNew"],
        JSON.stringify(steps),
      );
      const candidates = [...ips].sort().map((ip) => `${ip}:${TARGET}`).join(", ");
      assert.ok(steps[5].what.includes(`over ${candidates} `), steps[5].what);
    },
  );

  await t.step(
    "green (on no router) and globex (no router, the same CIDRs) do not reach the VIP",
    async () => {
      for (
        const [name, tenant, net] of [["green-1", "acme", "green"], ["gred-1", "globex", "red"]]
      ) {
        const c = await count(await pod(n1, name, tenant, net), vip, 3);
        assert.equal(c.failures, 3, `${tenant}/${net} reached the VIP: ${JSON.stringify(c)}`);
      }
      // And the routed client still does.
      assert.equal((await count(far, vip, 5)).failures, 0);
    },
  );
});
