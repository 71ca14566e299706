import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { CNI_CODE, CniError } from "@knitter/plugin/contract";
import { ATTACH_FAILED, KubePodNetworks } from "./kube_attacher.ts";
import type { CniRequest, KubePod } from "../cni/pod_request.ts";

interface Warning {
  pod: string;
  reason: string;
  message: string;
  node: string;
}

/** A stand-in for the API (pods by "ns/name") and the manager's tenant PUTs. */
function setup(pods: Record<string, KubePod | Error>) {
  const warnings: Warning[] = [];
  const tenantPuts: string[] = [];
  const source = new KubePodNetworks(
    {
      get: (namespace, name) => {
        const pod = pods[`${namespace}/${name}`];
        if (!pod) return Promise.reject(new Error("pods not found"));
        return pod instanceof Error ? Promise.reject(pod) : Promise.resolve(pod);
      },
      warn: (pod, reason, message, node) => {
        warnings.push({ pod: `${pod.namespace}/${pod.name}`, reason, message, node });
        return Promise.resolve();
      },
    },
    {
      request: <T>(method: string, path: string) => {
        tenantPuts.push(`${method} ${path}`);
        return Promise.resolve(undefined as T);
      },
    },
    "n1",
    createLogger("kube test", "error"),
  );
  return { source, warnings, tenantPuts };
}

function add(args: Record<string, string>): CniRequest {
  return {
    command: "ADD",
    containerId: "c1",
    netns: "/var/run/netns/p",
    ifName: "eth0",
    args,
    path: "",
    config: { cniVersion: "1.1.0", name: "k", type: "knitter" },
  };
}

const POD: KubePod = { uid: "u1", annotations: { a: "b" }, ownerKinds: [] };
const NAMED = { K8S_POD_NAMESPACE: "ns", K8S_POD_NAME: "web", K8S_POD_UID: "u1" };

const RESOLVE_CASES: {
  name: string;
  pods: Record<string, KubePod | Error>;
  args: Record<string, string>;
  kubePod?: KubePod;
  code?: number;
  error?: RegExp;
  tenants: string[];
}[] = [
  {
    name: "a request that names no pod is served as it is",
    pods: {},
    args: {},
    tenants: [],
  },
  {
    name: "the pod read from the API joins the request; its tenant is ensured",
    pods: { "ns/web": POD },
    args: NAMED,
    kubePod: POD,
    tenants: ["PUT /api/v1/tenants/ns"],
  },
  {
    name: "the API not answering is error 11",
    pods: { "ns/web": new Error("connection refused") },
    args: NAMED,
    code: CNI_CODE.tryAgainLater,
    error: /Cannot read pod ns\/web from the Kubernetes API: connection refused/,
    tenants: [],
  },
  {
    name: "a pod replaced (another UID) is error 11",
    pods: { "ns/web": { ...POD, uid: "u2" } },
    args: NAMED,
    code: CNI_CODE.tryAgainLater,
    error: /has UID u2, not u1: it was replaced/,
    tenants: [],
  },
];

for (const c of RESOLVE_CASES) {
  Deno.test(`KubePodNetworks.resolve: ${c.name}`, async () => {
    const { source, tenantPuts } = setup(c.pods);
    const req = add(c.args);
    if (c.code !== undefined) {
      await assert.rejects(source.resolve(req), (err) => {
        assert.ok(err instanceof CniError);
        assert.equal(err.code, c.code);
        assert.match(err.message, c.error!);
        return true;
      });
    } else {
      const resolved = await source.resolve(req);
      assert.deepEqual(resolved.kubePod, c.kubePod);
      assert.deepEqual({ ...resolved, kubePod: undefined }, { ...req, kubePod: undefined });
    }
    assert.deepEqual(tenantPuts, c.tenants);
  });
}

Deno.test("KubePodNetworks: a namespace's tenant is ensured once per process", async () => {
  const { source, tenantPuts } = setup({ "ns/web": POD });
  await source.resolve(add(NAMED));
  await source.resolve(add(NAMED));
  assert.deepEqual(tenantPuts, ["PUT /api/v1/tenants/ns"]);
});

Deno.test("KubePodNetworks.failed: the pod gets a Warning event with the CNI error's message", () => {
  const { source, warnings } = setup({});
  const err = source.failed(add(NAMED), new Error("veth failed"));
  assert.ok(err instanceof CniError);
  assert.equal(err.code, CNI_CODE.internal);
  assert.match(err.message, /^Cannot attach pod ns\/web: veth failed/);
  assert.deepEqual(warnings, [{
    pod: "ns/web",
    reason: ATTACH_FAILED,
    message: err.message,
    node: "n1",
  }]);
});

Deno.test("KubePodNetworks.failed: a request that names no pod is answered as it failed, untold", () => {
  const { source, warnings } = setup({});
  const failure = new CniError(CNI_CODE.invalidConfig, "bad");
  assert.equal(source.failed(add({}), failure), failure);
  assert.deepEqual(warnings, []);
});
