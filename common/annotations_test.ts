import assert from "node:assert/strict";
import {
  AnnotationError,
  networkStatus,
  parsePodAnnotations,
  resolveAnnotated,
  stablePodOf,
} from "./annotations.ts";
import type { Port } from "./api_types.ts";
import { MALFORMED_CIDRS, MALFORMED_IPS, MALFORMED_MACS } from "./address_cases.ts";

const opts = { primaryIfName: "eth0", defaultNetwork: "pods" };

function resolve(annotations: Record<string, string>) {
  const req = parsePodAnnotations(annotations);
  return req && resolveAnnotated(req, opts);
}

function fails(annotations: Record<string, string>, pattern: RegExp) {
  assert.throws(() => resolve(annotations), (err: Error) => {
    assert.ok(err instanceof AnnotationError, String(err));
    assert.match(err.message, pattern);
    return true;
  });
}

Deno.test("annotations: a pod without network annotations asks for nothing special", () => {
  assert.equal(parsePodAnnotations({ other: "x" }), undefined);
  assert.equal(parsePodAnnotations(undefined), undefined);
});

Deno.test("annotations: Knitter's format lists every interface with its attributes", () => {
  const networks = JSON.stringify({
    ports: [
      { attach_to_network: "control", attributes: { nic_name: "eth0", function: "std" } },
      {
        attach_to_network: "media",
        attributes: { nic_name: "eth1", ip_addr: "10.9.0.7", accelerate: "false" },
      },
      { attach_to_network: "oam", attributes: { ip_group_name: "oam-ips" } },
    ],
  });
  assert.deepEqual(resolve({ networks }), [
    { network: "control", ifName: "eth0", defaultRoute: true },
    { network: "media", ifName: "eth1", defaultRoute: false, ip: "10.9.0.7" },
    { network: "oam", ifName: "net1", defaultRoute: false, ipGroup: "oam-ips" },
  ]);
});

Deno.test("annotations: the Multus comma list adds networks beside eth0 on the default", () => {
  assert.deepEqual(resolve({ "k8s.v1.cni.cncf.io/networks": "control, acme/data@data0" }), [
    { network: "pods", ifName: "eth0", defaultRoute: true },
    { network: "control", ifName: "net1", defaultRoute: false },
    { network: "data", namespace: "acme", ifName: "data0", defaultRoute: false },
  ]);
});

Deno.test("annotations: the Multus JSON list carries interface, ips, mac and default-route", () => {
  const value = JSON.stringify([
    {
      name: "data",
      namespace: "acme",
      interface: "d0",
      ips: ["10.2.0.9/24"],
      mac: "02:AA:00:00:00:01",
      "default-route": ["10.2.0.1"],
    },
  ]);
  assert.deepEqual(resolve({ "k8s.v1.cni.cncf.io/networks": value }), [
    { network: "pods", ifName: "eth0", defaultRoute: false },
    {
      network: "data",
      namespace: "acme",
      ifName: "d0",
      defaultRoute: true,
      ip: "10.2.0.9",
      mac: "02:aa:00:00:00:01",
    },
  ]);
});

Deno.test("annotations: the Multus default-network annotation replaces the network of eth0", () => {
  assert.deepEqual(resolve({ "v1.multus-cni.io/default-network": "fast" }), [
    { network: "fast", ifName: "eth0", defaultRoute: true },
  ]);
});

Deno.test("annotations: malformed values say which annotation and what is wrong", () => {
  fails({ networks: "{not json" }, /Annotation "networks": is not valid JSON/);
  fails({ networks: '{"ports": []}' }, /"ports" is empty/);
  fails(
    { networks: '{"ports": [{"attributes": {}}]}' },
    /^Annotation "networks", ports\[0\]: needs "attach_to_network"/,
  );
  fails(
    { networks: '{"ports": [{"attach_to_network": "a", "attributes": {"nic": "x"}}]}' },
    /unknown attribute "nic"/,
  );
  fails({ networks: '{"ports": [{"attach_to_network": "Bad_Name"}]}' }, /not a lowercase DNS/);
  fails({ "k8s.v1.cni.cncf.io/networks": "a,,b" }, /item 2 of the comma list is empty/);
  fails({ "k8s.v1.cni.cncf.io/networks": "a@b@c" }, /more than one "@"/);
  fails({ "k8s.v1.cni.cncf.io/networks": "x/y/z" }, /is not \[namespace\/\]network/);
  fails({ "k8s.v1.cni.cncf.io/networks": '[{"name":"a","ips":["1.2.3"]}]' }, /not an IP/);
  fails(
    { "k8s.v1.cni.cncf.io/networks": '[{"name":"a","ips":["10.0.0.1","10.0.0.2"]}]' },
    /a Knitter interface has one/,
  );
  fails({ "k8s.v1.cni.cncf.io/networks": '[{"name":"a","mac":"zz"}]' }, /not a MAC address/);
  fails({ "k8s.v1.cni.cncf.io/networks": "a@toolonginterface0" }, /not a valid Linux interface/);
  fails({ "k8s.v1.cni.cncf.io/networks": "a@eth0" }, /interface "eth0" is requested twice/);
  fails(
    {
      "k8s.v1.cni.cncf.io/networks":
        '[{"name":"a","default-route":[]},{"name":"b","default-route":[]}]',
    },
    /more than one interface asks for the default route \(net1, net2\)/,
  );
  fails(
    { networks: '{"ports":[{"attach_to_network":"a"}]}', "k8s.v1.cni.cncf.io/networks": "b" },
    /use one of the two formats/,
  );
});

