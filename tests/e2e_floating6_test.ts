/**
 * IPv6 floating addresses end to end, the twin of e2e_floating_test.ts (agent/README.md, "Floating
 * addresses"): two simulated nodes whose agents run BIRD 2, an "external router" netns as their BGP
 * peer with a host behind it (support/bgp_fabric.ts). A tenant takes an address of the admin's IPv6
 * floating pool and binds it to its dual-stack pod's port: the node hosting the pod announces the
 * /128, the host reaches the pod by TCP at the floating address (1:1 NAT in the node's ip6 table),
 * and the pod's connections out reach the host from the floating address. The pod made again on the
 * other node with the same port ID: the address follows it. Unbound: withdrawn, no longer reached.
 * Without BGP, on a flat external network, the hosting node answers neighbour solicitations for it
 * (proxy NDP), and stops once it is unbound.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";
import {
  type Fabric,
  forgets,
  HOST6,
  HOST6_SUBNET,
  learns,
  ROUTER6,
  speakBgp,
  startFabric,
  underlay6,
} from "./support/bgp_fabric.ts";
import { startCapture } from "./support/capture.ts";
import {
  LEARN_MS,
  macOf,
  neighbourOwner,
  oneSandbox,
  podToHost,
  proxies,
  untilHostReaches,
} from "./support/floating_lan.ts";
import { addressesOf, ipNetnsName, knitterList, makePod, type Pod } from "./support/pods.ts";
import { api, tenantApi } from "./support/stack_api.ts";
import { tcpExchange } from "./support/traffic.ts";

const ACME = "acme-tenant-token-for-the-floating6-test";
const { sandbox: SANDBOX, portId: PORT_ID } = oneSandbox(
  "f600d0000000000000000000000000ab",
  "pod-uid-floating6-1",
);

Deno.test("e2e floating IPv6 with BGP: the host reaches a pod at its IPv6 floating address by TCP and the pod reaches it from there; the /128 follows the pod to another node; unbound, withdrawn and no longer reached", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await acmeStack(cleanup);
  const [n1, n2] = stack.nodes;
  const [ip1, ip2] = [n1, n2].map((n) => n.sim.underlayIp);
  const fabric = await startFabric(cleanup, [ip1, ip2]);
  for (const node of stack.nodes) await speakBgp(cleanup, node);
  let { fip, web } = await boundPod(stack, "2001:db8:f::/124");

  await t.step("the router learns the floating /128 from the pod's node only", async () => {
    await learns(fabric, new Map([[`${fip}/128`, [underlay6(ip1)]]]));
  });

  await t.step(
    "the host reaches the pod by TCP at the floating address; the pod sees the host",
    async () => {
      await host2pod(cleanup, fabric, web, fip);
    },
  );

  await t.step("the pod's connection to the host comes from the floating address", async () => {
    await podToHost(cleanup, fabric, ns(web), { host: HOST6, from: fip });
  });

  await t.step(
    "the pod made again on the other node with the same port: the address follows",
    async () => {
      assert.equal((await web.del()).code, 0, "DEL web on n1");
      web = await pod(n2);
      await learns(fabric, new Map([[`${fip}/128`, [underlay6(ip2)]]]));
      await host2pod(cleanup, fabric, web, fip);
      await podToHost(cleanup, fabric, ns(web), { host: HOST6, from: fip });
    },
  );

  await t.step("unbound: withdrawn and no longer reached", async () => {
    await unbind(stack, fip);
    await forgets(fabric, [`${fip}/128`]);
    const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 1000, { seconds: 3 });
    assert.equal(tcp.ok, false, `host to the unbound ${fip}: ${JSON.stringify(tcp)}`);
  });
  assert.equal((await web.del()).code, 0, "DEL web");
});

Deno.test("e2e floating IPv6 without BGP: on a flat external network the hosting node answers neighbour solicitations for the address (proxy NDP); TCP both ways; unbound, no answer", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await acmeStack(cleanup);
  const fabric = await startFabric(cleanup, []);
  // The nodes on the router's IPv6 LAN (fd99::/64), the host behind the router.
  for (const node of stack.nodes) {
    await run(["ip", "-n", node.sim.netns, "-batch", "-"], {
      stdin: `addr add ${underlay6(node.sim.underlayIp)}/64 dev br-phy nodad\n` +
        `route add ${HOST6_SUBNET} via ${ROUTER6}\n`,
    });
  }
  // The pool on the LAN: the router asks for its addresses by neighbour solicitation.
  let { fip, web } = await boundPod(stack, "fd99::f0/124");
  const [n1, n2] = stack.nodes;

  await t.step(
    "n1 answers for it; the host reaches the pod, the pod the host from it",
    async () => {
      await untilHostReaches(cleanup, fabric, ns(web), fip);
      assert.equal(await neighbourOwner(fabric, fip), await macOf(n1));
      assert.ok(!await proxies(n2, fip), "n2 hosts no pod of it: no answer");
      await host2pod(cleanup, fabric, web, fip);
      await podToHost(cleanup, fabric, ns(web), { host: HOST6, from: fip });
    },
  );

  await t.step(
    "moved to n2: n1 answers no more, n2 does; the host reaches the pod on n2, the pod the host from it",
    async () => {
      assert.equal((await web.del()).code, 0, "DEL web on n1");
      web = await pod(n2);
      await waitFor("n2 answers for the address", () => proxies(n2, fip), LEARN_MS);
      await waitFor("n1 answers no more", async () => !await proxies(n1, fip), LEARN_MS);
      // No unsolicited advertisement (agent/README.md): a router that cached n1's MAC for the
      // address sends to n1 still, which routes it on to n2 on the LAN (n2 answers for it).
      await untilHostReaches(cleanup, fabric, ns(web), fip);
      await host2pod(cleanup, fabric, web, fip);
      await podToHost(cleanup, fabric, ns(web), { host: HOST6, from: fip });
    },
  );

  await t.step("unbound: no node answers for it", async () => {
    await unbind(stack, fip);
    await waitFor(
      "n2 stops answering for the address",
      async () => !await proxies(n2, fip),
      LEARN_MS,
    );
    await run(["ip", "-n", fabric.router, "-6", "neigh", "flush", "dev", "eth0"]);
    const tcp = await tcpExchange(cleanup, fabric.host, ns(web), fip, 1000, { seconds: 3 });
    assert.equal(tcp.ok, false, `host to the unbound ${fip}: ${JSON.stringify(tcp)}`);
    assert.equal(await neighbourOwner(fabric, fip), undefined);
  });
  assert.equal((await web.del()).code, 0, "DEL web");
});

/** Two nodes; tenant acme (by its token) with the dual-stack network front. */
async function acmeStack(cleanup: Cleanup): Promise<Stack> {
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    tokens: [{ token: ACME, scope: "tenant", tenant: "acme" }],
  });
  await api(stack, "POST", "tenants", { name: "acme" });
  await api(stack, "POST", "tenants/acme/networks", {
    name: "front",
    cidr: "10.90.0.0/24",
    gateway: "10.90.0.1",
    cidr6: "fd90::/64",
    gateway6: "fd90::1",
  });
  return stack;
}

