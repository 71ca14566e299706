import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { isIfName } from "@knitter/plugin/contract";
import { Cleanup } from "../../devstack/cleanup.ts";
import {
  completePodInterface,
  createPodInterface,
  deletePodInterface,
  hostIfName,
  InterfaceExistsError,
  type PodInterfaceSpec,
  podInterfaceState,
  podPairMade,
  sendPodPair,
  startPodBatch,
} from "./ip_links.ts";

/** A "host" netns (standing in for the agent's own) and a pod netns; never the test's netns. */
async function setup(cleanup: Cleanup, pods = 1): Promise<{ host: string; pods: string[] }> {
  const names = [
    cleanup.name("host"),
    ...Array.from({ length: pods }, (_, i) => cleanup.name(`p${i}`)),
  ];
  for (const name of names) {
    cleanup.netns(name);
    await run(["ip", "netns", "add", name]);
  }
  const [host, ...rest] = names.map((name) => `/var/run/netns/${name}`);
  return { host, pods: rest };
}

function spec(
  host: string,
  pod: string,
  overrides: Partial<PodInterfaceSpec> = {},
): PodInterfaceSpec {
  return {
    netns: pod,
    hostNetns: host,
    ifName: "eth1",
    hostIfName: hostIfName("c0ffee", "eth1"),
    mac: "02:00:0a:01:00:05",
    mtu: 1450,
    addresses: ["10.1.0.5/24", "2001:db8:1::5/64"],
    routes: [
      { dst: "10.2.0.0/16", via: "10.1.0.1" },
      { dst: "10.3.0.0/16" },
      { dst: "default", via: "2001:db8:1::1" },
    ],
    ...overrides,
  };
}

async function links(netns: string): Promise<string[]> {
  const out = await run(["ip", "-json", "link", "show"], { netns });
  return (JSON.parse(out.stdout) as { ifname: string }[]).map((l) => l.ifname);
}

Deno.test("createPodInterface builds the pod end and the host end as asked", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod] } = await setup(cleanup);
  const s = spec(host, pod);
  const { hostIfIndex, podIfIndex } = await createPodInterface(s);

  const state = await podInterfaceState(pod, "eth1");
  assert.deepEqual(state, {
    mac: "02:00:0a:01:00:05",
    mtu: 1450,
    addresses: ["10.1.0.5/24", "2001:db8:1::5/64"],
    up: true,
  });
  const v4 = await run(["ip", "route", "show", "dev", "eth1"], { netns: pod });
  assert.match(v4.stdout, /^10\.1\.0\.0\/24 .*scope link src 10\.1\.0\.5/m);
  assert.match(v4.stdout, /^10\.2\.0\.0\/16 via 10\.1\.0\.1 $/m);
  assert.match(v4.stdout, /^10\.3\.0\.0\/16 scope link $/m);
  const v6 = await run(["ip", "-6", "route", "show", "default"], { netns: pod });
  assert.match(v6.stdout, /^default via 2001:db8:1::1 dev eth1/m);
  // The address is usable at once: no duplicate address detection.
  const addr = await run(["ip", "-6", "addr", "show", "dev", "eth1"], { netns: pod });
  assert.doesNotMatch(addr.stdout, /2001:db8:1::5.*tentative/);

  const hostEnd = await run(["ip", "-json", "link", "show", "dev", s.hostIfName], { netns: host });
  const [h] = JSON.parse(hostEnd.stdout) as { ifindex: number; mtu: number; flags: string[] }[];
  assert.equal(h.ifindex, hostIfIndex);
  assert.equal(h.mtu, 1450);
  assert.ok(h.flags.includes("UP"));
  const podEnd = await run(["ip", "-json", "link", "show", "dev", "eth1"], { netns: pod });
  assert.equal((JSON.parse(podEnd.stdout) as { ifindex: number }[])[0].ifindex, podIfIndex);
});

Deno.test("a failure midway names the step and leaves no veth behind", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod] } = await setup(cleanup);
  const bad = spec(host, pod, { routes: [{ dst: "10.20.0.0/16", via: "10.77.0.1" }] });
  await assert.rejects(
    createPodInterface(bad),
    /Cannot create eth1 in .*: step "add route 10\.20\.0\.0\/16 via 10\.77\.0\.1" failed: .*Nexthop has invalid gateway/,
  );
  assert.deepEqual(await links(host), ["lo"]);
  assert.deepEqual(await links(pod), ["lo"]);
});

