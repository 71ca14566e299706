/**
 * End to end on a physnet: VLAN and flat networks leave the node through the physnet bridge onto a
 * shared L2 segment (a VLAN-transparent Linux bridge), where tcpdump shows how frames are tagged.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { startCapture } from "./support/capture.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import { addressOf, ipNetnsName, knitterList, makePod, pings, type Pod } from "./support/pods.ts";
import { type Stack, startStack } from "../devstack/stack.ts";

Deno.test("e2e underlay: VLAN pods talk across nodes tagged with their VLAN ID, flat pods untagged, and neither reaches a VXLAN network of the same addresses", async (t) => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"], physnets: ["phys1"] });
  const [n1, n2] = stack.nodes;
  const segment = stack.physnets.phys1;
  await create(stack, "physnets", { name: "phys1", vlanRanges: [{ start: 100, end: 199 }] });
  for (const name of ["acme", "globex"]) await create(stack, "tenants", { name });
  const vlan = await create(stack, "tenants/acme/networks", {
    name: "storage",
    type: "vlan",
    physnet: "phys1",
    cidr: "10.40.0.0/24",
    gateway: "10.40.0.1",
  });
  const vid: number = vlan.segmentId;
  assert.ok(vid >= 100 && vid <= 199, `VLAN ID ${vid} comes from the physnet's range`);
  await create(stack, "tenants/acme/networks", {
    name: "legacy",
    type: "flat",
    physnet: "phys1",
    cidr: "10.41.0.0/24",
    gateway: "10.41.0.1",
  });
  // Same addresses and the same number as VNI: only the network type tells them apart.
  await create(stack, "tenants/globex/networks", {
    name: "overlay",
    cidr: "10.40.0.0/24",
    gateway: "10.40.0.1",
    segmentId: vid,
  });

  const v1 = await addedPod(n1, "v1", "acme", ["storage"]);
  const v2 = await addedPod(n2, "v2", "acme", ["storage"]);
  const f1 = await addedPod(n1, "f1", "acme", ["legacy"]);
  const f2 = await addedPod(n2, "f2", "acme", ["legacy"]);
  const x1 = await addedPod(n1, "x1", "globex", [{ name: "overlay", ip: "10.40.0.20" }]);
  const x2 = await addedPod(n2, "x2", "globex", [{ name: "overlay", ip: "10.40.0.21" }]);

  await t.step(
    "VLAN pods on two nodes reach each other, frames on the segment carry the VLAN ID",
    async () => {
      const cap = await startCapture(
        cleanup,
        segment.netns,
        segment.ports.n1,
        `vlan ${vid} and icmp`,
        { count: 2, timeoutMs: 5000 },
      );
      assert.ok(await pings(v1.pod, v2.ip), "v1 reaches v2 through the physnet");
      const lines = await cap.done();
      assert.equal(lines.length, 2, `request and reply seen tagged on the segment: ${lines}`);
      for (const l of lines) {
        assert.match(
          l,
          new RegExp(`ethertype 802\\.1Q \\(0x8100\\).*vlan ${vid}, .*ethertype IPv4`),
        );
        assert.ok(l.includes(v1.ip) && l.includes(v2.ip), l);
      }
      assert.ok(await pings(v2.pod, v1.ip), "and back");
    },
  );

  await t.step("flat pods on the same physnet reach each other untagged", async () => {
    const cap = await startCapture(
      cleanup,
      segment.netns,
      segment.ports.n2,
      "icmp or (vlan and icmp)",
      { count: 2, timeoutMs: 5000 },
    );
    assert.ok(await pings(f1.pod, f2.ip), "f1 reaches f2 through the physnet");
    const lines = await cap.done();
    assert.equal(lines.length, 2, `request and reply seen on the segment: ${lines}`);
    for (const l of lines) {
      assert.match(l, /ethertype IPv4 \(0x0800\)/);
      assert.doesNotMatch(l, /802\.1Q/, "flat frames are untagged");
      assert.ok(l.includes(f1.ip) && l.includes(f2.ip), l);
    }
  });

  await t.step(
    "a VXLAN network of the same addresses and number, and the flat network, stay apart from the VLAN one",
    async () => {
      assert.ok(await pings(x1.pod, x2.ip), "the VXLAN pods reach each other");
      // Static neighbours skip the ARP responder: the frames themselves must be dropped.
      await neighbour(v1, x2);
      await neighbour(x1, v2);
      await neighbour(f1, v2);
      assert.ok(!(await pings(v1.pod, x2.ip)), "a VLAN pod does not reach a VXLAN pod");
      assert.ok(!(await pings(x1.pod, v2.ip)), "a VXLAN pod does not reach a VLAN pod");
      assert.ok(
        !(await pings(f1.pod, v2.ip)),
        "the flat network does not reach the VLAN one on its physnet",
      );
    },
  );

  for (const p of [v1, v2, f1, f2, x1, x2]) assert.equal((await p.pod.del()).code, 0);
});

// deno-lint-ignore no-explicit-any
async function create(stack: Stack, path: string, body: unknown): Promise<any> {
  const r = await stack.api("POST", path, body);
  assert.equal(r.status, 201, `POST ${path}: ${JSON.stringify(r.body)}`);
  return r.body;
}

interface Added {
  pod: Pod;
  ip: string;
  mac: string;
}

async function addedPod(
  node: Stack["nodes"][number],
  name: string,
  tenant: string,
  networks: (string | Record<string, unknown>)[],
): Promise<Added> {
  const pod = await makePod(node, name, tenant, knitterList(networks));
  const r = await pod.add();
  assert.equal(r.code, 0, `ADD ${name}: ${JSON.stringify(r.out)} ${r.stderr}`);
  const mac = r.out.interfaces.find((i: { sandbox?: string }) => i.sandbox).mac;
  return { pod, ip: addressOf(r.out), mac };
}

/** A permanent neighbour entry (and an on-link route to it): frames go out without ARP. */
async function neighbour(from: Added, to: Added): Promise<void> {
  const ns = ipNetnsName(from.pod.netns);
  await run(["ip", "-n", ns, "route", "replace", `${to.ip}/32`, "dev", "eth0"]);
  await run([
    ...["ip", "-n", ns, "neigh", "replace", to.ip],
    ...["lladdr", to.mac, "dev", "eth0", "nud", "permanent"],
  ]);
}