/**
 * The admin's IPv6 pool ext6 (`cidr`); acme takes its first address and binds it to its pod web,
 * made on the first node.
 */
async function boundPod(stack: Stack, cidr: string): Promise<{ fip: string; web: Added }> {
  await api(stack, "POST", "floating-pools", { name: "ext6", cidrs: [cidr] });
  const taken = await tenantApi(stack, ACME, {
    method: "POST",
    path: "tenants/acme/floating-ips",
    body: { pool: "ext6" },
  }, 201);
  const fip = taken.address as string;
  const web = await pod(stack.nodes[0]);
  const bound = await tenantApi(stack, ACME, {
    method: "POST",
    path: `tenants/acme/floating-ips/${fip}/bind`,
    body: { network: "front", port: PORT_ID },
  }, 200);
  assert.equal(bound.port.id, PORT_ID);
  return { fip, web };
}

async function unbind(stack: Stack, fip: string): Promise<void> {
  await tenantApi(stack, ACME, {
    method: "POST",
    path: `tenants/acme/floating-ips/${fip}/unbind`,
  }, 200);
}

/** The host opens a TCP connection to the floating address; the pod sees it from the host. */
async function host2pod(cleanup: Cleanup, fabric: Fabric, p: Added, fip: string) {
  const cap = await startCapture(cleanup, ns(p), "eth0", `tcp and dst host ${p.ip6}`, {
    count: 1,
    timeoutMs: 20_000,
  });
  const tcp = await tcpExchange(cleanup, fabric.host, ns(p), fip, 100_000);
  assert.ok(tcp.ok, `host to ${fip}: ${JSON.stringify(tcp)}`);
  assert.equal(tcp.received, 100_000);
  const seen = await cap.done(1000);
  assert.equal(seen.length, 1, `${p.name} saw the connection: ${seen}`);
  assert.ok(seen[0].includes(` ${HOST6}.`) && seen[0].includes(`> ${p.ip6}.`), seen[0]);
}

interface Added extends Pod {
  ip6: string;
}

/** acme's pod web on `node`, on front, with the test's one port ID. */
async function pod(node: StackNode): Promise<Added> {
  const p = await makePod(node, "web", "acme", knitterList(["front"], [], "1.0.0"), SANDBOX);
  const r = await p.add();
  assert.equal(r.code, 0, `ADD web: ${JSON.stringify(r.out)} ${r.stderr}`);
  const ip6 = addressesOf(r.out).map((a) => a.address.split("/")[0]).find((a) => a.includes(":"));
  assert.ok(ip6, `web has an IPv6 address: ${JSON.stringify(r.out)}`);
  return Object.assign(p, { ip6 });
}

function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}
