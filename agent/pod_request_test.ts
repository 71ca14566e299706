import assert from "node:assert/strict";
import { CniError } from "./cni_errors.ts";
import { type CniRequest, podRequest, portIdFor } from "./pod_request.ts";

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

Deno.test("pod request: the namespace is the tenant and the pod UID owns the ports", () => {
  const r = podRequest(
    req({ networks: ["control"] }, {
      K8S_POD_NAMESPACE: "acme",
      K8S_POD_NAME: "web-0",
      K8S_POD_UID: "u-1",
    }),
    defaults,
  );
  assert.equal(r.tenant, "acme");
  assert.deepEqual(r.pod, { namespace: "acme", name: "web-0", uid: "u-1" });
  assert.equal(r.owner, "u-1");
  assert.equal(portIdFor(r.owner, "eth0"), "u-1-eth0");
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
    { network: "data", ifName: "net1", ip: "10.2.0.9", defaultRoute: false },
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
  assert.equal(r.owner, "u-9");
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
  assert.equal(stable({ "knitter.io/stable-address": "true" }, ["ReplicaSet"]), "u-9");
  assert.equal(stable({}, ["StatefulSet"]), "u-9");
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
