/**
 * The agent's watch of its own node's pods (agent/kubernetes/node_pod_watch.ts, for hot-plug)
 * against the stand-in API server, through the agent's real client: only the node's pods, every
 * change, and the faults a real API server shows (a watch ended cleanly, cut, dropped half-open,
 * expired with 410) each end with the watch resumed or listed again and nothing missed.
 */
import assert from "node:assert/strict";
import { createLogger } from "@knitter/common";
import { KubePods, type NodePod } from "../agent/kubernetes/kube_pods.ts";
import { NodePodWatch } from "../agent/kubernetes/node_pod_watch.ts";
import { KubeApi } from "./support/kube_api.ts";
import { eventually } from "./support/kube_cluster.ts";

const TOKEN = "node-n1";

async function setup() {
  const api = KubeApi.start({ tokens: { [TOKEN]: "system:node:n1" }, bookmarkMs: 200 });
  api.create("namespaces", { metadata: { name: "acme" } });
  const dir = await Deno.makeTempDir();
  const pods = await KubePods.open({
    kubeconfig: await api.writeKubeconfig(`${dir}/kubeconfig`, TOKEN),
  });
  /** What the handler was told, by "namespace/name": the pod's annotation, or "gone". */
  const seen = new Map<string, string>();
  let lists = 0;
  const note = (p: NodePod) => seen.set(`${p.namespace}/${p.name}`, p.annotations.a ?? "");
  const watch = new NodePodWatch(
    pods,
    "n1",
    {
      listed: (all) => {
        lists++;
        seen.clear();
        all.forEach(note);
      },
      changed: (p, type) =>
        type === "DELETED" ? seen.set(`${p.namespace}/${p.name}`, "gone") : note(p),
    },
    createLogger("node pods test", "error"),
    { timeoutSeconds: 30, deadlineMs: 1000 },
  );
  const pod = (name: string, node: string, a: string) =>
    api.create("pods", {
      metadata: { name, namespace: "acme", annotations: { a } },
      spec: { nodeName: node },
    });
  const edit = (name: string, a: string) =>
    api.update("pods", "acme", name, (o) => (o.metadata.annotations.a = a));
  const sees = (name: string, value: string) =>
    eventually(`${name} seen as ${value}`, () => seen.get(`acme/${name}`) === value || undefined);
  return {
    api,
    watch,
    seen,
    lists: () => lists,
    pod,
    edit,
    sees,
    async [Symbol.asyncDispose]() {
      await watch.stop();
      pods.close();
      await api.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("stand-in API server: the agent follows its own node's pods only, each change of them", async () => {
  await using t = await setup();
  t.pod("a", "n1", "1");
  t.pod("other", "n2", "1");
  t.watch.start();
  await t.sees("a", "1");
  t.edit("a", "2");
  await t.sees("a", "2");
  t.pod("b", "n1", "1");
  await t.sees("b", "1");
  t.api.delete("pods", "acme", "b");
  await t.sees("b", "gone");
  t.edit("other", "2");
  t.pod("c", "n1", "1");
  await t.sees("c", "1");
  assert.equal(t.seen.has("acme/other"), false, "another node's pod is never seen");
  const asked = t.api.requests.filter((r) => r.path === "/api/v1/pods");
  assert.ok(asked.length > 0);
  for (const r of asked) {
    assert.match(decodeURIComponent(r.query), /fieldSelector=spec\.nodeName=n1/);
  }
});

Deno.test("stand-in API server: the agent's watch of its node's pods misses nothing through a clean end, a cut, a half-open drop and a 410", async () => {
  await using t = await setup();
  t.pod("a", "n1", "0");
  t.watch.start();
  await t.sees("a", "0");
  const faults: [string, () => void][] = [
    ["a clean end", () => t.api.breakWatches()],
    ["a cut mid-stream", () => t.api.abortWatches()],
    ["a watch dropped half-open", () => t.api.dropWatches()],
    ["an ERROR 410 Expired", () => t.api.expireWatches()],
  ];
  let n = 0;
  for (const [what, fault] of faults) {
    await eventually(`a watch open before ${what}`, () => t.api.openWatches > 0 || undefined);
    fault();
    // Changed while no watch may be open: the next watch or list must carry it.
    t.edit("a", String(++n));
    await t.sees("a", String(n));
  }
  assert.ok(t.lists() >= 2, "listed again after a fault");
});