Deno.test("an interface that already exists is refused and left alone", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod] } = await setup(cleanup);
  await createPodInterface(spec(host, pod));
  const again = spec(host, pod, { hostIfName: hostIfName("other", "eth1") });
  await assert.rejects(
    createPodInterface(again),
    (e) =>
      e instanceof InterfaceExistsError && e.side === "pod" &&
      /^eth1 already exists in .*, and knitter did not make it/.test(e.message),
  );
  assert.equal((await podInterfaceState(pod, "eth1"))?.mac, "02:00:0a:01:00:05");
  assert.deepEqual((await links(host)).sort(), ["lo", hostIfName("c0ffee", "eth1")].sort());
});

Deno.test("a host end whose name is taken on the node is refused, naming it", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod, pod2] } = await setup(cleanup, 2);
  await createPodInterface(spec(host, pod));
  await assert.rejects(
    createPodInterface(spec(host, pod2)),
    (e) =>
      e instanceof InterfaceExistsError && e.side === "host" && /ip link del kn/.test(e.message),
  );
  assert.deepEqual(await links(pod2), ["lo"]);
});

Deno.test("bad input is refused before anything runs", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod] } = await setup(cleanup);
  const cases: [Partial<PodInterfaceSpec>, RegExp][] = [
    [{ ifName: "eth0:1" }, /invalid interface name "eth0:1"/],
    [{ ifName: "a-very-long-name0" }, /invalid interface name/],
    [{ ifName: ".." }, /invalid interface name/],
    [{ mac: "02:00:00:00:00" }, /invalid MAC/],
    [{ mtu: 20 }, /invalid MTU 20/],
    [{ addresses: ["10.1.0.5/24\nlink del lo"] }, /invalid address/],
    [{ routes: [{ dst: "10.0.0.0/8", via: "10.1.0.1 onlink" }] }, /invalid gateway/],
    [
      { netns: "/var/run/netns/kt-none-x" },
      /network namespace \/var\/run\/netns\/kt-none-x does not exist/,
    ],
  ];
  for (const [overrides, error] of cases) {
    await assert.rejects(createPodInterface(spec(host, pod, overrides)), error);
  }
  assert.deepEqual(await links(host), ["lo"]);
});

Deno.test("deletePodInterface is idempotent, also when the netns is gone", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod, pod2] } = await setup(cleanup, 2);
  const s = spec(host, pod);
  await createPodInterface(s);
  const end = { netns: pod, ifName: "eth1", mac: s.mac };
  assert.equal(await deletePodInterface(s.hostIfName, end, host), true);
  assert.equal(await deletePodInterface(s.hostIfName, end, host), false);
  assert.equal(await podInterfaceState(pod, "eth1"), null);
  assert.deepEqual(await links(host), ["lo"]);

  const s2 = spec(host, pod2, { hostIfName: hostIfName("c0ffee2", "eth1") });
  await createPodInterface(s2);
  await run(["ip", "netns", "del", pod2.split("/").pop()!]);
  // The kernel tears a deleted netns down asynchronously: the pair may still be there, or not.
  const end2 = { netns: pod2, ifName: "eth1", mac: s2.mac };
  await deletePodInterface(s2.hostIfName, end2, host);
  assert.equal(await deletePodInterface(s2.hostIfName, end2, host), false);
  assert.equal(await podInterfaceState(pod2, "eth1"), null);
  assert.deepEqual(await links(host), ["lo"]);
});

Deno.test("deletePodInterface removes a pod end without its host end only when its MAC is ours", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod] } = await setup(cleanup);
  const theirs = "02:00:00:00:00:99";
  await run(
    ["ip", "link", "add", "stray", "type", "veth", "peer", "name", "eth1", "address", theirs],
    { netns: pod },
  );
  // Another plugin's eth1, or one we cannot tell: left alone.
  const ours = { netns: pod, ifName: "eth1", mac: "02:00:00:00:00:01" };
  assert.equal(await deletePodInterface("knnothere", ours, host), false);
  assert.equal(await deletePodInterface("knnothere", { ...ours, mac: undefined }, host), false);
  assert.deepEqual((await links(pod)).sort(), ["eth1", "lo", "stray"]);
  // Ours (the MAC knitter gave it), its host end moved away: deleted.
  assert.equal(await deletePodInterface("knnothere", { ...ours, mac: theirs }, host), true);
  assert.deepEqual(await links(pod), ["lo"]);
});

