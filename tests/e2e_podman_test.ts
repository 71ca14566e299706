/**
 * A real container runtime drives the plugin: Debian's podman (CNI network backend) with runc runs
 * busybox containers on two simulated nodes of a Knitter stack. The plugin is installed as a
 * runtime finds one (a link in /opt/cni/bin, named in the conflist), chained with the reference
 * tuning, portmap and bandwidth plugins, and gets nothing from its environment: podman, conmon and
 * the cleanup conmon runs all have a minimal PATH and no KNITTER_* variable; the conflist names
 * each node's agent socket. Last, the same podman runs macvlan with the knitter IPAM.
 */
import assert from "node:assert/strict";
import { Cleanup } from "../devstack/cleanup.ts";
import {
  type Container,
  MINIMAL_PATH,
  missingForPodman,
  type Podman,
  startPodman,
} from "./support/podman.ts";
import { createNetwork, createTenant } from "./support/pods.ts";
import { externalHost } from "./support/external_host.ts";
import { run } from "@knitter/common";
import { flows, journal, leftovers } from "./support/leftovers.ts";
import { type Stack, type StackNode, startStack, waitFor } from "../devstack/stack.ts";

/** podman passes no K8S_POD_NAMESPACE, so pods land in the agent's default tenant. */
const TENANT = "default";
const NETWORK = "web";
const PAYLOAD_BYTES = 300 * 1024;
/** The port `podman run --publish` opens on the node. */
const PUBLISHED = 18081;
/** Hex of 64 KiB of random bytes (at most what one getRandomValues gives). */
const HEX_BYTES = 128 * 1024;

const skip = Deno.uid() === 0 ? undefined : "needs root (podman, network namespaces, Open vSwitch)";
if (skip) console.log(`e2e_podman_test.ts: skipped: ${skip}`);

