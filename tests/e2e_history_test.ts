/**
 * Address history on the real stack: a pod's port is released when the pod goes, another pod on
 * another node gets the same address, and `knitctl history ADDRESS --at TIME` names the pod that
 * held it at each time (and nobody in between); the MAC says the same, and another tenant sees none.
 */
import assert from "node:assert/strict";
import { expectExit, knitctl } from "../knitctl/test_support.ts";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  knitterList,
  makePod,
  type Pod,
} from "./support/pods.ts";
import { type Stack, startStack } from "../devstack/stack.ts";

function managerEnv(stack: Stack): Record<string, string> {
  return { KNITCTL_SERVER: stack.managerUrl, KNITCTL_TOKEN: stack.adminToken };
}

/** A time strictly after every commit made so far: the next millisecond, once it has come. */
async function instant(): Promise<number> {
  const t = Date.now();
  while (Date.now() <= t) await new Promise((r) => setTimeout(r, 1));
  return t;
}

Deno.test("e2e history: a released pod's address reused by another pod; knitctl history --at names each holder", async () => {
  await using cleanup = new Cleanup();
  // No quarantine: the second pod asks for the first one's address as soon as it is released.
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    manager: { quarantineSeconds: 0 },
  });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createTenant(stack, "globex");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");
  const env = managerEnv(stack);
  const history = async (args: string[]) =>
    expectExit(await knitctl(["-t", "acme", "history", ...args], env), 0, args.join(" "));
  const add = async (pod: Pod) => {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    return r.out;
  };

  const before = await instant();
  const a = await makePod(n1, "a", "acme", knitterList(["control"]));
  const ip = addressOf(await add(a));
  const duringA = await instant();
  assert.equal((await a.del()).code, 0, "DEL a");
  const between = await instant();
  const b = await makePod(n2, "b", "acme", knitterList([{ name: "control", ip }]));
  assert.equal(addressOf(await add(b)), ip, "b got a's address");
  const duringB = await instant();

  const at = (ms: number) => history([ip, "--at", new Date(ms).toISOString()]);
  /** The rows under the header, as cells. */
  const rows = (out: string) => out.trim().split("\n").slice(1).map((l) => l.split(/\s{2,}/));

  const [rowA, ...moreA] = rows((await at(duringA)).stdout);
  assert.deepEqual(moreA, [], "one holder while a ran");
  assert.deepEqual(rowA.slice(0, 6), ["acme", "control", rowA[2], "acme/a", "n1", ip]);
  assert.notEqual(rowA[8], "now", "a's holding ended");

  const [rowB, ...moreB] = rows((await at(duringB)).stdout);
  assert.deepEqual(moreB, [], "one holder while b runs");
  assert.deepEqual(rowB.slice(0, 6), ["acme", "control", rowB[2], "acme/b", "n2", ip]);
  assert.equal(rowB[8], "now", "b holds it still");
  assert.notEqual(rowB[2], rowA[2], "two ports, one after the other");

  for (const [when, what] of [[before, "before a"], [between, "between a and b"]] as const) {
    const r = await at(when);
    assert.equal(r.stdout, "", `nobody held ${ip} ${what}`);
    assert.match(r.stderr, /No port of tenant "acme" held/);
  }

  // All of it as JSON: a's window, then b's; the MAC says the same.
  const all = (await history([ip, "-o", "json"])).json().items;
  assert.deepEqual(all.map((h: { pod: { name: string } }) => h.pod.name), ["a", "b"]);
  assert.equal(all[0].pod.uid, a.args.K8S_POD_UID);
  assert.equal(all[0].ended, "released");
  assert.ok(Date.parse(all[0].from) <= duringA && duringA < Date.parse(all[0].to));
  assert.ok(Date.parse(all[0].to) <= between && between < Date.parse(all[1].from));
  assert.ok(Date.parse(all[1].from) <= duringB && all[1].to === undefined);
  const byMac = (await history([all[1].mac, "-o", "json"])).json().items;
  assert.deepEqual(byMac.at(-1), all[1]);

  // Another tenant's view: none of it.
  const other = await knitctl(["-t", "globex", "history", ip, "-o", "json"], env);
  assert.deepEqual(expectExit(other, 0, "globex").json(), { items: [] });

  assert.equal((await b.del()).code, 0, "DEL b");
});
