/**
 * The node's side of a live migration (migration.ts) against stand-ins for OVS's counters and the
 * manager: a frame from the guest at an inactive port activates it here and at the manager; a
 * refusal leaves it inactive; a pod's own IPv6 chatter is not a frame the flows count.
 */
import assert from "node:assert/strict";
import { createLogger, ManagerError, type Port } from "@knitter/common";
import {
  carried,
  claimKey,
  gratuitousArp,
  type InactivePort,
  Migrations,
  unsolicitedNa,
} from "./migration.ts";

const log = createLogger("migration test", "error");

const PORT = {
  id: "target",
  tenant: "acme",
  networkId: "net-1",
  claim: "vm1",
  active: false,
} as unknown as Port;

const WATCHED: InactivePort = {
  tenant: "acme",
  network: "blue",
  id: "target",
  key: "acme/net-1/target",
  cookie: (1n << 32n) | 7n,
  ofport: 7,
  mac: "02:00:0a:00:00:09",
  ipv4: "10.0.0.9",
  target: true,
};

/** OVS whose counters read `packets`, and a manager that answers `answer`. */
function standIns(answer: () => Promise<unknown>) {
  const seen = { packets: 0, asked: [] as string[][], activated: [] as string[], syncs: 0 };
  const deps = {
    bridge: "br-int",
    log,
    ofctl: (args: string[]) => {
      seen.asked.push(args);
      return Promise.resolve(
        args[0] === "dump-flows"
          ? ` cookie=0x100000007, n_packets=0, arp actions=drop\n` +
            ` cookie=0x100000007, n_packets=${seen.packets}, ip actions=drop\n`
          : "",
      );
    },
    activatePort: (tenant: string, network: string, id: string) => {
      seen.activated.push(`${tenant}/${network}/${id}`);
      return answer();
    },
    resync: () => {
      seen.syncs++;
      return Promise.resolve();
    },
  };
  return { seen, deps };
}

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 2));
  assert.ok(ok(), what);
}

Deno.test("migration: the guest's first frame at an inactive port activates it here at once, announces it, and asks the manager", async () => {
  const { seen, deps } = standIns(() => Promise.resolve({}));
  const m = new Migrations(deps, 1);
  assert.equal(m.isActive(PORT), false);
  m.watch([WATCHED]);
  await until("the counters are read", () => seen.asked.length > 2);
  assert.deepEqual(seen.activated, [], "nothing counted: nothing activated");
  assert.deepEqual(seen.asked[0], ["dump-flows", "br-int", "cookie=0x100000007/-1,table=0"]);
  seen.packets = 1;
  await until("the manager is asked", () => seen.activated.length === 1);
  assert.deepEqual(seen.activated, ["acme/blue/target"]);
  assert.equal(m.isActive(PORT), true, "active here before the feed says so");
  await until("the announcement is sent", () => seen.asked.some((a) => a[0] === "packet-out"));
  assert.deepEqual(seen.asked.find((a) => a[0] === "packet-out"), [
    "packet-out",
    "br-int",
    "7",
    "table",
    gratuitousArp("02:00:0a:00:00:09", "10.0.0.9"),
  ]);
  // The feed catches up: the manager's word from then on.
  assert.equal(m.isActive({ ...PORT, active: undefined } as Port), true);
  assert.equal(m.isActive(PORT), false, "inactive again when the manager says so (migrated away)");
  m.watch([]);
  await m.stop();
});

Deno.test("migration: a port the manager refuses to activate goes back to inactive and is not asked again at once", async () => {
  const { seen, deps } = standIns(() =>
    Promise.reject(new ManagerError(404, "not_found", "port target not found"))
  );
  const m = new Migrations(deps, 1);
  m.watch([WATCHED]);
  seen.packets = 3;
  await until("the manager is asked", () => seen.activated.length === 1);
  await until("back to inactive", () => !m.isActive(PORT));
  const syncs = seen.syncs;
  assert.ok(syncs >= 2, "synced when activated and when refused");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(seen.activated.length, 1, "not asked again right away");
  await m.stop();
});

Deno.test("migration: a remote port is left out when inactive or when its claim is active here", () => {
  const remote = { ...PORT, id: "source", active: undefined } as unknown as Port;
  assert.equal(carried(remote, new Set()), true);
  assert.equal(carried(remote, new Set([claimKey(remote)])), false);
  assert.equal(carried({ ...remote, active: false }, new Set()), false);
  assert.equal(carried({ ...remote, claim: undefined }, new Set([claimKey(remote)])), true);
});

Deno.test("migration: the gratuitous ARP is the guest's own announcement of its address", () => {
  assert.equal(
    gratuitousArp("02:00:0A:00:00:09", "10.0.0.9"),
    "ffffffffffff" + "02000a000009" + "0806" + "0001080006040001" + "02000a000009" + "0a000009" +
      "000000000000" + "0a000009" + "00".repeat(18),
  );
});

Deno.test("migration: a port the manager made active at its ADD (a source) does not activate by frames, also after a restart", async () => {
  const { seen, deps } = standIns(() => Promise.resolve({}));
  const m = new Migrations(deps, 1);
  assert.equal(m.isActive(PORT), false);
  m.watch([{ ...WATCHED, target: false }]);
  seen.packets = 5;
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual([seen.activated, seen.asked], [[], []]);
  await m.stop();
});

Deno.test("migration: a source port turned inactive by the manager is not taken back by stray frames", async () => {
  const { seen, deps } = standIns(() => Promise.resolve({}));
  const m = new Migrations(deps, 1);
  assert.equal(m.isActive({ ...PORT, active: undefined } as Port), true, "the source, active");
  m.watch([]);
  assert.equal(m.isActive(PORT), false, "migrated away: inactive");
  m.watch([WATCHED]);
  seen.packets = 5;
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual(seen.activated, [], "the manager is not asked");
  assert.deepEqual(seen.asked, [], "its counters are not even read");
  await m.stop();
});

Deno.test("migration: the unsolicited neighbour advertisement carries the guest's address and MAC, with a checksum that verifies", () => {
  const na = unsolicitedNa("02:00:0a:00:00:09", "fd00:1::9");
  const target = "fd000001000000000000000000000009";
  assert.equal(na.slice(0, 28), "333300000001" + "02000a000009" + "86dd");
  const ipv6 = na.slice(28, 108);
  const icmp = na.slice(108);
  assert.equal(
    ipv6.slice(0, 16),
    "6000000000203aff",
    "version 6, 32 bytes of ICMPv6, hop limit 255",
  );
  assert.equal(ipv6.slice(16, 48), target);
  assert.equal(icmp.slice(0, 4), "8800", "type 136, code 0");
  assert.equal(icmp.slice(8, 16), "20000000", "override");
  assert.equal(icmp.slice(16), target + "0201" + "02000a000009");
  // The one's complement sum over the pseudo-header and the message, checksum included, is 0xffff.
  const words = ipv6.slice(16, 80) + "00000020" + "0000003a" + icmp;
  let sum = 0;
  for (let i = 0; i < words.length; i += 4) sum += parseInt(words.slice(i, i + 4), 16);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  assert.equal(sum, 0xffff);
});