Deno.test({
  name:
    "e2e podman: a real podman with runc runs containers through the installed plugin (chained with tuning, portmap, bandwidth; no environment); they get the manager's addresses and talk TCP across nodes; conmon's cleanup and stop + rm release everything",
  ignore: skip !== undefined,
  fn: async () => {
    await using cleanup = new Cleanup();
    const stack = await podmanStack(cleanup, ["n1", "n2"]);
    const [n1, n2] = stack.nodes;
    await createNetwork(stack, TENANT, NETWORK, "10.60.0.0/24");
    const pm = await startPodman(cleanup);
    // One podman network per node: the same Knitter network, through that node's agent.
    const netOf = (node: StackNode) => `${cleanup.prefix}-${node.name}`;
    for (const node of [n1, n2]) await pm.addNetwork(conflist(pm, netOf(node), node.agentSocket));
    const baseline = { n1: await flows(n1), n2: await flows(n2) };

    // The server on n1: busybox httpd with a payload of random bytes.
    const www = `${pm.dir}/www`;
    const out = `${pm.dir}/out`;
    await Deno.mkdir(www);
    await Deno.mkdir(out);
    const payload = randomBytes(PAYLOAD_BYTES);
    await Deno.writeFile(`${www}/payload`, payload);
    const a = await pm.runDetached([
      ...["--name", cleanup.name("a"), "--network", netOf(n1), "--volume", `${www}:/www:ro`],
      ...[pm.image, "httpd", "-f", "-v", "-p", "80", "-h", "/www"],
    ]);
    const aIp = await expectManagersAddress(stack, pm, a, n1);
    await expectBareCleanup(pm, a);
    // tuning ran after knitter, on the interface knitter made.
    const redirects = await pm.podman(["exec", a.id, "cat", eth0Sysctl("accept_redirects")]);
    assert.equal(redirects.stdout.trim(), "0", "tuning's sysctl inside the container");

    // The client on n2 waits for a go, fetches the payload, and exits by itself.
    const fetch = "while [ ! -e /out/go ]; do sleep 0.1; done; " +
      `for i in $(seq 20); do wget -q -O /out/payload http://${aIp}/payload && exit 0; ` +
      "sleep 0.5; done; exit 1";
    const b = await pm.runDetached([
      ...["--name", cleanup.name("b"), "--network", netOf(n2), "--volume", `${out}:/out`],
      ...[pm.image, "sh", "-c", fetch],
    ]);
    const bIp = await expectManagersAddress(stack, pm, b, n2);
    await Deno.writeTextFile(`${out}/go`, "");

    // Nobody calls podman or the plugin now: the container's exit alone makes conmon run
    // `podman container cleanup`, and that must release b through the plugin.
    await waitFor(
      `the release of ${b.name} by conmon's cleanup`,
      async () => (await holds(stack, n2, b)).length === 0,
      60_000,
    ).catch(async (err) => {
      throw new Error(`${err.message}: still held: ${(await holds(stack, n2, b)).join(", ")}`);
    });
    const state = await pm.podman([
      "inspect",
      "--format",
      "{{.State.Status}} {{.State.ExitCode}}",
      b.id,
    ]);
    assert.equal(state.stdout.trim(), "exited 0", "wget fetched the payload");
    assert.deepEqual(await Deno.readFile(`${out}/payload`), payload, "the payload arrived intact");
    // The server saw the client's manager-given address.
    const log = await pm.podman(["logs", a.id]);
    assert.match(log.stdout + log.stderr, new RegExp(`${bIp.replaceAll(".", "\\.")}\\]?:\\d+: `));
    await pm.podman(["rm", b.id]);

    // podman stop releases a (podman stop and conmon's exit command both run the cleanup).
    await pm.podman(["stop", "--time", "1", a.id]);
    await waitFor(
      `the release of ${a.name} by podman stop`,
      async () => (await holds(stack, n1, a)).length === 0,
      10_000,
    ).catch(async (err) => {
      throw new Error(`${err.message}: still held: ${(await holds(stack, n1, a)).join(", ")}`);
    });
    await pm.podman(["rm", a.id]);

    // Nothing is left of either container, on either node, at the manager, or on the host.
    for (const node of [n1, n2]) {
      assert.deepEqual(await leftovers(node), { ovsPorts: [], veths: [], journal: [] }, node.name);
      const name = node.name as "n1" | "n2";
      await waitFor(
        `${node.name}'s flows back to what they were`,
        async () => JSON.stringify(await flows(node)) === JSON.stringify(baseline[name]),
        10_000,
      );
    }
    const ports = await stack.api("GET", `ports?tenant=${TENANT}`);
    assert.deepEqual(ports.body.items, [], "the manager holds no port");
    for (const c of [a, b]) {
      assert.equal(await exists(c.netns), false, `${c.netns} is gone`);
      for (const node of [n1, n2]) {
        const cached = `/var/lib/cni/results/${netOf(node)}-${c.id}-eth0`;
        assert.equal(await exists(cached), false, `${cached} is gone`);
      }
    }
  },
});

