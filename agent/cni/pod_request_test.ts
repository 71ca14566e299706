import assert from "node:assert/strict";
import { CniError } from "@knitter/plugin/contract";
import { MALFORMED_CIDRS, MALFORMED_IPS, MALFORMED_MACS } from "../../common/address_cases.ts";
import { checkAddRequest, type CniRequest, podRequest, portIdFor } from "./pod_request.ts";

function req(config: Record<string, unknown>, args: Record<string, string> = {}): CniRequest {
  return {
    command: "ADD",
    containerId: "c0ffee",
    netns: "/var/run/netns/p",
    ifName: "eth0",
    args,
    path: "",
    config: { cniVersion: "1.1.0", name: "knitter", type: "knitter", ...config },
  } as CniRequest;
}

const defaults = { tenant: "default", network: "pods" };

Deno.test("pod request: no networks asked means one eth0 on the default network", () => {
  const r = podRequest(req({}), defaults);
  assert.equal(r.tenant, "default");
  assert.equal(r.owner, "c0ffee");
  assert.deepEqual(r.interfaces, [{ network: "pods", ifName: "eth0", defaultRoute: true }]);
});

Deno.test("pod request: the namespace is the tenant; the pod UID and the sandbox's container ID own the ports", () => {
  const args = { K8S_POD_NAMESPACE: "acme", K8S_POD_NAME: "web-0", K8S_POD_UID: "u-1" };
  const r = podRequest(req({ networks: ["control"] }, args), defaults);
  assert.equal(r.tenant, "acme");
  assert.deepEqual(r.pod, { namespace: "acme", name: "web-0", uid: "u-1" });
  assert.equal(r.owner, "u-1-c0ffee");
  assert.equal(portIdFor(r.owner, "eth0"), "u-1-c0ffee-eth0");
  // Another sandbox of the same pod gets ports of its own.
  const other = podRequest(
    { ...req({ networks: ["control"] }, args), containerId: "beef" },
    defaults,
  );
  assert.equal(portIdFor(other.owner, "eth0"), "u-1-beef-eth0");
});

Deno.test("pod request: several networks get eth0, net1, net2 unless named; fixed ip and group pass through", () => {
  const r = podRequest(
    req({
      networks: [
        "control",
        { name: "data", ip: "10.2.0.9" },
        { name: "oam", interface: "oam0", ipGroup: "ops", defaultRoute: true },
      ],
    }),
    defaults,
  );
  assert.deepEqual(r.interfaces, [
    { network: "control", ifName: "eth0", defaultRoute: false },
    {
      network: "data",
      ifName: "net1",
      ip: "10.2.0.9",
      ipFrom: "networks[1].ip in the network config",
      defaultRoute: false,
    },
    { network: "oam", ifName: "oam0", ipGroup: "ops", defaultRoute: true },
  ]);
});

Deno.test("pod request: CNI_ARGS KNITTER_NETWORKS wins over the config, runtimeConfig applies to the first", () => {
  const r = podRequest(
    req(
      { networks: ["ignored"], runtimeConfig: { ips: ["10.1.0.7/24"], mac: "02:AA:00:00:00:01" } },
      { KNITTER_NETWORKS: "control,data@eth9" },
    ),
    defaults,
  );
  assert.deepEqual(r.interfaces.map((i) => [i.network, i.ifName]), [["control", "eth0"], [
    "data",
    "eth9",
  ]]);
  assert.equal(r.interfaces[0].ip, "10.1.0.7");
  assert.equal(r.interfaces[0].mac, "02:aa:00:00:00:01");
  assert.equal(r.interfaces[1].ip, undefined);
});

Deno.test("pod request: bad requests are invalid-config errors that say what is wrong", () => {
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ networks: "control" }, /must be a list/],
    [{ networks: [42] }, /networks\[0\]/],
    [{ networks: ["a", { name: "b", interface: "eth0" }] }, /requested twice/],
    [
      { networks: [{ name: "a", interface: "much-too-long-name" }] },
      /not a valid Linux interface name/,
    ],
    [
      { networks: [{ name: "a", defaultRoute: true }, { name: "b", defaultRoute: true }] },
      /default route/,
    ],
  ];
  for (const [config, message] of bad) {
    assert.throws(
      () => podRequest(req(config), defaults),
      (e) => e instanceof CniError && e.code === 7 && message.test(e.message),
    );
  }
  assert.throws(
    () => podRequest(req({}), { tenant: "t" }),
    (e) => e instanceof CniError && e.code === 7 && /No network requested/.test(e.message),
  );
});

const podArgs = { K8S_POD_NAMESPACE: "acme", K8S_POD_NAME: "db-0", K8S_POD_UID: "u-9" };

