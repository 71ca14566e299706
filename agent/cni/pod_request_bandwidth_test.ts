/**
 * runtimeConfig.bandwidth (the CNI "bandwidth" capability) in the agent's reading of a CNI request:
 * it reaches the interface the runtime names (CNI_IFNAME), checked, with clear refusals (code 7).
 */
import assert from "node:assert/strict";
import { CniError } from "@knitter/plugin/contract";
import { type CniRequest, podRequest } from "./pod_request.ts";

function req(config: Record<string, unknown>, ifName = "eth0"): CniRequest {
  return {
    command: "ADD",
    containerId: "c0ffee",
    netns: "/var/run/netns/p",
    ifName,
    args: {},
    path: "",
    config: { cniVersion: "1.1.0", name: "knitter", type: "knitter", ...config },
  } as CniRequest;
}

const defaults = { tenant: "default", network: "pods" };

Deno.test("pod request: runtimeConfig.bandwidth reaches the interface CNI_IFNAME names, and no other", () => {
  const bandwidth = { ingressRate: 20_000_000, ingressBurst: 400_000, egressRate: 10_000_000 };
  const r = podRequest(req({ networks: ["a", "b"], runtimeConfig: { bandwidth } }), defaults);
  assert.deepEqual(r.interfaces.map((i) => [i.ifName, i.bandwidth]), [
    ["eth0", bandwidth],
    ["net1", undefined],
  ]);
  // The reference plugin reads zero as "no limit": all zeros is no limit at all.
  const none = podRequest(
    req({ runtimeConfig: { bandwidth: { ingressRate: 0, egressRate: 0 } } }),
    defaults,
  );
  assert.equal(none.interfaces[0].bandwidth, undefined);
});

Deno.test("pod request: runtimeConfig.bandwidth that cannot be is refused with code 7, naming the field", () => {
  const bad: [unknown, RegExp][] = [
    ["20M", /^runtimeConfig\.bandwidth must be an object/],
    [
      { ingressRate: -5 },
      /^runtimeConfig\.bandwidth\.ingressRate is -5: .*bits per second from 8000/,
    ],
    [{ egressRate: 1.5e6 + 0.5 }, /egressRate is 1500000\.5/],
    [{ egressRate: 1e12 }, /egressRate is 1000000000000: .* to 100000000000/],
    [{ ingressRate: 1e6, ingressBurst: 100 }, /ingressBurst is 100: .*bits from 16384/],
    [{ egressBurst: 1e6 }, /egressBurst is given without egressRate/],
    [{ ingressrate: 1e6 }, /has ingressrate: the limits are/],
  ];
  for (const [bandwidth, message] of bad) {
    assert.throws(
      () => podRequest(req({ runtimeConfig: { bandwidth } }), defaults),
      (err: unknown) => {
        assert.ok(err instanceof CniError, String(err));
        assert.equal(err.code, 7);
        assert.match(err.message, message);
        return true;
      },
      JSON.stringify(bandwidth),
    );
  }
});
