/** The BIRD configuration the agent renders: golden text, and BIRD itself parses it. */
import assert from "node:assert/strict";
import { run } from "@knitter/common";
import { birdConfig, type BirdSettings } from "./bird_config.ts";

const SETTINGS: BirdSettings = {
  localAsn: 65001,
  routerId: "192.0.2.11",
  peers: [
    { address: "192.0.2.1", asn: 65000, holdTime: 3 },
    { address: "192.0.2.2", asn: 65000, password: "s3cret" },
  ],
  communities: ["65001:42", "65535:0"],
  nextHop: "192.0.2.11",
  nextHop6: "fd99::11",
  logFile: "/var/lib/knitter/agent/bird.log",
};
const ROUTES = { v4: ["10.1.0.5/32", "10.1.0.0/24"], v6: ["fd00:1::/64", "fd00:1::5/128"] };
const GOLDEN = new URL("./testdata/node.bird.conf", import.meta.url);

Deno.test("bird config: the golden file (two peers, communities, both families, routes sorted)", async () => {
  assert.equal(birdConfig(SETTINGS, ROUTES) + "\n", await Deno.readTextFile(GOLDEN));
});

Deno.test("bird config: without an IPv6 next hop no IPv6 is advertised; nothing advertised still keeps the sessions", () => {
  const { nextHop6: _, ...v4only } = SETTINGS;
  const text = birdConfig(v4only, ROUTES);
  assert.ok(!text.includes("ipv6") && !text.includes("fd00"), text);
  const empty = birdConfig(SETTINGS, { v4: [], v6: [] });
  assert.ok(empty.includes("protocol bgp peer_192_0_2_2 {"), empty);
  assert.ok(!empty.includes("route "), empty);
});

Deno.test("bird config: BIRD parses what the agent writes (bird -p), and refuses what is broken", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (
      const [name, text] of [
        ["full", birdConfig(SETTINGS, ROUTES)],
        ["empty", birdConfig(SETTINGS, { v4: [], v6: [] })],
      ]
    ) {
      await Deno.writeTextFile(`${dir}/${name}.conf`, text);
      const r = await run(["bird", "-p", "-c", `${dir}/${name}.conf`], { check: false });
      assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    }
    await Deno.writeTextFile(
      `${dir}/bad.conf`,
      birdConfig(SETTINGS, { v4: ["10.1.0.0/33"], v6: [] }),
    );
    const bad = await run(["bird", "-p", "-c", `${dir}/bad.conf`], { check: false });
    assert.notEqual(bad.code, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