Deno.test("pod request: under Kubernetes the pod's annotations choose the networks", () => {
  const r = podRequest(
    {
      ...req({}, podArgs),
      kubePod: {
        uid: "u-9",
        annotations: { "k8s.v1.cni.cncf.io/networks": "data@d0" },
        ownerKinds: [],
      },
    },
    defaults,
  );
  assert.equal(r.owner, "u-9-c0ffee");
  assert.deepEqual(r.interfaces, [
    { network: "pods", ifName: "eth0", defaultRoute: true },
    { network: "data", ifName: "d0", defaultRoute: false },
  ]);
});

Deno.test("pod request: a pod without annotations gets eth0 on the default network", () => {
  const r = podRequest(
    { ...req({}, podArgs), kubePod: { uid: "u-9", annotations: {}, ownerKinds: [] } },
    defaults,
  );
  assert.deepEqual(r.interfaces, [{ network: "pods", ifName: "eth0", defaultRoute: true }]);
});

Deno.test("pod request: a StatefulSet pod that asks for stable addresses owns ports by its name", () => {
  const stable = (annotations: Record<string, string>, ownerKinds: string[]) =>
    podRequest({ ...req({}, podArgs), kubePod: { uid: "u-9", annotations, ownerKinds } }, defaults)
      .owner;
  assert.equal(
    stable({ "knitter.io/stable-address": "true" }, ["StatefulSet"]),
    "stable:acme:db-0",
  );
  const group = JSON.stringify({
    ports: [{ attach_to_network: "pods", attributes: { ip_group_name: "dbs" } }],
  });
  assert.equal(stable({ networks: group }, ["StatefulSet"]), "stable:acme:db-0");
  assert.equal(stable({ "knitter.io/stable-address": "true" }, ["ReplicaSet"]), "u-9-c0ffee");
  assert.equal(stable({}, ["StatefulSet"]), "u-9-c0ffee");
  assert.equal(portIdFor("stable:acme:db-0", "eth0"), "stable:acme:db-0-eth0");
});

Deno.test("pod request: a malformed annotation is an invalid-config error naming the pod", () => {
  assert.throws(
    () =>
      podRequest({
        ...req({}, podArgs),
        kubePod: { uid: "u-9", annotations: { networks: "{" }, ownerKinds: [] },
      }, defaults),
    (e) =>
      e instanceof CniError && e.code === 7 &&
      /Pod acme\/db-0: Annotation "networks": is not valid JSON/.test(e.message),
  );
});

Deno.test("pod request: IP= and MAC= in CNI_ARGS and the ips / mac capabilities go to the first interface", () => {
  const first = (config: Record<string, unknown>, args: Record<string, string> = {}) =>
    podRequest(req({ networks: ["control", "data"], ...config }, args), defaults).interfaces;
  const [eth0, net1] = first({}, { IP: "10.1.0.5/24", MAC: "02-AA-00-00-00-01" });
  assert.deepEqual(eth0, {
    network: "control",
    ifName: "eth0",
    ip: "10.1.0.5",
    ipPrefix: 24,
    ipFrom: "IP= in CNI_ARGS",
    mac: "02:aa:00:00:00:01",
    macFrom: "MAC= in CNI_ARGS",
    defaultRoute: true,
  });
  assert.equal(net1.ip, undefined);
  assert.equal(net1.mac, undefined);
  const [caps] = first({ runtimeConfig: { ips: ["2001:DB8::5"], mac: "02:00:00:00:00:0a" } });
  assert.equal(caps.ip, "2001:db8::5");
  assert.equal(caps.ipPrefix, undefined);
  assert.equal(caps.ipFrom, "runtimeConfig.ips");
  assert.equal(caps.macFrom, "runtimeConfig.mac");
  // The same value from several sources is fine; a prefix on one of them too.
  const [agreed] = first({ runtimeConfig: { ips: ["10.1.0.5/24"] } }, { IP: "10.1.0.5" });
  assert.equal(agreed.ip, "10.1.0.5");
});