Deno.test({
  name:
    "e2e podman: `podman run --publish` on a hostAccess network, podman running in the node's netns as on a real node: the external host fetches the container's payload through the node's address (portmap), the node reaches the container, and stop + rm leave no port and no rule",
  ignore: skip !== undefined,
  fn: async () => {
    await using cleanup = new Cleanup();
    const stack = await podmanStack(cleanup, ["n1"]);
    const [n1] = stack.nodes;
    // hostAccess is the admin's setting (the stack's token is the admin's).
    const made = await stack.api("POST", `tenants/${TENANT}/networks`, {
      name: "front",
      cidr: "10.61.0.0/24",
      gateway: "10.61.0.1",
      hostAccess: true,
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const ext = await externalHost(cleanup);
    const pm = await startPodman(cleanup, { netns: n1.sim.netns });
    const net = `${cleanup.prefix}-n1`;
    await pm.addNetwork(conflist(pm, net, n1.agentSocket, "front"));

    const www = `${pm.dir}/www`;
    await Deno.mkdir(www);
    const payload = randomBytes(PAYLOAD_BYTES);
    await Deno.writeFile(`${www}/payload`, payload);
    const a = await pm.runDetached([
      ...["--name", cleanup.name("a"), "--network", net, "--publish", `${PUBLISHED}:80`],
      ...["--volume", `${www}:/www:ro`, pm.image, "httpd", "-f", "-p", "80", "-h", "/www"],
    ]);
    const aIp = await expectManagersAddress(stack, pm, a, n1, "front");

    // From outside, to the node's address and the published port: portmap's DNAT, the host port.
    const fetched = `${pm.dir}/fetched`;
    const url = `http://${n1.sim.underlayIp}:${PUBLISHED}/payload`;
    await waitFor(`the external host fetches ${url}`, async () => {
      const r = await run(
        ["ip", "netns", "exec", ext, "busybox", "wget", "-q", "-O", fetched, url],
        {
          check: false,
          timeoutMs: 10_000,
        },
      );
      return r.code === 0;
    }, 30_000);
    assert.deepEqual(await Deno.readFile(fetched), payload, "the payload arrived intact");
    // The node itself (kubelet's probes) reaches the container's own address.
    const probe = await run(
      [
        "ip",
        "netns",
        "exec",
        n1.sim.netns,
        "busybox",
        "wget",
        "-q",
        "-O",
        "-",
        `http://${aIp}/payload`,
      ],
      { timeoutMs: 10_000 },
    );
    assert.equal(probe.stdout.length > 0, true, "the node fetched from the container");

    await pm.podman(["stop", "--time", "1", a.id]);
    await waitFor(
      `the release of ${a.name} by podman stop`,
      async () => (await holds(stack, n1, a, "front")).length === 0,
      10_000,
    );
    await pm.podman(["rm", a.id]);
    const nat = await run(["ip", "netns", "exec", n1.sim.netns, "iptables-save", "-t", "nat"]);
    assert.ok(!nat.stdout.includes(`--dport ${PUBLISHED}`), `portmap's DNAT went: ${nat.stdout}`);
    assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
  },
});

Deno.test({
  name:
    "e2e podman IPAM: podman runs containers with one interface from knitter and one from macvlan with the knitter IPAM; they fetch a payload over the macvlan at the manager's addresses; stop + rm release everything",
  ignore: skip !== undefined,
  fn: async () => {
    await using cleanup = new Cleanup();
    const stack = await podmanStack(cleanup, ["n1"]);
    const [n1] = stack.nodes;
    await createNetwork(stack, TENANT, "front", "10.62.0.0/24");
    const data = await stack.api("POST", `tenants/${TENANT}/networks`, {
      name: "data",
      cidr: "10.63.0.0/24",
      dataPlane: "external",
    });
    assert.equal(data.status, 201, JSON.stringify(data.body));
    // The macvlan master: one end of a veth on the node (its peer up, so the master is up).
    await run(["ip", "-n", n1.sim.netns, "-batch", "-"], {
      stdin: "link add data0 type veth peer name data0p\nlink set data0p up\nlink set data0 up\n",
    });
    const pm = await startPodman(cleanup, { netns: n1.sim.netns });
    const [front, macvlan] = [`${cleanup.prefix}-front`, `${cleanup.prefix}-data`];
    await pm.addNetwork({
      cniVersion: "1.0.0",
      name: front,
      plugins: [{ type: pm.plugin, agentSocket: n1.agentSocket, networks: ["front"] }],
    });
    await pm.addNetwork({
      cniVersion: "1.0.0",
      name: macvlan,
      plugins: [{
        type: "macvlan",
        master: "data0",
        mode: "bridge",
        // Read by the forwarder when macvlan runs it as its IPAM (macvlan ignores it).
        agentSocket: n1.agentSocket,
        ipam: { type: pm.plugin, network: "data" },
      }],
    });

    const www = `${pm.dir}/www`;
    await Deno.mkdir(www);
    // Text (hex of random bytes): podman exec's output is read as text.
    const random = crypto.getRandomValues(new Uint8Array(HEX_BYTES / 2));
    const payload = [...random].map((b) => b.toString(16).padStart(2, "0")).join("");
    await Deno.writeTextFile(`${www}/payload`, payload);
    const networks = `${front},${macvlan}`;
    const a = await pm.runDetached([
      ...["--name", cleanup.name("a"), "--network", networks, "--volume", `${www}:/www:ro`],
      ...[pm.image, "httpd", "-f", "-p", "80", "-h", "/www"],
    ]);
    const b = await pm.runDetached([
      ...["--name", cleanup.name("b"), "--network", networks],
      ...[pm.image, "sleep", "600"],
    ]);
    const aIp = await expectDataAddress(stack, pm, a);
    await expectDataAddress(stack, pm, b);

    const fetched = await pm.podman(
      ["exec", b.id, "wget", "-q", "-O", "-", `http://${aIp}/payload`],
      { timeoutMs: 30_000 },
    );
    assert.equal(fetched.stdout, payload, "the payload arrived whole over the macvlan");

    for (const c of [a, b]) {
      await pm.podman(["stop", "--time", "1", c.id]);
      await waitFor(`the release of ${c.name}`, async () => !(await holdsData(stack, c)), 10_000);
      await pm.podman(["rm", c.id]);
    }
    assert.deepEqual(await leftovers(n1), { ovsPorts: [], veths: [], journal: [] });
    const ports = await stack.api("GET", `ports?tenant=${TENANT}`);
    assert.deepEqual(ports.body.items, [], "the manager holds no port");
    const links = await run(["ip", "-n", n1.sim.netns, "-o", "link", "show", "type", "macvlan"]);
    assert.equal(links.stdout.trim(), "", "no macvlan left on the node");
  },
});

/** A stack for podman's containers, with their tenant; fails when the machine lacks what podman needs. */
async function podmanStack(cleanup: Cleanup, nodes: string[]): Promise<Stack> {
  const missing = await missingForPodman();
  assert.deepEqual(missing, [], `missing ${missing.join(", ")}: run scripts/setup.sh as root`);
  const stack = await startStack({ cleanup, nodes });
  await createTenant(stack, TENANT);
  return stack;
}

/** The conflist of one podman network: knitter on a node's agent, then the reference plugins. */
function conflist(pm: Podman, name: string, agentSocket: string, network = NETWORK) {
  return {
    // The reference plugins of Debian 12 (1.1.1) speak up to 1.0.0.
    cniVersion: "1.0.0",
    name,
    plugins: [
      { type: pm.plugin, agentSocket, networks: [network] },
      { type: "tuning", sysctl: { "net.ipv4.conf.eth0.accept_redirects": "0" } },
      { type: "portmap", capabilities: { portMappings: true } },
      { type: "bandwidth", capabilities: { bandwidth: true } },
    ],
  };
}

function eth0Sysctl(name: string): string {
  return `/proc/sys/net/ipv4/conf/eth0/${name}`;
}

/**
 * The container's eth0 has the address the manager handed out for it on `node`, and podman read
 * the same address, MAC and gateway from the chain's result. Answers the address.
 */
async function expectManagersAddress(
  stack: Stack,
  pm: Podman,
  c: Container,
  node: StackNode,
  network = NETWORK,
): Promise<string> {
  const port = await stack.api("GET", portPath(c, network));
  assert.equal(port.status, 200, `the manager's port of ${c.name}: ${JSON.stringify(port.body)}`);
  assert.equal(port.body.node, node.name, `${c.name} is on ${node.name}`);
  const inside = await pm.podman(["exec", c.id, "ip", "-4", "-o", "addr", "show", "dev", "eth0"]);
  const address = /inet (\d+\.\d+\.\d+\.\d+\/\d+)/.exec(inside.stdout)?.[1];
  assert.equal(address, port.body.address, `eth0 of ${c.name}: ${inside.stdout}`);
  const format = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{.MacAddress}} {{.Gateway}}" +
    "{{end}}";
  const seen = await pm.podman(["inspect", "--format", format, c.id]);
  assert.equal(
    seen.stdout.trim(),
    `${port.body.ip} ${port.body.mac} ${port.body.gateway}`,
    `what podman read of ${c.name}'s result`,
  );
  return port.body.ip;
}

/**
 * conmon will run `podman container cleanup` (and so the plugin's DEL) with this podman's private
 * flags and with its own environment: the minimal PATH and nothing of Knitter's or Deno's.
 */
async function expectBareCleanup(pm: Podman, c: Container): Promise<void> {
  const pid = (await Deno.readTextFile(c.conmonPidfile)).trim();
  const argv = (await Deno.readTextFile(`/proc/${pid}/cmdline`)).split("\0");
  const exitArgs = argv.flatMap((a, i) => (a === "--exit-command-arg" ? [argv[i + 1]] : []));
  for (const [flag, value] of [["--network-config-dir", pm.netDir], ["--network-backend", "cni"]]) {
    assert.equal(exitArgs[exitArgs.indexOf(flag) + 1], value, `conmon's cleanup gets ${flag}`);
  }
  assert.deepEqual(exitArgs.slice(-3), ["container", "cleanup", c.id]);
  const environ = (await Deno.readTextFile(`/proc/${pid}/environ`)).split("\0");
  assert.ok(environ.includes(`PATH=${MINIMAL_PATH}`), environ.join(" "));
  const ours = environ.filter((e) => /^(KNITTER_|DENO)/.test(e));
  assert.deepEqual(ours, [], "conmon's environment holds nothing for the plugin");
}

/** The manager's port of a container's eth0: podman gives no pod UID, so the ID is the container's. */
function portPath(c: Container, network = NETWORK): string {
  return `tenants/${TENANT}/networks/${network}/ports/${c.id}-eth0`;
}

/** What of a container is still held: its manager port, journal record, OVS port. */
async function holds(
  stack: Stack,
  node: StackNode,
  c: Container,
  network = NETWORK,
): Promise<string[]> {
  const held: string[] = [];
  if ((await stack.api("GET", portPath(c, network))).status !== 404) {
    held.push("the manager's port");
  }
  if ((await journal(node)).some((r) => r.containerId === c.id)) held.push("the agent's record");
  const ports = (await leftovers(node)).ovsPorts;
  if (ports.length > 0) held.push(`OVS ports ${ports.join(", ")}`);
  return held;
}

/** getRandomValues gives at most 64 KiB a call. */
function randomBytes(n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let at = 0; at < n; at += 65536) crypto.getRandomValues(bytes.subarray(at, at + 65536));
  return bytes;
}

