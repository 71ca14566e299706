/**
 * One pod on two networks: a control-plane interface (eth0) and a data-plane one (net1), each
 * reaching its own network's pods on another node, with the default route on the first only.
 */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { Cleanup } from "../devstack/cleanup.ts";
import { leftovers, usage } from "./support/leftovers.ts";
import { addressOf, ipNetnsName, knitterList, makePod, pings } from "./support/pods.ts";
import { startStack } from "../devstack/stack.ts";

Deno.test("e2e multi-interface: a pod on a control and a data network reaches both planes on another node, default route on the first interface", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({ cleanup, nodes: ["n1", "n2"] });
  const [n1, n2] = stack.nodes;
  assert.equal((await stack.api("POST", "tenants", { name: "acme" })).status, 201);
  for (const [name, cidr] of [["control", "10.10.0.0/24"], ["data", "10.20.0.0/24"]]) {
    const r = await stack.api("POST", "tenants/acme/networks", {
      name,
      cidr,
      gateway: cidr.replace("0/24", "1"),
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }

  const app = await makePod(
    n1,
    "app",
    "acme",
    knitterList([{ name: "control" }, { name: "data", interface: "net1" }]),
  );
  const ctl = await makePod(n2, "ctl", "acme", knitterList(["control"]));
  const db = await makePod(n2, "db", "acme", knitterList(["data"]));
  const added = await app.add();
  assert.equal(added.code, 0, `ADD app: ${JSON.stringify(added.out)} ${added.stderr}`);
  const ips: Record<string, string> = {};
  for (const pod of [ctl, db]) {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)}`);
    ips[pod.name] = addressOf(r.out);
  }

  // The result lists both pod interfaces, each with its address from its own network.
  const result = added.out;
  const inPod = result.interfaces.filter((i: { sandbox?: string }) => i.sandbox === app.netns)
    .map((i: { name: string }) => i.name);
  assert.deepEqual(inPod.sort(), ["eth0", "net1"]);
  const appControl = addressOf(result, "eth0");
  const appData = addressOf(result, "net1");
  assert.match(appControl, /^10\.10\.0\.\d+$/);
  assert.match(appData, /^10\.20\.0\.\d+$/);
  assert.deepEqual(
    result.routes.filter((r: { dst: string }) => r.dst === "0.0.0.0/0"),
    [{ dst: "0.0.0.0/0", gw: "10.10.0.1" }],
    "one default route in the result, via the control network's gateway",
  );

  // And so does the pod itself.
  const ns = ipNetnsName(app.netns);
  const addrs = JSON.parse((await run(["ip", "-n", ns, "-j", "-4", "addr", "show"])).stdout) as {
    ifname: string;
    addr_info: { local: string }[];
  }[];
  const byIf = Object.fromEntries(addrs.map((l) => [l.ifname, l.addr_info.map((a) => a.local)]));
  assert.deepEqual(byIf.eth0, [appControl]);
  assert.deepEqual(byIf.net1, [appData]);
  const defaults = JSON.parse(
    (await run(["ip", "-n", ns, "-j", "-4", "route", "show", "default"])).stdout,
  ) as { dev: string; gateway: string }[];
  assert.deepEqual(defaults.map((r) => [r.dev, r.gateway]), [["eth0", "10.10.0.1"]]);
  // Each network through its own interface; anything else (TEST-NET-1) by the default route.
  for (const [ip, dev] of [[ips.ctl, "eth0"], [ips.db, "net1"], ["192.0.2.200", "eth0"]]) {
    const r = JSON.parse((await run(["ip", "-n", ns, "-j", "route", "get", ip])).stdout);
    assert.equal(r[0].dev, dev, `${ip} is reached through ${dev}`);
  }

  assert.ok(await pings(app, ips.ctl), "app reaches the control-plane pod on n2 (eth0)");
  assert.ok(await pings(app, ips.db), "app reaches the data-plane pod on n2 (net1)");
  assert.ok(await pings(ctl, appControl), "the control-plane pod reaches app's eth0");
  assert.ok(await pings(db, appData), "the data-plane pod reaches app's net1");

  assert.equal((await app.check()).code, 0, "CHECK verifies both interfaces");
  for (const pod of [app, ctl, db]) assert.equal((await pod.del()).code, 0, `DEL ${pod.name}`);
  for (const node of stack.nodes) {
    assert.deepEqual(await leftovers(node), { ovsPorts: [], veths: [], journal: [] });
  }
  assert.equal(await usage(stack, "acme", "control"), 0);
  assert.equal(await usage(stack, "acme", "data"), 0);
});
