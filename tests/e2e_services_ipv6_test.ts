/**
 * Services on IPv6, end to end (issue 29 for issue 28's services; agent/PIPELINE.md, "Services"):
 * two simulated nodes with real Open vSwitch (userspace datapath, conntrack NAT of IPv6, select
 * groups). On an IPv6-only network, a VIP from its pool spread over three backends, one on the other
 * node; a backend reaching its own VIP (hairpin) sees the VIP as the client; with ClientIP affinity one client's connections go to one backend; another tenant's pod on
 * a network of the same addresses does not reach it; UDP datagrams of 1,200 bytes are spread and
 * echoed intact. On a dual-stack network, a service with both
 * families answers on both VIPs.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { knitterList, makePod, podBook } from "./support/pods.ts";
import { api } from "./support/stack_api.ts";
import { knitctlOn } from "./support/knitctl_stack.ts";
import { expectExit } from "../knitctl/test_support.ts";
import type { TraceReport } from "../knitctl/trace.ts";
import {
  assertSpread,
  CONVERGE_MS,
  count,
  countUdp,
  groups,
  portId,
  serveBackends,
  serveUdpBackends,
  TARGET,
} from "./support/service_checks.ts";

/** Waits until a group of the node's br-int has `n` IPv6 buckets in `prefix` (and `also`). */
function bucketsIn(node: StackNode, prefix: string, n: number, also = "") {
  return waitFor(`${node.name}'s group over ${n} backends in ${prefix}`, async () => {
    return (await groups(node)).some((g) =>
      g.includes(also) && g.split(`nat(dst=[${prefix}`).length - 1 === n
    );
  }, CONVERGE_MS);
}