Deno.test("annotations: network-status marks eth0 default and lists interfaces in order", () => {
  const port = (iface: string, network: string, ip: string): Port => ({
    id: `u-${iface}`,
    tenant: "acme",
    network,
    networkTenant: "acme",
    networkId: "n",
    type: "vxlan",
    ip,
    address: `${ip}/24`,
    family: 4,
    gateway: "10.0.0.1",
    mac: "02:00:00:00:00:01",
    mtu: 1450,
    routes: [],
    dns: { nameservers: ["10.0.0.2"] },
    interface: iface,
    createdAt: "",
  });
  const status = networkStatus([
    port("net2", "c", "10.0.2.5"),
    port("eth0", "a", "10.0.0.5"),
    port("net1", "b", "10.0.1.5"),
  ]);
  assert.deepEqual(status.map((s) => [s.interface, s.name, s.default]), [
    ["eth0", "acme/a", true],
    ["net1", "acme/b", false],
    ["net2", "acme/c", false],
  ]);
  assert.deepEqual(status[0].ips, ["10.0.0.5"]);
  assert.deepEqual(status[0].dns, { nameservers: ["10.0.0.2"] });
});

Deno.test("annotations: a dual-stack port's network-status lists both addresses and gateways", () => {
  const [status] = networkStatus([{
    id: "p",
    tenant: "acme",
    network: "dual",
    networkTenant: "acme",
    networkId: "n",
    type: "vxlan",
    ip: "10.0.0.5",
    address: "10.0.0.5/24",
    family: 4,
    gateway: "10.0.0.1",
    ip6: "fd00::5",
    address6: "fd00::5/64",
    gateway6: "fd00::1",
    mac: "02:00:00:00:00:01",
    mtu: 1450,
    routes: [],
    dns: {},
    interface: "eth0",
    createdAt: "",
  }]);
  assert.deepEqual(status.ips, ["10.0.0.5", "fd00::5"]);
  assert.deepEqual(status.gateway, ["10.0.0.1", "fd00::1"]);
});

Deno.test("annotations: a stable port ID names the pod it is kept for", () => {
  assert.deepEqual(stablePodOf("stable:acme:db-0-eth1", "eth1"), {
    namespace: "acme",
    name: "db-0",
  });
  assert.equal(stablePodOf("u-1-eth0", "eth0"), undefined);
  assert.equal(stablePodOf("stable:acme:db-0-eth1", "eth0"), undefined);
});

Deno.test("annotations: malformed addresses and MACs (the shared attack table, ':::' first) are refused in both formats", () => {
  const prefixed = MALFORMED_CIDRS.filter((c) => c.includes("/"));
  for (const bad of [...MALFORMED_IPS, ...prefixed].filter((v) => v !== "")) {
    const attrs = JSON.stringify({
      ports: [{ attach_to_network: "a", attributes: { ip_addr: bad } }],
    });
    fails({ networks: attrs }, /not an IP address/);
    const multus = JSON.stringify([{ name: "a", ips: [bad] }]);
    fails({ "k8s.v1.cni.cncf.io/networks": multus }, /not an IP address/);
  }
  for (const bad of MALFORMED_MACS.filter((v) => v !== "")) {
    const attrs = JSON.stringify({
      ports: [{ attach_to_network: "a", attributes: { mac_addr: bad } }],
    });
    fails({ networks: attrs }, /not a MAC address/);
    const multus = JSON.stringify([{ name: "a", mac: bad }]);
    fails({ "k8s.v1.cni.cncf.io/networks": multus }, /not a MAC address/);
  }
});

Deno.test("annotations: a Multus selection's ipam-claim-reference names the IPAMClaim whose address the interface gets", () => {
  const value = JSON.stringify([
    { name: "data", interface: "d0", "ipam-claim-reference": "vm-a.data" },
  ]);
  assert.deepEqual(resolve({ "k8s.v1.cni.cncf.io/networks": value }), [
    { network: "pods", ifName: "eth0", defaultRoute: true },
    { network: "data", ifName: "d0", defaultRoute: false, claim: "vm-a.data" },
  ]);
  assert.throws(
    () =>
      resolve({
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([
          { name: "data", "ipam-claim-reference": "VM_A" },
        ]),
      }),
    /ipam-claim-reference "VM_A" is not the name of an IPAMClaim/,
  );
});