async function exists(path: string): Promise<boolean> {
  return (await Deno.lstat(path).catch(() => undefined)) !== undefined;
}

/**
 * The manager's port of a container's macvlan: podman gives no pod UID, so the ID is the
 * container's and the interface's (podman names the interfaces of a container's networks eth0 and
 * eth1 in an order of its own).
 */
function dataPortPath(c: Container, ifName: string): string {
  return `tenants/${TENANT}/networks/data/ports/${c.id}-${ifName}`;
}

/** Whether the manager or the agent still holds anything of the container's eth1. */
async function holdsData(stack: Stack, c: Container): Promise<boolean> {
  for (const ifName of ["eth0", "eth1"]) {
    if ((await stack.api("GET", dataPortPath(c, ifName))).status !== 404) return true;
  }
  return (await journal(stack.nodes[0])).some((r) => r.containerId === c.id);
}

/**
 * The container's interface on the data network (10.63.0.0/24) has the address the manager handed
 * out for its port; answers the address.
 */
async function expectDataAddress(stack: Stack, pm: Podman, c: Container): Promise<string> {
  const inside = await pm.podman(["exec", c.id, "ip", "-4", "-o", "addr", "show"]);
  const [, ifName, address] = /^\d+: (eth\d)\s+inet (10\.63\.0\.\d+\/24)/m.exec(inside.stdout) ??
    [];
  assert.ok(ifName, `an interface of ${c.name} on the data network: ${inside.stdout}`);
  const port = await stack.api("GET", dataPortPath(c, ifName));
  assert.equal(port.status, 200, `the manager's port of ${c.name}: ${JSON.stringify(port.body)}`);
  assert.equal(port.body.node, "n1");
  assert.equal(port.body.networkDataPlane, "external");
  assert.equal(address, port.body.address, `${ifName} of ${c.name}: ${inside.stdout}`);
  return port.body.ip;
}