Deno.test("e2e IPv6 services: an IPv6 VIP spread over backends on two nodes, affinity, another tenant kept out; a dual-stack service on both VIPs", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  for (const name of ["acme", "globex"]) await api(stack, "POST", "tenants", { name }, 201);
  const network = (tenant: string, body: Record<string, unknown>) =>
    api(stack, "POST", `tenants/${tenant}/networks`, body, 201);
  await network("acme", { name: "six", cidr: "fd00:72::/120", gateway: "fd00:72::1" });
  await network("acme", {
    name: "dual",
    cidr: "10.73.0.0/24",
    gateway: "10.73.0.1",
    cidr6: "fd00:73::/64",
    gateway6: "fd00:73::1",
  });
  // Another tenant, the same addresses.
  await network("globex", { name: "six", cidr: "fd00:72::/120", gateway: "fd00:72::1" });

  const book = podBook();
  const pod = async (node: StackNode, name: string, net: string, tenant = "acme") => {
    const p = await makePod(node, name, tenant, knitterList([net]));
    await book.add(p);
    return p;
  };
  const client = await pod(n1, "c6", "six");
  const backends = [
    await pod(n1, "s1", "six"),
    await pod(n1, "s2", "six"),
    await pod(n2, "s3", "six"),
  ];
  await serveBackends(cleanup, backends, "::");
  await serveUdpBackends(cleanup, backends);
  const ids = await Promise.all(backends.map((b) => portId(stack, b)));
  const body = {
    ports: [
      { protocol: "TCP", port: 80, targetPort: TARGET },
      { protocol: "UDP", port: 53, targetPort: TARGET },
    ],
    backends: ids,
  };
  const made = await api(stack, "POST", "tenants/acme/services", {
    name: "front",
    network: "six",
    ...body,
  }, 201);
  const vip = made.vip as string;
  assert.match(vip, /^fd00:72::[0-9a-f]+$/);
  assert.equal(made.status.endpoints.length, 3);
  await bucketsIn(n1, "fd00:72::", 3);
  const names = backends.map((b) => b.name);

  await t.step(
    "200 IPv6 connections to the VIP spread over the 3 backends (one on the other node)",
    async () => {
      const c = await count(client, vip, 200);
      assertSpread(c, names, 200, "ipv6");
      // No source NAT: every backend sees the client's own address.
      for (const b of names) assert.deepEqual(c.seenAs[b], [book.ips[client.name]], b);
    },
  );

  await t.step(
    "UDP over IPv6: 150 exchanges of 1,200 bytes, each from a new source port, spread over the 3 backends and echoed intact",
    async () => {
      const c = await countUdp(client, vip, 150, 1200);
      assertSpread(c, names, 150, "udp6");
      for (const b of names) assert.deepEqual(c.seenAs[b], [book.ips[client.name]], b);
    },
  );

  await t.step(
    "through the tenant's IPv6 router: clients on another IPv6 network on both nodes reach the VIP, spread over the backends; knitctl trace names the candidates",
    async () => {
      await network("acme", { name: "six2", cidr: "fd00:74::/120", gateway: "fd00:74::1" });
      await api(stack, "POST", "tenants/acme/routers", {
        name: "planes",
        networks: ["six", "six2"],
      }, 201);
      for (const node of [n1, n2]) {
        const routed = await pod(node, `r6${node.name}`, "six2");
        await bucketsIn(node, "fd00:72::", 3);
        assertSpread(await count(routed, vip, 150), names, 150, `routed on ${node.name}`);
      }
      const ctl = await knitctlOn(stack);
      const from = book.ips[`r6${n1.name}`];
      const args = ["trace", "--offline", "--src", from, "-t", "acme", "--dst", vip];
      const r = expectExit(
        await ctl([...args, "--proto", "tcp", "--dport", "80", "-o", "json"]),
        0,
        args.join(" "),
      ).json() as TraceReport;
      const kinds = r.hops[0].steps.map((s) => s.kind);
      assert.ok(kinds.includes("serviceVipRouted") && kinds.includes("serviceNew"), kinds.join());
      const news = r.hops[0].steps.find((s) => s.kind === "serviceNew")!;
      for (const b of names) assert.ok(news.what.includes(`[${book.ips[b]}]:${TARGET}`), news.what);
    },
  );

  await t.step(
    "a backend connecting to its own IPv6 VIP (hairpin) is answered by every backend, itself too, which sees the VIP as the client",
    async () => {
      const [self] = backends;
      const c = await count(self, vip, 60);
      assert.equal(c.failures, 0, JSON.stringify(c));
      assert.ok((c.names[self.name] ?? 0) > 0, `itself among the backends: ${JSON.stringify(c)}`);
      assert.deepEqual(c.seenAs[self.name], [vip], JSON.stringify(c));
      for (const b of backends.slice(1)) {
        assert.deepEqual(c.seenAs[b.name], [book.ips[self.name]], JSON.stringify(c));
      }
    },
  );

  await t.step(
    "with ClientIP affinity every connection of the client goes to one backend",
    async () => {
      await api(stack, "PUT", "tenants/acme/services/front", {
        ...body,
        sessionAffinity: "ClientIP",
      }, 200);
      await bucketsIn(n1, "fd00:72::", 3, "fields=ipv6_src");
      const c = await count(client, vip, 60);
      assert.equal(c.failures, 0, JSON.stringify(c));
      assert.deepEqual(Object.values(c.names), [60], `one backend: ${JSON.stringify(c)}`);
    },
  );

  await t.step(
    "another tenant's pod on a network of the same addresses does not reach the VIP",
    async () => {
      const stranger = await pod(n1, "g6", "six", "globex");
      const c = await count(stranger, vip, 3);
      assert.equal(c.failures, 3, JSON.stringify(c));
    },
  );

  await t.step("a dual-stack service answers on its IPv4 and its IPv6 VIP", async () => {
    const dc = await pod(n1, "dc", "dual");
    const dualBackends = [await pod(n1, "d1", "dual"), await pod(n2, "d2", "dual")];
    await serveBackends(cleanup, dualBackends, "::");
    const both = await api(stack, "POST", "tenants/acme/services", {
      name: "both",
      network: "dual",
      ipFamilies: ["IPv4", "IPv6"],
      ports: [{ protocol: "TCP", port: 80, targetPort: TARGET }],
      backends: await Promise.all(dualBackends.map((b) => portId(stack, b))),
    }, 201);
    assert.equal(both.status.endpoints.length, 4);
    await bucketsIn(n1, "fd00:73::", 2);
    for (const v of both.vips as string[]) {
      const c = await count(dc, v, 100);
      assert.equal(c.failures, 0, `${v}: ${JSON.stringify(c)}`);
      assert.deepEqual(Object.keys(c.names).sort(), ["d1", "d2"], `${v}: ${JSON.stringify(c)}`);
    }
  });
});
