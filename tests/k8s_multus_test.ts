/**
 * Knitter under Multus, against the stand-in API server: Multus calls the plugin once per
 * attachment, with the NetworkAttachmentDefinition's config, CNI_IFNAME net1, net2... and the
 * pod's K8S_* arguments; each call makes that one interface only.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { eventually, startKubeCluster } from "./support/kube_cluster.ts";
import { leftovers } from "./support/leftovers.ts";
import { addressOf, ipNetnsName } from "./support/pods.ts";

Deno.test("stand-in API server: the plugin called as Multus calls a delegate for one NAD attaches that one interface only", async () => {
  await using cleanup = new Cleanup();
  const k = await startKubeCluster({ cleanup, nodes: ["n1"] });
  const [n1] = k.stack.nodes;
  await k.startMonitor();
  k.namespace("acme");
  for (const [name, cidr] of [["data", "10.51.0.0/24"], ["media", "10.52.0.0/24"]]) {
    k.api.create("networks", {
      metadata: { name, namespace: "acme" },
      spec: { cidr, gateway: cidr.replace(/0\/24$/, "1") },
    });
    await eventually(
      `network ${name} ready`,
      () =>
        k.api.get("networks", "acme", name)?.status?.conditions?.[0]?.status === "True"
          ? true
          : undefined,
    );
  }
  const pod = await k.pod(n1, {
    namespace: "acme",
    name: "mx",
    annotations: { "k8s.v1.cni.cncf.io/networks": "acme/data,media" },
  });
  // Multus' delegate call for the second attachment: the NAD "media" (its config names no
  // network, Multus gives it the NAD's name), CNI_IFNAME net2 by position.
  const nad = { cniVersion: "1.1.0", name: "media", plugins: [{ type: "knitter" }] };
  const att = { ...pod.cni.attachment(), ifName: "net2" };
  const added = await pod.cni.runtime.add(nad, att);
  assert.equal(added.code, 0, `ADD: ${JSON.stringify(added.out)} ${added.stderr}`);
  const inSandbox = added.out.interfaces.filter((i: { sandbox?: string }) => i.sandbox);
  assert.deepEqual(inSandbox.map((i: { name: string }) => i.name), ["net2"]);
  assert.match(addressOf(added.out, "net2"), /^10\.52\.0\.\d+$/);
  const links = await run(["ip", "-n", ipNetnsName(pod.cni.netns), "-o", "link", "show"]);
  assert.doesNotMatch(links.stdout, /: (eth0|net1)@/, "no other interface was made");
  assert.match(links.stdout, /: net2@/);
  const ports = (await k.stack.api("GET", "ports?pod=acme/mx")).body.items;
  assert.deepEqual(ports.map((p: { interface: string }) => p.interface), ["net2"]);

  const deleted = await pod.cni.runtime.del(nad, att);
  assert.equal(deleted.code, 0, `DEL: ${JSON.stringify(deleted.out)} ${deleted.stderr}`);
  assert.equal((await k.stack.api("GET", "ports?pod=acme/mx")).body.items.length, 0);
  assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
});