Deno.test("pod request: a fixed address or MAC that cannot be is refused, naming where it came from", () => {
  const bad: [Record<string, unknown>, Record<string, string>, number, RegExp][] = [
    [{}, { IP: "10.1.0.300" }, 4, /^IP= in CNI_ARGS "10\.1\.0\.300" is not an IP address/],
    [{}, { IP: "10.1.0.5/33" }, 4, /invalid prefix length \(0\.\.32/],
    [{}, { IP: "fe80::1%eth0" }, 4, /not an IP address/],
    [{ runtimeConfig: { ips: ["x"] } }, {}, 7, /^runtimeConfig\.ips "x" is not an IP address/],
    [{ runtimeConfig: { ips: "10.1.0.5" } }, {}, 7, /runtimeConfig\.ips must be a list/],
    [{ runtimeConfig: { ips: ["10.1.0.5", "10.1.0.6"] } }, {}, 7, /lists 2 addresses/],
    [
      { runtimeConfig: { ips: ["10.1.0.6"] } },
      { IP: "10.1.0.5" },
      7,
      /address of eth0 is asked for twice, differently: "10\.1\.0\.5" \(IP= in CNI_ARGS\) and "10\.1\.0\.6" \(runtimeConfig\.ips\)/,
    ],
    [{}, { MAC: "01:00:5e:00:00:01" }, 4, /^MAC= in CNI_ARGS "01:00:5e:00:00:01" is a multicast/],
    [{}, { MAC: "00:00:00:00:00:00" }, 4, /all-zero/],
    [{}, { MAC: "02:00:00:00:00" }, 4, /is not a MAC address/],
    [{ runtimeConfig: { mac: "ff:ff:ff:ff:ff:ff" } }, {}, 7, /^runtimeConfig\.mac .*unicast/],
    [{ networks: [{ name: "a", mac: "03:00:00:00:00:01" }] }, {}, 7, /^networks\[0\]\.mac/],
    [{ networks: ["a", { name: "b", ip: "nope" }] }, {}, 7, /^networks\[1\]\.ip .*"nope"/],
    [
      { networks: [{ name: "a", mac: "02:00:00:00:00:01" }] },
      { MAC: "02:00:00:00:00:02" },
      7,
      /MAC of eth0 is asked for twice/,
    ],
  ];
  for (const [config, args, code, message] of bad) {
    assert.throws(
      () => podRequest(req({ networks: ["a"], ...config }, args), defaults),
      (e) => e instanceof CniError && e.code === code && message.test(e.message),
      JSON.stringify([config, args]),
    );
  }
});

Deno.test("pod request: a MAC from the pod's annotations must be unicast too", () => {
  assert.throws(
    () =>
      podRequest({
        ...req({}, podArgs),
        kubePod: {
          uid: "u-9",
          annotations: {
            "k8s.v1.cni.cncf.io/networks": JSON.stringify([{
              name: "data",
              mac: "01:00:00:00:00:01",
            }]),
          },
          ownerKinds: [],
        },
      }, defaults),
    (e) =>
      e instanceof CniError && e.code === 7 &&
      /net1 "01:00:00:00:00:01" is a multicast/.test(e.message),
  );
});

Deno.test("checkAddRequest: malformed container IDs and K8S_* arguments are code 4, all named at once", () => {
  const ok = req({}, { ...podArgs, K8S_POD_UID: "0b5f3a1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b" });
  checkAddRequest(ok);
  checkAddRequest({ ...ok, args: { K8S_POD_NAMESPACE: "", IgnoreUnknown: "1" } });
  const bad = {
    ...ok,
    containerId: "c".repeat(1025),
    args: {
      K8S_POD_NAMESPACE: "Not_A_Namespace",
      K8S_POD_NAME: "n".repeat(300),
      K8S_POD_UID: "not a uid!",
      K8S_POD_INFRA_CONTAINER_ID: "-x",
    },
  };
  assert.throws(
    () => checkAddRequest(bad),
    (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 4);
      for (
        const name of [
          "CNI_CONTAINERID",
          "K8S_POD_NAMESPACE",
          "K8S_POD_NAME",
          "K8S_POD_UID",
          "K8S_POD_INFRA_CONTAINER_ID",
        ]
      ) assert.match(e.message, new RegExp(name));
      assert.ok(e.message.length < 1500, "long values are clipped");
      return true;
    },
  );
});

Deno.test("portIdFor: IDs the manager takes, distinct for distinct owners, stable ones as they were", () => {
  const uid = "0b5f3a1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b";
  const long = (c: string) => `${uid}-${c.repeat(190)}`;
  const a = portIdFor(long("a"), "eth0");
  const b = portIdFor(`${long("a")}b`, "eth0");
  for (const id of [a, b]) assert.match(id, /^[A-Za-z0-9][A-Za-z0-9._:-]{0,198}[A-Za-z0-9]$/);
  assert.notEqual(a, b);
  assert.match(portIdFor("c0ffee", "eth-"), /^c0ffee-eth--[0-9a-f]{16}$/);
  assert.equal(portIdFor("u-1-c0ffee", "net1"), "u-1-c0ffee-net1");
  assert.equal(portIdFor("stable:acme:web-0", "eth0"), "stable:acme:web-0-eth0");
});

/** A Multus delegate call: the NAD's config, CNI_IFNAME from Multus, the pod's K8S_* arguments. */
function delegated(
  config: Record<string, unknown>,
  ifName: string,
  annotations: Record<string, string>,
) {
  return {
    ...req(config, podArgs),
    ifName,
    kubePod: { uid: "u-9", annotations, ownerKinds: [] },
  };
}

