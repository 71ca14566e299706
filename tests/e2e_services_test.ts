/**
 * Services end to end (issue 28; agent/PIPELINE.md, "Services"): two simulated nodes with real Open
 * vSwitch (userspace datapath, conntrack NAT, select groups), a service made through the manager's
 * API over backend pods on both nodes, reached by a client pod at its VIP. New connections spread
 * over every backend; with ClientIP affinity one client's all go to one backend; a backend deleted
 * mid-run gets no new connection while the streams to the others go on; the same on a VLAN network;
 * another tenant's pod, on a network of the same addresses, does not reach the VIP; security
 * groups check the real backend and its port.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import { knitterList, makePod, type Pod, podBook } from "./support/pods.ts";
import { startReady } from "./support/traffic.ts";
import { api } from "./support/stack_api.ts";
import {
  assertSpread,
  bucketsAre,
  CONVERGE_MS,
  count,
  groups,
  hold,
  ns,
  PEER,
  portId,
  TARGET,
} from "./support/service_checks.ts";

Deno.test("e2e services: a VIP spread over backends on two nodes (VXLAN and VLAN), affinity, a backend leaving mid-run, another tenant kept out", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  const [n1, n2] = stack.nodes;
  await api(
    stack,
    "POST",
    "physnets",
    { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] },
    201,
  );
  for (const name of ["acme", "globex"]) await api(stack, "POST", "tenants", { name }, 201);
  const network = (tenant: string, body: Record<string, unknown>) =>
    api(stack, "POST", `tenants/${tenant}/networks`, body, 201);
  await network("acme", { name: "data", cidr: "10.70.0.0/24", gateway: "10.70.0.1" });
  await network("acme", {
    name: "storage",
    type: "vlan",
    physnet: "phys1",
    cidr: "10.71.0.0/24",
    gateway: "10.71.0.1",
  });
  // Another tenant, the same addresses.
  await network("globex", { name: "data", cidr: "10.70.0.0/24", gateway: "10.70.0.1" });

  const book = podBook();
  const pod = async (node: StackNode, name: string, tenant: string, net: string) => {
    const p = await makePod(node, name, tenant, knitterList([net]));
    await book.add(p);
    return p;
  };
  /** Backends serving their name on TARGET; the client on n1 with two of them, one on n2. */
  const world = async (net: string, prefix: string) => {
    const client = await pod(n1, `${prefix}c`, "acme", net);
    const backends = [
      await pod(n1, `${prefix}b1`, "acme", net),
      await pod(n1, `${prefix}b2`, "acme", net),
      await pod(n2, `${prefix}b3`, "acme", net),
    ];
    for (const b of backends) {
      const script = [PEER, "serve", String(TARGET), b.name, "600"];
      const server = await startReady(cleanup, ns(b), script, { what: `backend ${b.name}` });
      cleanup.defer(() => server.stop());
    }
    const ids = await Promise.all(backends.map((b) => portId(stack, b)));
    const made = await api(stack, "POST", "tenants/acme/services", {
      name: `${prefix}front`,
      network: net,
      ports: [{ protocol: "TCP", port: 80, targetPort: TARGET }],
      backends: ids,
    }, 201);
    assert.equal(made.status.endpoints.length, 3);
    const ips = backends.map((b) => book.ips[b.name]);
    await bucketsAre(n1, ips);
    return { client, backends, ids, vip: made.vip as string, ips };
  };

  const vx = await world("data", "x");
  const names = vx.backends.map((b) => b.name);

  await t.step(
    "VXLAN: 200 connections to the VIP spread over the 3 backends (one on the other node)",
    async () => {
      assertSpread(await count(vx.client, vx.vip, 200), names, 200, "vxlan");
    },
  );

  await t.step(
    "VXLAN: a backend connecting to its own service (hairpin) is answered by every backend, itself too, which sees the VIP as the client",
    async () => {
      const [self] = vx.backends;
      const c = await count(self, vx.vip, 60);
      assert.equal(c.failures, 0, JSON.stringify(c));
      assert.ok((c.names[self.name] ?? 0) > 0, `itself among the backends: ${JSON.stringify(c)}`);
      assert.deepEqual(c.seenAs[self.name], [vx.vip], JSON.stringify(c));
      // The others see the pod's own address: no source NAT where none is needed.
      for (const b of vx.backends.slice(1)) {
        assert.deepEqual(c.seenAs[b.name], [book.ips[self.name]], JSON.stringify(c));
      }
    },
  );

  await t.step(
    "VXLAN: with ClientIP affinity every connection of the client goes to one backend",
    async () => {
      await api(stack, "PUT", "tenants/acme/services/xfront", {
        ports: [{ protocol: "TCP", port: 80, targetPort: TARGET }],
        backends: vx.ids,
        sessionAffinity: "ClientIP",
      }, 200);
      await waitFor(
        "n1's group hashing the client address only",
        async () => (await groups(n1)).some((g) => g.includes("fields=ip_src")),
        CONVERGE_MS,
      );
      const c = await count(vx.client, vx.vip, 60);
      assert.equal(c.failures, 0, JSON.stringify(c));
      assert.deepEqual(Object.values(c.names), [60], `one backend: ${JSON.stringify(c)}`);
      await api(stack, "PUT", "tenants/acme/services/xfront", {
        ports: [{ protocol: "TCP", port: 80, targetPort: TARGET }],
        backends: vx.ids,
      }, 200);
      await waitFor(
        "n1's group hashing connections again",
        async () => (await groups(n1)).every((g) => g.includes("fields(ip_src,nw_proto,tcp_src)")),
        CONVERGE_MS,
      );
    },
  );

  await t.step(
    "VXLAN: a backend deleted mid-run gets no new connection; the streams to the others never break",
    async () => {
      // Streams from the client's source ports: each lands where the hash says.
      const streams: ReturnType<typeof hold>[] = [];
      for (let i = 0; i < 12; i++) {
        const h = hold(vx.client, vx.vip, 12);
        streams.push(h);
        cleanup.pid(h.pid);
      }
      // Let them connect, then take b3 (on n2) away: its pod deleted as kubelet does.
      await new Promise((r) => setTimeout(r, 2000));
      const gone = vx.backends[2];
      const del = await gone.del();
      assert.equal(del.code, 0, del.stderr);
      await bucketsAre(n1, vx.ips.slice(0, 2));
      const after = await count(vx.client, vx.vip, 100);
      assert.equal(after.failures, 0, JSON.stringify(after));
      assert.equal(after.names[gone.name], undefined, `no new connection to ${gone.name}`);
      assert.deepEqual(Object.keys(after.names).sort(), names.slice(0, 2).sort());
      const results = await Promise.all(streams.map((s) => s.result));
      const toLive = results.filter((r) => r.name !== gone.name);
      assert.ok(toLive.length > 0, `some streams to live backends: ${JSON.stringify(results)}`);
      for (const r of toLive) assert.ok(r.ok, `a stream to ${r.name} broke: ${JSON.stringify(r)}`);
    },
  );

  await t.step(
    "another tenant's pod on a network of the same addresses does not reach the VIP",
    async () => {
      const g = await pod(n1, "g1", "globex", "data");
      const c = await count(g, vx.vip, 3);
      assert.equal(c.failures, 3, `globex reached acme's VIP: ${JSON.stringify(c)}`);
      // And acme's client still does.
      assert.equal((await count(vx.client, vx.vip, 5)).failures, 0);
    },
  );

  await t.step(
    "security groups see the real backend: its ingress rule on the target port lets the VIP's connections in, and without it none",
    async () => {
      const rule = (port: number) => [
        { direction: "ingress", protocol: "tcp", ports: String(port), peer: { group: "client" } },
      ];
      await api(stack, "POST", "tenants/acme/security-groups", { name: "web", rules: [] }, 201);
      await api(stack, "POST", "tenants/acme/security-groups", {
        name: "client",
        rules: [{ direction: "egress", protocol: "tcp", peer: { group: "web" } }],
      }, 201);
      await api(stack, "PUT", "tenants/acme/security-groups/web", { rules: rule(TARGET) }, 200);
      const setGroups = async (pod: Pod, groups: string[]) => {
        const id = await portId(stack, pod);
        await api(stack, "PUT", `tenants/acme/networks/data/ports/${id}`, {
          securityGroups: groups,
        }, 200);
      };
      await setGroups(vx.client, ["client"]);
      for (const b of vx.backends.slice(0, 2)) await setGroups(b, ["web"]);
      await waitFor(
        "the groups' flows in",
        async () => (await count(vx.client, vx.vip, 4)).failures === 0,
        CONVERGE_MS,
      );
      const allowed = await count(vx.client, vx.vip, 40);
      assert.equal(allowed.failures, 0, JSON.stringify(allowed));
      assert.deepEqual(Object.keys(allowed.names).sort(), names.slice(0, 2).sort());
      // The rule names the backends' port (8080), not the VIP's (80): on 9090 nothing gets in.
      await api(stack, "PUT", "tenants/acme/security-groups/web", { rules: rule(9090) }, 200);
      await waitFor(
        "the VIP refused by the backends' groups",
        async () => (await count(vx.client, vx.vip, 2)).failures === 2,
        CONVERGE_MS,
      );
      assert.equal((await count(vx.client, vx.vip, 4)).failures, 4);
    },
  );

  await t.step(
    "VLAN: 200 connections to the VIP spread over the 3 backends (one on the other node)",
    async () => {
      const vl = await world("storage", "v");
      assertSpread(
        await count(vl.client, vl.vip, 200),
        vl.backends.map((b) => b.name),
        200,
        "vlan",
      );
    },
  );
});