Deno.test("hostIfName is deterministic, 15 characters, per container and interface", () => {
  const a = hostIfName("9a1f0c0ffee", "eth0");
  assert.match(a, /^kn[0-9a-f]{13}$/);
  assert.equal(a, hostIfName("9a1f0c0ffee", "eth0"));
  assert.notEqual(a, hostIfName("9a1f0c0ffee", "eth1"));
  assert.ok(isIfName(a));
});

Deno.test("sendPodPair makes the pair before the rest is sent, podPairMade says when; completePodInterface makes it what createPodInterface makes, the host end's MTU corrected", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod] } = await setup(cleanup);
  const s = spec(host, pod, { softwareChecksums: true });
  const batch = await startPodBatch(pod);
  // Sent before the manager's answer: the network's MTU guessed (1500), no MAC, no address.
  await sendPodPair({ ...s, mtu: 1500 }, batch);
  assert.equal(await podPairMade(batch), true);
  // Both ends are there once it says so: the host end is what the switch port needs.
  assert.deepEqual(await links(host), ["lo", s.hostIfName]);
  const early = await podInterfaceState(pod, "eth1");
  assert.notEqual(early?.mac, s.mac);
  assert.deepEqual([early?.mtu, early?.addresses, early?.up], [1500, [], false]);

  await completePodInterface(s, 1500, batch);
  assert.deepEqual(await podInterfaceState(pod, "eth1"), {
    mac: "02:00:0a:01:00:05",
    mtu: 1450,
    addresses: ["10.1.0.5/24", "2001:db8:1::5/64"],
    up: true,
  });
  const hostEnd = await run(["ip", "-json", "link", "show", "dev", s.hostIfName], { netns: host });
  const [h] = JSON.parse(hostEnd.stdout) as { mtu: number; flags: string[] }[];
  assert.deepEqual([h.mtu, h.flags.includes("UP")], [1450, true]);
  const v6 = await run(["ip", "-6", "route", "show", "default"], { netns: pod });
  assert.match(v6.stdout, /^default via 2001:db8:1::1 dev eth1/m);
  const tx = (await run(["ethtool", "-k", "eth1"], { netns: pod })).stdout;
  assert.match(tx, /^tx-checksumming: off/m);
  const ra = await run(["sysctl", "-n", "net/ipv6/conf/eth1/accept_ra"], { netns: pod });
  assert.equal(ra.stdout.trim(), "0");
});

Deno.test("completePodInterface after sendPodPair: a taken name is InterfaceExistsError and stays; a later step that fails names itself and leaves no veth", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [pod] } = await setup(cleanup);
  await createPodInterface(spec(host, pod));
  const taken = spec(host, pod, { hostIfName: hostIfName("other", "eth1") });
  const first = await startPodBatch(pod);
  await sendPodPair(taken, first);
  assert.equal(await podPairMade(first), false, "ip stopped at the pair");
  await assert.rejects(
    completePodInterface(taken, taken.mtu, first),
    (e) => e instanceof InterfaceExistsError && e.side === "pod",
  );
  assert.equal((await podInterfaceState(pod, "eth1"))?.mac, "02:00:0a:01:00:05");

  const s = ipv4Only(host, pod);
  const second = await startPodBatch(pod);
  await sendPodPair(s, second);
  await assert.rejects(
    completePodInterface(
      { ...s, routes: [{ dst: "10.20.0.0/16", via: "10.77.0.1" }] },
      s.mtu,
      second,
    ),
    /Cannot create eth2 in .*: step "add route 10\.20\.0\.0\/16 via 10\.77\.0\.1" failed/,
  );
  assert.deepEqual((await links(host)).sort(), ["lo", hostIfName("c0ffee", "eth1")].sort());
  assert.deepEqual(await links(pod), ["lo", "eth1"]);
});

