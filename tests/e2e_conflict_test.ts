/**
 * Entries that must not poison a node (agent/PIPELINE.md, "Conflicting entries"; manager/README.md,
 * "Quarantine"): a port's address released in the manager while its pod still runs on n1 (a DEL
 * that went astray), then handed by an admin to a port on n2 once its quarantine is over. n1 sees a
 * remote port with its own pod's address: it leaves that entry out, logs it, and keeps working for
 * everyone else (its flows install, new pods attach, traffic across nodes flows). The intruder's
 * status in the manager says so (which node, on what, with which port, since when) until the
 * conflict is gone (b1 deleted on n1).
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  addressOf,
  createNetwork,
  createTenant,
  knitterList,
  makePod,
  pings,
} from "./support/pods.ts";
import { startStack } from "../devstack/stack.ts";

const QUARANTINE_SECONDS = 3;
const NET = "tenants/acme/networks/control";

async function waitFor(what: string, fn: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

Deno.test("e2e conflict: a remote port with a local pod's address is left out, logged; the node keeps working", async () => {
  await using cleanup = new Cleanup();
  const stack = await startStack({
    cleanup,
    nodes: ["n1", "n2"],
    manager: { quarantineSeconds: QUARANTINE_SECONDS },
  });
  const [n1, n2] = stack.nodes;
  await createTenant(stack, "acme");
  await createNetwork(stack, "acme", "control", "10.10.0.0/24");

  const a1 = await makePod(n1, "a1", "acme", knitterList(["control"]));
  const b1 = await makePod(n1, "b1", "acme", knitterList(["control"]));
  const a2 = await makePod(n2, "a2", "acme", knitterList(["control"]));
  const ips: Record<string, string> = {};
  for (const pod of [a1, b1, a2]) {
    const r = await pod.add();
    assert.equal(r.code, 0, `ADD ${pod.name}: ${JSON.stringify(r.out)} ${r.stderr}`);
    ips[pod.name] = addressOf(r.out);
  }
  assert.ok(await pings(a1, ips.a2), "a1 reaches a2 before the conflict");

  // b1's port goes from the manager while b1 still runs on n1.
  const ports = await stack.api("GET", `${NET}/ports`);
  assert.equal(ports.status, 200, JSON.stringify(ports.body));
  const b1Port = ports.body.items.find((p: { ip: string }) => p.ip === ips.b1);
  assert.ok(b1Port, `b1's port (${ips.b1}) in ${JSON.stringify(ports.body)}`);
  assert.equal((await stack.api("DELETE", `${NET}/ports/${b1Port.id}`)).status, 204);

  // The quarantine keeps its address from anyone else for a while...
  const early = await stack.api("PUT", `${NET}/ports/intruder`, { ip: ips.b1, node: "n2" });
  assert.equal(early.status, 409, JSON.stringify(early.body));
  assert.equal(early.body.error.code, "address_taken");
  assert.match(early.body.error.message, /quarantine until/);
  // ...then an admin hands it to a port on n2: n1 now hears of a remote port with b1's address.
  await new Promise((r) => setTimeout(r, QUARANTINE_SECONDS * 1000 + 200));
  const late = await stack.api("PUT", `${NET}/ports/intruder`, { ip: ips.b1, node: "n2" });
  assert.equal(late.status, 201, JSON.stringify(late.body));

  const log = `${n1.sim.stateDir}/agent.log`;
  await waitFor(
    "n1 to log the remote port it leaves out",
    async () => (await Deno.readTextFile(log)).includes("remote ports left out of the flows"),
    10_000,
  );
  const line = (await Deno.readTextFile(log)).split("\n").find((l) =>
    l.includes("remote ports left out of the flows")
  )!;
  assert.match(line, /"reason":"local"/);
  assert.ok(line.includes(ips.b1), line);

  // The intruder's status says that n1 leaves it out, on b1's address, with b1's port.
  const intruderPath = `${NET}/ports/intruder`;
  await waitFor(
    "the intruder's status to show n1's conflict",
    async () => (await stack.api("GET", intruderPath)).body.conflicts !== undefined,
    10_000,
  );
  const status = (await stack.api("GET", intruderPath)).body;
  // The intruder has b1's address and, as the address's pool index makes the MAC, its MAC too.
  assert.equal(status.mac, b1Port.mac);
  const seen = status.conflicts.map(({ since, ...c }: { since: string }) => {
    assert.ok(!Number.isNaN(Date.parse(since)), since);
    return c;
  }).sort((a: { field: string }, b: { field: string }) => a.field.localeCompare(b.field));
  const claim = { node: "n1", reason: "local", with: { tenant: "acme", id: b1Port.id } };
  assert.deepEqual(seen, [
    { ...claim, field: "ip", value: ips.b1 },
    { ...claim, field: "mac", value: b1Port.mac },
  ]);
  const listed = (await stack.api("GET", `${NET}/ports`)).body.items;
  assert.deepEqual(
    listed.filter((p: { conflicts?: unknown }) => p.conflicts).map((p: { id: string }) => p.id),
    ["intruder"],
  );

  // n1 keeps working: a new pod attaches (its flows install) and traffic flows both ways.
  const c1 = await makePod(n1, "c1", "acme", knitterList(["control"]));
  const r = await c1.add();
  assert.equal(r.code, 0, `ADD c1 after the conflict: ${JSON.stringify(r.out)} ${r.stderr}`);
  ips.c1 = addressOf(r.out);
  assert.ok(await pings(c1, ips.a2), "the new pod on n1 reaches a2");
  assert.ok(await pings(a2, ips.c1), "and a2 reaches it");
  assert.ok(await pings(a1, ips.a2), "a1 still reaches a2");
  // On n1 the local pod keeps its address: a1 reaches b1, not the intruder.
  assert.ok(await pings(a1, ips.b1), "a1 reaches b1, the local owner of the address");

  // b1 goes: n1 has no claimant of that address left, takes the intruder in, and clears its report.
  assert.equal((await b1.del()).code, 0, "DEL b1");
  await waitFor(
    "the intruder's status to clear",
    async () => (await stack.api("GET", intruderPath)).body.conflicts === undefined,
    10_000,
  );
  const after = await stack.api("GET", intruderPath);
  assert.equal(after.status, 200, JSON.stringify(after.body));
  assert.equal(after.body.ip, ips.b1);

  assert.equal((await stack.api("DELETE", intruderPath)).status, 204);
  for (const pod of [a1, a2, c1]) assert.equal((await pod.del()).code, 0, `DEL ${pod.name}`);
});
