/** Knitter as another plugin's IPAM: which calls are, what their `ipam` section may say, the result. */
import assert from "node:assert/strict";
import type { Port } from "@knitter/common";
import { CNI_CODE, CniError, convertResult } from "@knitter/plugin/contract";
import type { CniRequest } from "@knitter/plugin/protocol";
import { ipamPodRequest, ipamResult, ipamSection, isIpamCall } from "./ipam_call.ts";

function call(ipam: Record<string, unknown>, extra: Record<string, unknown> = {}): CniRequest {
  return {
    command: "ADD",
    containerId: "c1",
    netns: "/var/run/netns/pod",
    ifName: "net1",
    args: { K8S_POD_NAMESPACE: "acme", K8S_POD_NAME: "web", KNITTER_NETWORKS: "blue" },
    path: "",
    config: { cniVersion: "1.0.0", name: "data", type: "macvlan", master: "eth1", ipam, ...extra },
  };
}

const PORT = {
  id: "p1",
  network: "data",
  address: "10.30.0.5/24",
  ip: "10.30.0.5",
  gateway: "10.30.0.1",
  address6: "fd00::5/64",
  gateway6: "fd00::1",
  family: 4,
  routes: [{ dst: "10.31.0.0/16", via: "10.30.0.254" }],
  dns: { nameservers: ["10.30.0.53"] },
} as unknown as Port;

Deno.test("an IPAM call is another plugin's config with an ipam section: knitter was run as its IPAM; knitter's own config never is", () => {
  assert.equal(isIpamCall(call({ type: "knitter", network: "data" }).config), true);
  // Installed under another name (a runtime's own bin dir), it is still the IPAM that was run.
  assert.equal(isIpamCall(call({ type: "knitter-a1", network: "data" }).config), true);
  assert.equal(isIpamCall({ ...call({ type: "knitter-a1" }).config, type: "knitter-a1" }), false);
  const own = call({ type: "knitter", network: "data" }).config;
  assert.equal(isIpamCall({ ...own, type: "knitter" }), false);
  assert.equal(isIpamCall({ ...own, ipam: undefined }), false);
});

Deno.test("a bad ipam section is code 7, naming the key and what it takes", () => {
  const refused = (ipam: Record<string, unknown>, message: RegExp) =>
    assert.throws(() => ipamSection(call({ type: "knitter", ...ipam }).config), (err) => {
      assert.ok(err instanceof CniError);
      assert.equal(err.code, CNI_CODE.invalidConfig);
      assert.match(err.message, message);
      return true;
    });
  refused({}, /ipam\.network is missing.*"network": "data"/);
  refused({ network: "" }, /ipam\.network must be a non-empty string/);
  refused({ network: "data", tenant: 5 }, /ipam\.tenant must be a non-empty string/);
  refused({ network: "data", defaultRoute: "yes" }, /ipam\.defaultRoute must be true or false/);
});

Deno.test("the call asks for the port of CNI_IFNAME on ipam.network, no default route unless asked; tenant from ipam, else the config, else the namespace", () => {
  const defaults = { tenant: "default", network: "blue" };
  const fromNs = ipamPodRequest(call({ type: "knitter", network: "data" }), defaults);
  assert.equal(fromNs.tenant, "acme");
  assert.deepEqual(fromNs.interfaces.map((w) => [w.network, w.ifName, w.defaultRoute]), [
    ["data", "net1", false],
  ]);
  const fromConfig = call({ type: "knitter", network: "data" }, { tenant: "corp" });
  assert.equal(ipamPodRequest(fromConfig, defaults).tenant, "corp");
  const fromIpam = call({ type: "knitter", network: "data", tenant: "ops", ip: "10.30.0.9" }, {
    tenant: "corp",
  });
  const wanted = ipamPodRequest(fromIpam, defaults);
  assert.equal(wanted.tenant, "ops");
  assert.equal(wanted.interfaces[0].ip, "10.30.0.9");
  const routed = call({ type: "knitter", network: "data", defaultRoute: true });
  assert.equal(ipamPodRequest(routed, defaults).interfaces[0].defaultRoute, true);
});

Deno.test("the IPAM result has the port's addresses, gateways, routes and DNS, and no interface", () => {
  const result = ipamResult(PORT, false);
  assert.deepEqual(result.ips, [
    { address: "10.30.0.5/24", gateway: "10.30.0.1" },
    { address: "fd00::5/64", gateway: "fd00::1" },
  ]);
  assert.deepEqual(result.routes, [{ dst: "10.31.0.0/16", gw: "10.30.0.254" }]);
  assert.deepEqual(result.dns, { nameservers: ["10.30.0.53"] });
  assert.equal(result.interfaces, undefined);
  assert.deepEqual(ipamResult(PORT, true).routes!.slice(0, 2), [
    { dst: "0.0.0.0/0", gw: "10.30.0.1" },
    { dst: "::/0", gw: "fd00::1" },
  ]);
  // In 0.4.0, as a main plugin of that version asks: each address says its version.
  const old = convertResult(result as Record<string, unknown>, "0.4.0");
  assert.deepEqual((old.ips as { version: string }[]).map((ip) => ip.version), ["4", "6"]);
});

Deno.test("an IPAM call's ipam.claim asks for the port bound to that claim (a VM's external interface keeps its address)", () => {
  const wanted = ipamPodRequest(call({ type: "knitter", network: "data", claim: "vm-a.data" }), {
    tenant: "default",
  });
  assert.equal(wanted.interfaces[0].claim, "vm-a.data");
  assert.throws(
    () => ipamSection(call({ type: "knitter", network: "data", claim: 5 }).config),
    /ipam.claim must be a non-empty string/,
  );
});