Deno.test("createPodInterface timing", async () => {
  await using cleanup = new Cleanup();
  const { host, pods } = await setup(cleanup, 20);
  const times: number[] = [];
  for (const [i, pod] of pods.entries()) {
    const started = performance.now();
    await createPodInterface(spec(host, pod, { hostIfName: hostIfName(`t${i}`, "eth1") }));
    times.push(performance.now() - started);
  }
  const deletes: number[] = [];
  for (const i of pods.keys()) {
    const started = performance.now();
    await deletePodInterface(hostIfName(`t${i}`, "eth1"), undefined, host);
    deletes.push(performance.now() - started);
  }
  console.log(`createPodInterface (1 exec, 2 addresses, 3 routes): ${summary(times)}`);
  console.log(`deletePodInterface (1 exec): ${summary(deletes)}`);
});

function summary(ms: number[]): string {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return `n=${ms.length} p50 ${at(0.5).toFixed(1)} ms, p90 ${at(0.9).toFixed(1)} ms, max ${
    sorted.at(-1)!.toFixed(1)
  } ms`;
}

Deno.test("createPodInterface with softwareChecksums: tx checksum offload is off on the pod end, for a named netns and for a /proc path", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [named, other] } = await setup(cleanup, 2);
  const txOn = async (netns: string) =>
    /^tx-checksumming: on/m.test((await run(["ethtool", "-k", "eth1"], { netns })).stdout);

  await createPodInterface(spec(host, named, { softwareChecksums: true }));
  assert.equal(await txOn(named), false, "named netns: turned off");

  // A /proc/PID/ns/net path, as some runtimes pass.
  const proc = await procPathOf(cleanup, other);
  await createPodInterface(
    spec(host, proc, { softwareChecksums: true, hostIfName: hostIfName("c0ffee", "p2") }),
  );
  assert.equal(await txOn(other), false, "/proc path: turned off too");

  await createPodInterface(ipv4Only(host, named));
  const eth2 = (await run(["ethtool", "-k", "eth2"], { netns: named })).stdout;
  assert.match(eth2, /^tx-checksumming: on/m, "without it, the kernel's default stays");
});

Deno.test("createPodInterface with an IPv6 address: router advertisements are off on the pod end (named netns and /proc path); an IPv4-only one keeps the default", async () => {
  await using cleanup = new Cleanup();
  const { host, pods: [named, other] } = await setup(cleanup, 2);
  const acceptRa = async (netns: string, ifName: string) =>
    (await run(["sysctl", "-n", `net/ipv6/conf/${ifName}/accept_ra`], { netns })).stdout.trim();

  await createPodInterface(spec(host, named));
  assert.equal(await acceptRa(named, "eth1"), "0", "named netns: the batch turned them off");

  const proc = await procPathOf(cleanup, other);
  await createPodInterface(spec(host, proc, { hostIfName: hostIfName("c0ffee", "p2") }));
  assert.equal(await acceptRa(other, "eth1"), "0", "/proc path: through nsenter");

  await createPodInterface(ipv4Only(host, named));
  assert.equal(await acceptRa(named, "eth2"), "1", "IPv4 only: the kernel's default stays");
});

/** The named netns `path` as a /proc/PID/ns/net path (of a sleeper in it), as some runtimes pass. */
async function procPathOf(cleanup: Cleanup, path: string): Promise<string> {
  const sleeper = new Deno.Command("ip", {
    args: ["netns", "exec", path.slice(path.lastIndexOf("/") + 1), "sleep", "30"],
  }).spawn();
  cleanup.pid(sleeper.pid);
  const proc = `/proc/${sleeper.pid}/ns/net`;
  const want = (await Deno.stat(path)).ino;
  // `ip netns exec` enters the netns, then execs sleep: wait until the pid is inside.
  for (let i = 0; i < 100 && (await Deno.stat(proc).catch(() => null))?.ino !== want; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  return proc;
}

/** A second interface, eth2, with one IPv4 address and no routes. */
function ipv4Only(host: string, pod: string): PodInterfaceSpec {
  return spec(host, pod, {
    ifName: "eth2",
    hostIfName: hostIfName("c0ffee", "eth2"),
    mac: "02:00:0a:01:00:06",
    addresses: ["10.9.0.5/24"],
    routes: [],
  });
}
