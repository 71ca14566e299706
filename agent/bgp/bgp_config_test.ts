/** The agent's `bgp` section: defaults from the node, and each mistake named with what to do. */
import assert from "node:assert/strict";
import { DaemonConfigError } from "@knitter/common/daemon_config";
import { loadAgentConfig } from "../config.ts";
import { speakerFor } from "./bgp_speaker.ts";
import { bgpSettings } from "./bgp_settings.ts";
import { createLogger } from "@knitter/common";

const BASE = {
  nodeName: "n1",
  manager: { url: "http://127.0.0.1:9527", token: "node-token-for-tests-0001" },
  underlayIp: "192.0.2.11",
  stateDir: "/var/lib/knitter/agent",
};

async function load(bgp: unknown, more: Record<string, unknown> = {}) {
  const file = await Deno.makeTempFile({ suffix: ".json" });
  try {
    await Deno.writeTextFile(file, JSON.stringify({ ...BASE, ...more, bgp }));
    return (await loadAgentConfig(["--config", file], () => undefined)).config;
  } finally {
    await Deno.remove(file);
  }
}

async function refused(bgp: unknown, message: RegExp, more: Record<string, unknown> = {}) {
  await assert.rejects(() => load(bgp, more), (err: unknown) => {
    assert.ok(err instanceof DaemonConfigError, String(err));
    assert.match(err.message, message);
    return true;
  });
}

const PEER = { address: "192.0.2.1", asn: 65000 };

Deno.test("bgp config: the next hop and router ID default to the underlay address, BIRD's files to the state directory", async () => {
  const config = await load({ localAsn: 65001, peers: [PEER] });
  assert.equal(config.bgp!.advertiseFrom, "hosting");
  const made = bgpSettings(config);
  assert.ok("settings" in made);
  const speaker = speakerFor(config, made.settings, createLogger("test", "error"));
  assert.deepEqual(speaker.advertised, { v4: [], v6: [] });
  // What BIRD is given.
  const s = speaker.current;
  assert.equal(s.nextHop, "192.0.2.11");
  assert.equal(s.routerId, "192.0.2.11");
  assert.equal(s.nextHop6, undefined);
  const p = (speaker as unknown as { paths: Record<string, string> }).paths;
  assert.equal(p.configFile, "/var/lib/knitter/agent/bird.conf");
  assert.equal(p.controlSocket, "/var/lib/knitter/agent/bird.ctl");
});

Deno.test("bgp config: mistakes are refused, naming the field", async () => {
  await refused({ localAsn: 65001, peers: [] }, /peers.*at least one peer/s);
  await refused({ localAsn: 0, peers: [PEER] }, /localAsn/);
  await refused({ localAsn: 65001, peers: [{ ...PEER, address: "router" }] }, /IP address/);
  await refused({ localAsn: 65001, peers: [{ ...PEER, holdTime: 1 }] }, /holdTime/);
  await refused(
    { localAsn: 65001, peers: [{ ...PEER, password: 'a"b' }] },
    /password.*no "/s,
  );
  await refused({ localAsn: 65001, peers: [PEER], communities: ["65001:70000"] }, /0-65535/);
  await refused({ localAsn: 65001, peers: [PEER], nextHop6: "10.0.0.1" }, /IPv6 address/);
  await refused(
    { localAsn: 65001, peers: [PEER] },
    /no IPv4 next hop.*set bgp\.nextHop/s,
    { underlayIp: "fd99::11" },
  );
  await refused(
    { localAsn: 65001, peers: [PEER, { ...PEER, asn: 65002 }] },
    /each peer address once/,
  );
  // Outside Kubernetes mode the file is the only source of the ASN and the peers.
  await refused({ peers: [PEER] }, /localAsn is missing.*bgp\.knitter\.io\/asn/s);
  await refused({ localAsn: 65001 }, /peers is missing/);
});

Deno.test("bgp config: in Kubernetes mode the ASN and peers may be left to the Node's keys", async () => {
  const config = await load({}, { kubernetes: {} });
  const made = bgpSettings(config);
  assert.ok("settings" in made);
  assert.deepEqual(made.settings.peers, [], "no peers yet: BIRD runs without sessions");
  const asn = bgpSettings(config, { localAsn: 65010 });
  assert.ok("settings" in asn && asn.settings.localAsn === 65010);
  const noAsn = bgpSettings(config, { peers: [PEER] });
  assert.ok("missing" in noAsn && /no ASN.*bgp\.knitter\.io\/asn/.test(noAsn.missing));
});
