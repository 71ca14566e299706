/**
 * BGP advertisement end to end (agent/README.md, "BGP advertisement"): two simulated nodes whose
 * agents run BIRD 2, and an "external router" netns running BIRD 2 as their peer, with a host
 * behind it. The router learns each advertised network, IPv4 and IPv6, from the nodes that host
 * its pods, and each pod's host route from its own node; the host reaches the pods over TCP and
 * the pods see its real address (no NAT); a network not advertised is not learned nor reached; a
 * tenant cannot advertise; routes are withdrawn when the network stops being advertised, when its
 * pods and the network go, and when a node's agent stops.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import { type Stack, type StackNode, startStack } from "../devstack/stack.ts";
import {
  forgets,
  HOST,
  HOST6,
  learns,
  speakBgp,
  startFabric,
  underlay6,
} from "./support/bgp_fabric.ts";
import { startCapture } from "./support/capture.ts";
import { addressesOf, ipNetnsName, knitterList, makePod, type Pod } from "./support/pods.ts";
import { tcpExchange } from "./support/traffic.ts";

const TENANT_TOKEN = "acme-tenant-token-for-the-bgp-test";

Deno.test("e2e bgp: advertised networks learned by an external router with the right next hops, v4 and v6; reached from a host behind it without NAT; not-advertised ones not; withdrawn on PATCH, deletion and agent stop; tenants refused", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    manager: { bgp: { advertisableRanges: ["10.80.0.0/12", "fd80::/16"] } },
    tokens: [{ token: TENANT_TOKEN, scope: "tenant", tenant: "acme" }],
  });
  const [n1, n2] = stack.nodes;
  const fabric = await startFabric(cleanup, stack.nodes.map((n) => n.sim.underlayIp));
  for (const node of stack.nodes) await speakBgp(cleanup, node);
  for (const name of ["acme", "globex"]) await api(stack, "POST", "tenants", { name }, 201);
  await api(stack, "POST", "tenants/acme/networks", {
    name: "front",
    cidr: "10.80.0.0/24",
    gateway: "10.80.0.1",
    cidr6: "fd80:1::/64",
    gateway6: "fd80:1::1",
    advertise: true,
  }, 201);
  await api(stack, "POST", "tenants/globex/networks", {
    name: "back",
    cidr: "10.81.0.0/24",
    gateway: "10.81.0.1",
  }, 201);
  const f1 = await pod(n1, "f1", "acme", "front");
  const f2 = await pod(n2, "f2", "acme", "front");
  const b1 = await pod(n1, "b1", "globex", "back");
  const [ip1, ip2] = [n1, n2].map((n) => n.sim.underlayIp);

  await t.step(
    "the router learns the network from both nodes, each pod from its own, IPv4 and IPv6",
    async () => {
      const want = new Map([
        ["10.80.0.0/24", [ip1, ip2].sort()],
        [`${f1.ip}/32`, [ip1]],
        [`${f2.ip}/32`, [ip2]],
        ["fd80:1::/64", [underlay6(ip1), underlay6(ip2)].sort()],
        [`${f1.ip6}/128`, [underlay6(ip1)]],
        [`${f2.ip6}/128`, [underlay6(ip2)]],
      ]);
      await learns(fabric, want);
    },
  );

  await t.step(
    "the host behind the router reaches each pod over TCP, and the pod sees the host's own address",
    async () => {
      for (const p of [f1, f2]) {
        const cap = await startCapture(cleanup, ns(p), "eth0", `tcp and src host ${HOST}`, {
          count: 1,
          timeoutMs: 20_000,
        });
        const tcp = await tcpExchange(cleanup, fabric.host, ns(p), p.ip, 100_000);
        assert.ok(tcp.ok, `host to ${p.name}: ${JSON.stringify(tcp)}`);
        const seen = await cap.done(1000);
        assert.equal(seen.length, 1, `${p.name} saw the host's address: ${seen}`);
        assert.match(seen[0], new RegExp(`${HOST.replaceAll(".", "\\.")}\\.\\d+ > ${p.ip}\\.`));
      }
    },
  );

  await t.step(
    "the host behind the router reaches each pod over IPv6 TCP too, and the pod sees the host's own address",
    async () => {
      for (const p of [f1, f2]) {
        const cap = await startCapture(cleanup, ns(p), "eth0", `tcp and src host ${HOST6}`, {
          count: 1,
          timeoutMs: 20_000,
        });
        const tcp = await tcpExchange(cleanup, fabric.host, ns(p), p.ip6!, 100_000);
        assert.ok(tcp.ok, `host to ${p.name} over IPv6: ${JSON.stringify(tcp)}`);
        const seen = await cap.done(1000);
        assert.equal(seen.length, 1, `${p.name} saw the host's address: ${seen}`);
        assert.ok(seen[0].includes(`${HOST6}.`) && seen[0].includes(`> ${p.ip6}.`), seen[0]);
      }
    },
  );

  await t.step(
    "an IPv6-only advertised network: learned from the node of its pod, reached from the host over TCP",
    async () => {
      await api(stack, "POST", "tenants/acme/networks", {
        name: "front6",
        cidr: "fd80:2::/64",
        gateway: "fd80:2::1",
        advertise: true,
      }, 201);
      const p = await pod(n1, "f6", "acme", "front6");
      await learns(
        fabric,
        new Map([["fd80:2::/64", [underlay6(ip1)]], [`${p.ip}/128`, [underlay6(ip1)]]]),
      );
      const tcp = await tcpExchange(cleanup, fabric.host, ns(p), p.ip, 100_000);
      assert.ok(tcp.ok, `host to the IPv6-only ${p.name}: ${JSON.stringify(tcp)}`);
      assert.equal((await p.del()).code, 0, "DEL f6");
      await api(stack, "DELETE", "tenants/acme/networks/front6", undefined, 204);
      await forgets(fabric, ["fd80:2::/64", `${p.ip}/128`]);
    },
  );

  await t.step("a network not advertised is neither learned nor reached", async () => {
    const learned = await fabric.learned();
    assert.deepEqual([...learned.keys()].filter((k) => k.startsWith("10.81.")), []);
    const tcp = await tcpExchange(cleanup, fabric.host, ns(b1), b1.ip, 1000, { seconds: 3 });
    assert.equal(tcp.ok, false, `host to the not advertised b1: ${JSON.stringify(tcp)}`);
  });

  await t.step(
    "attack: a tenant cannot advertise, nor can the admin a CIDR that overlaps an advertised one or a public range",
    async () => {
      const own = await stack.api("PATCH", "tenants/acme/networks/front", { advertise: false });
      assert.equal(own.status, 200, "the admin's own change, for contrast");
      await api(stack, "PATCH", "tenants/acme/networks/front", { advertise: true }, 200);
      const r = await fetch(`${stack.managerUrl}/api/v1/tenants/globex/networks/back`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${TENANT_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ advertise: true }),
      });
      await r.body?.cancel();
      assert.ok(r.status === 403 || r.status === 404, `acme on globex's network: ${r.status}`);
      const mine = await fetch(`${stack.managerUrl}/api/v1/tenants/acme/networks`, {
        method: "POST",
        headers: { authorization: `Bearer ${TENANT_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({
          name: "mine",
          cidr: "10.82.0.0/24",
          gateway: "10.82.0.1",
          advertise: true,
        }),
      });
      assert.equal(mine.status, 403, JSON.stringify(await mine.json()));
      await api(stack, "POST", "tenants/globex/networks", {
        name: "copy",
        cidr: "10.80.0.0/24",
        gateway: "10.80.0.1",
        advertise: true,
      }, 409);
      await api(stack, "POST", "tenants/globex/networks", {
        name: "public",
        cidr: "203.0.113.0/24",
        gateway: "203.0.113.1",
        advertise: true,
      }, 400);
      const learned = await fabric.learned();
      assert.deepEqual([...learned.keys()].filter((k) => /^(10\.82|203\.)/.test(k)), []);
    },
  );

  await t.step(
    "withdrawn when the admin stops advertising it, learned again when it starts",
    async () => {
      await api(stack, "PATCH", "tenants/acme/networks/front", { advertise: false }, 200);
      await forgets(fabric, ["10.80.0.0/24", `${f1.ip}/32`, `${f2.ip}/32`, "fd80:1::/64"]);
      await api(stack, "PATCH", "tenants/acme/networks/front", { advertise: true }, 200);
      await learns(fabric, new Map([["10.80.0.0/24", [ip1, ip2].sort()], [`${f2.ip}/32`, [ip2]]]));
    },
  );

  await t.step(
    "a node's agent that stops withdraws its routes; the other node's stay and answer",
    async () => {
      await n2.stopAgent();
      await forgets(fabric, [`${f2.ip}/32`, `${f2.ip6}/128`]);
      await learns(fabric, new Map([["10.80.0.0/24", [ip1]], [`${f1.ip}/32`, [ip1]]]));
      const tcp = await tcpExchange(cleanup, fabric.host, ns(f1), f1.ip, 10_000);
      assert.ok(tcp.ok, `host to f1 with n2 gone: ${JSON.stringify(tcp)}`);
      await n2.startAgent();
      await learns(fabric, new Map([[`${f2.ip}/32`, [ip2]], ["10.80.0.0/24", [ip1, ip2].sort()]]));
    },
  );

  await t.step(
    "a node's BIRD that dies is started again by its agent, and its routes come back",
    async () => {
      const pid = Number((await Deno.readTextFile(`${n1.agentStateDir}/bird.pid`)).trim());
      Deno.kill(pid, "SIGKILL");
      await forgets(fabric, [`${f1.ip}/32`]);
      await learns(fabric, new Map([[`${f1.ip}/32`, [ip1]], ["10.80.0.0/24", [ip1, ip2].sort()]]));
      const again = Number((await Deno.readTextFile(`${n1.agentStateDir}/bird.pid`)).trim());
      assert.notEqual(again, pid, "a new BIRD");
    },
  );

  await t.step("withdrawn when its pods and the network are deleted", async () => {
    for (const p of [f1, f2]) assert.equal((await p.del()).code, 0, `DEL ${p.name}`);
    await api(stack, "DELETE", "tenants/acme/networks/front", undefined, 204);
    await forgets(fabric, ["10.80.0.0/24", "fd80:1::/64", `${f1.ip}/32`, `${f2.ip}/32`]);
  });
});

Deno.test("e2e bgp: a router the admin advertises: its networks learned, one attached later too; detached and deleted: withdrawn; a tenant refused", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    manager: { bgp: { advertisableRanges: ["10.80.0.0/12"] } },
    tokens: [{ token: TENANT_TOKEN, scope: "tenant", tenant: "acme" }],
  });
  const [n1, n2] = stack.nodes;
  const [ip1, ip2] = [n1, n2].map((n) => n.sim.underlayIp);
  const fabric = await startFabric(cleanup, [ip1, ip2]);
  for (const node of stack.nodes) await speakBgp(cleanup, node);
  await api(stack, "POST", "tenants", { name: "acme" }, 201);
  const nets = [["a", "10.84"], ["b", "10.85"], ["c", "10.86"]];
  for (const [name, prefix] of nets) {
    await api(stack, "POST", "tenants/acme/networks", {
      name,
      cidr: `${prefix}.0.0/24`,
      gateway: `${prefix}.0.1`,
    }, 201);
  }
  const pa = await pod(n1, "pa", "acme", "a");
  const pb = await pod(n2, "pb", "acme", "b");
  const router = "tenants/acme/routers/edge";

  await t.step(
    "attack: a tenant cannot make an advertised router: 403, nothing learned",
    async () => {
      const r = await asTenant(stack, "POST", "tenants/acme/routers", {
        name: "edge",
        networks: ["a", "c"],
        advertise: true,
      });
      assert.equal(r.status, 403, r.text);
      assert.deepEqual(
        [...(await fabric.learned()).keys()].filter((k) => k.startsWith("10.8")),
        [],
      );
    },
  );

  await t.step("the admin makes it advertised: its network is learned and reached", async () => {
    await api(stack, "POST", "tenants/acme/routers", {
      name: "edge",
      networks: ["a"],
      advertise: true,
    }, 201);
    await learns(fabric, new Map([["10.84.0.0/24", [ip1]], [`${pa.ip}/32`, [ip1]]]));
    const tcp = await tcpExchange(cleanup, fabric.host, ns(pa), pa.ip, 10_000);
    assert.ok(tcp.ok, `host to pa: ${JSON.stringify(tcp)}`);
  });

  await t.step("the tenant attaches b: learned; detaches it: withdrawn", async () => {
    const on = await asTenant(stack, "PUT", router, { networks: ["a", "b"] });
    assert.equal(on.status, 200, on.text);
    await learns(fabric, new Map([["10.85.0.0/24", [ip2]], [`${pb.ip}/32`, [ip2]]]));
    const off = await asTenant(stack, "PUT", router, { networks: ["a"] });
    assert.equal(off.status, 200, off.text);
    await forgets(fabric, ["10.85.0.0/24", `${pb.ip}/32`]);
    await learns(fabric, new Map([["10.84.0.0/24", [ip1]]]));
  });

  await t.step("the router deleted: its networks withdrawn", async () => {
    await api(stack, "DELETE", router, undefined, 204);
    await forgets(fabric, ["10.84.0.0/24", `${pa.ip}/32`]);
  });
  for (const p of [pa, pb]) assert.equal((await p.del()).code, 0, `DEL ${p.name}`);
});

/** A request with the tenant's token: its status and body text. */
async function asTenant(stack: Stack, method: string, path: string, body: unknown) {
  const r = await fetch(`${stack.managerUrl}/api/v1/${path}`, {
    method,
    headers: { authorization: `Bearer ${TENANT_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: r.status, text: await r.text() };
}

interface Added extends Pod {
  ip: string;
  ip6?: string;
}

async function pod(node: StackNode, name: string, tenant: string, network: string) {
  const p = await makePod(node, name, tenant, knitterList([network], [], "1.0.0"));
  const r = await p.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const [ip, ip6] = addressesOf(r.out).map((a) => a.address.split("/")[0]);
  return Object.assign(p, { ip, ip6 }) as Added;
}

function ns(p: Pod): string {
  return ipNetnsName(p.netns);
}

async function api(
  stack: Stack,
  method: string,
  path: string,
  body: unknown,
  status: number,
): Promise<void> {
  const r = await stack.api(method, path, body);
  assert.equal(r.status, status, `${method} ${path}: ${JSON.stringify(r.body)}`);
}