Deno.test("pod request: as a Multus delegate, the NAD for CNI_IFNAME is the only interface (net1, net2... by position)", () => {
  const annotations = { "k8s.v1.cni.cncf.io/networks": "control,other/data,media@m0" };
  const nad = (name: string) => ({ name });
  const one = podRequest(delegated(nad("control"), "net1", annotations), defaults);
  assert.equal(one.tenant, "acme", "a reference without namespace: the pod's");
  assert.deepEqual(one.interfaces, [{ network: "control", ifName: "net1", defaultRoute: false }]);
  const two = podRequest(delegated(nad("data"), "net2", annotations), defaults);
  assert.equal(two.tenant, "acme", "another namespace's: found only if public");
  assert.deepEqual(two.interfaces, [{ network: "data", ifName: "net2", defaultRoute: false }]);
  const named = podRequest(delegated(nad("media"), "m0", annotations), defaults);
  assert.deepEqual(named.interfaces, [{ network: "media", ifName: "m0", defaultRoute: false }]);
  // Kubelet's own call (eth0) still gets every network of the annotation.
  const all = podRequest(delegated({}, "eth0", annotations), defaults);
  assert.deepEqual(all.interfaces.map((i) => i.ifName), ["eth0", "net1", "net2", "m0"]);
});

Deno.test("pod request: as a Multus delegate, a config that names its network wins over the annotation", () => {
  const annotations = { "k8s.v1.cni.cncf.io/networks": "a,b,c" };
  const r = podRequest(
    delegated({ name: "nad-x", network: "data" }, "net3", annotations),
    defaults,
  );
  assert.deepEqual(r.interfaces, [{ network: "data", ifName: "net3", defaultRoute: true }]);
  assert.equal(r.tenant, "acme");
  const list = podRequest(delegated({ networks: ["data"] }, "net1", annotations), defaults);
  assert.deepEqual(list.interfaces, [{ network: "data", ifName: "net1", defaultRoute: true }]);
  // Multus as the primary with Knitter its cluster network: "network" in the conflist, eth0 only.
  const primary = podRequest(delegated({ network: "pods" }, "eth0", annotations), defaults);
  assert.deepEqual(primary.interfaces, [{ network: "pods", ifName: "eth0", defaultRoute: true }]);
});

Deno.test("pod request: as a Multus delegate, an attachment not in the annotation is the network named as the NAD's config", () => {
  const annotations = { "k8s.v1.cni.cncf.io/networks": "a" };
  const r = podRequest(delegated({ name: "extra" }, "net5", annotations), defaults);
  assert.deepEqual(r.interfaces, [{ network: "extra", ifName: "net5", defaultRoute: false }]);
  // The extra network that asks for the default route keeps it.
  const routed = JSON.stringify([{ name: "a", "default-route": ["10.0.0.1"] }]);
  const d = podRequest(
    delegated({ name: "a" }, "net1", { "k8s.v1.cni.cncf.io/networks": routed }),
    defaults,
  );
  assert.deepEqual(d.interfaces, [{ network: "a", ifName: "net1", defaultRoute: true }]);
});

Deno.test("pod request: malformed IP= and MAC= in CNI_ARGS (the shared attack table, ':::' first) are code 4, and the same in the config is 7", () => {
  const refused = (config: Record<string, unknown>, args: Record<string, string>, code: number) =>
    assert.throws(
      () => podRequest(req({ networks: ["a"], ...config }, args), defaults),
      (e) =>
        e instanceof CniError && e.code === code &&
        /is not an? (IP|MAC) address|invalid prefix length/.test(e.message),
      JSON.stringify([config, args]),
    );
  const prefixed = MALFORMED_CIDRS.filter((c) => c.includes("/"));
  for (const bad of [...MALFORMED_IPS, ...prefixed]) {
    refused({}, { IP: bad }, 4);
    refused({ runtimeConfig: { ips: [bad] } }, {}, 7);
    // An empty entry in "networks" means none asked for, as for every key there.
    if (bad !== "") refused({ networks: [{ name: "a", ip: bad }] }, {}, 7);
  }
  for (const bad of MALFORMED_MACS) {
    refused({}, { MAC: bad }, 4);
    refused({ runtimeConfig: { mac: bad } }, {}, 7);
  }
});

Deno.test("pod request: an interface's claim passes to its port, from the annotation's ipam-claim-reference or the config", () => {
  const value = JSON.stringify([{ name: "data", "ipam-claim-reference": "vm-a.data" }]);
  const r = podRequest(
    {
      ...req({}, podArgs),
      kubePod: {
        uid: "u-9",
        annotations: { "k8s.v1.cni.cncf.io/networks": value },
        ownerKinds: [],
      },
    },
    defaults,
  );
  assert.equal(r.interfaces[1].claim, "vm-a.data");
  const c = podRequest(req({ networks: [{ name: "data", claim: "vm1" }] }), defaults);
  assert.equal(c.interfaces[0].claim, "vm1");
});
