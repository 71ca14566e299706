import assert from "node:assert/strict";
import { ManagerError } from "@knitter/common";
import { delegateConfig, type DelegatedInterface, Delegates, withDelegates } from "./delegates.ts";
import type { AgentRequest, PodRequest } from "./pod_request.ts";

const MACVLAN = { plugin: "macvlan", master: "eth1", mode: "bridge" } as const;

function delegated(more: Partial<DelegatedInterface> = {}): DelegatedInterface {
  return { ifName: "net1", network: "data", tenant: "acme", delegate: MACVLAN, path: "", ...more };
}

Deno.test("delegateConfig: the plugin's type and fields, and the knitter IPAM of the network and tenant", () => {
  assert.deepEqual(delegateConfig(delegated({ ip: "10.1.0.9" })), {
    cniVersion: "1.0.0",
    name: "knitter-data",
    type: "macvlan",
    master: "eth1",
    mode: "bridge",
    ipam: { type: "knitter", network: "data", tenant: "acme", ip: "10.1.0.9" },
  });
  const hd = delegateConfig(delegated({ delegate: { plugin: "host-device", device: "hd0" } }));
  assert.equal(hd.type, "host-device");
  assert.equal(hd.device, "hd0");
});

Deno.test("withDelegates: the delegate's interfaces follow the pod's own, its addresses pointing at them", () => {
  const main = {
    cniVersion: "1.1.0",
    interfaces: [{ name: "veth" }, { name: "eth0", sandbox: "/ns" }],
    ips: [{ address: "10.0.0.2/24", interface: 1 }],
    routes: [{ dst: "0.0.0.0/0", gw: "10.0.0.1" }],
  };
  const d = delegated({
    result: {
      cniVersion: "1.0.0",
      interfaces: [{ name: "net1", sandbox: "/ns" }],
      ips: [{ address: "10.1.0.5/24", interface: 0 }],
      routes: [{ dst: "10.9.0.0/16", gw: "10.1.0.254" }],
    },
  });
  const all = withDelegates(main, [d]);
  assert.deepEqual(all.interfaces?.map((i) => i.name), ["veth", "eth0", "net1"]);
  assert.deepEqual(all.ips, [
    { address: "10.0.0.2/24", interface: 1 },
    { address: "10.1.0.5/24", interface: 2 },
  ]);
  assert.equal(all.routes?.length, 2);
});

Deno.test("Delegates.split: only the annotation's extra interfaces on networks with a delegate; the runtime's own and unknown networks stay knitter's", async () => {
  const planes: Record<string, { delegate?: typeof MACVLAN }> = {
    data: { delegate: MACVLAN },
    plain: {},
  };
  const delegates = new Delegates({
    plane: (_tenant, network) => {
      const p = planes[network];
      if (!p) return Promise.reject(new ManagerError(404, "not_found", "no such network"));
      return Promise.resolve(p);
    },
    socket: "/run/x.sock",
    nodeName: "n1",
  });
  const req = { ifName: "eth0", path: "/opt/cni/bin", kubePod: {} } as unknown as AgentRequest;
  const want: PodRequest = {
    tenant: "acme",
    tenantFrom: "namespace",
    owner: "o",
    interfaces: [
      { network: "data", ifName: "eth0", defaultRoute: true },
      { network: "data", ifName: "net1", defaultRoute: false, ipGroup: "g", claim: "vm-a.data" },
      { network: "plain", ifName: "net2", defaultRoute: false },
      { network: "gone", ifName: "net3", defaultRoute: false },
    ],
  };
  const out = await delegates.split(req, want);
  assert.deepEqual(out, [
    { ...delegated({ path: "/opt/cni/bin" }), ipGroup: "g", claim: "vm-a.data" },
  ]);
  // The claim goes to the knitter IPAM the plugin calls.
  assert.equal((delegateConfig(out[0]).ipam as { claim?: string }).claim, "vm-a.data");
  assert.deepEqual(want.interfaces.map((w) => w.ifName), ["eth0", "net2", "net3"]);
  // Outside Kubernetes mode the config names its plugins itself: nothing is split.
  const plainReq = { ...req, kubePod: undefined } as AgentRequest;
  assert.deepEqual(
    await delegates.split(plainReq, { ...want, interfaces: [...want.interfaces] }),
    [],
  );
  // A fixed MAC cannot be honoured by the plugin that makes the interface: refused, saying so.
  const withMac: PodRequest = {
    ...want,
    interfaces: [{
      network: "data",
      ifName: "net1",
      defaultRoute: false,
      mac: "02:00:00:00:00:01",
    }],
  };
  await assert.rejects(delegates.split(req, withMac), /asks for MAC 02:00:00:00:00:01/);
});
