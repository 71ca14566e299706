import assert from "node:assert/strict";
import type { AnnotatedNetwork } from "@knitter/common";
import { type HotplugPlan, planHotplug, type PodInterface } from "./hotplug_plan.ts";

const ETH0: PodInterface = { ifName: "eth0", network: "pods" };
const NET1: PodInterface = { ifName: "net1", network: "data" };
const plugged = (ifName: string, network: string, id = ifName, more = {}): PodInterface => ({
  ifName,
  network,
  hotplug: { id, ...more },
});

const CASES: {
  name: string;
  wanted: AnnotatedNetwork[];
  have: PodInterface[];
  plan: Partial<HotplugPlan>;
}[] = [
  {
    name: "nothing changed: nothing to do",
    wanted: [{ network: "data" }],
    have: [ETH0, NET1],
    plan: {},
  },
  {
    name: "an element added without a name gets the next free netN",
    wanted: [{ network: "data" }, { network: "media" }],
    have: [ETH0, NET1],
    plan: { attach: [{ ifName: "net2", network: "media" }] },
  },
  {
    name: "an element added with a name, an address and a MAC gets them",
    wanted: [{ network: "data" }, {
      network: "media",
      ifName: "m0",
      ip: "10.9.0.5",
      mac: "02:00:00:00:00:05",
    }],
    have: [ETH0, NET1],
    plan: {
      attach: [{ ifName: "m0", network: "media", ip: "10.9.0.5", mac: "02:00:00:00:00:05" }],
    },
  },
  {
    name: "removing the first of two elements renames nothing: the hot-plugged one goes",
    wanted: [{ network: "data" }],
    have: [ETH0, plugged("net1", "media"), plugged("net2", "data")],
    plan: { detach: [{ ifName: "net1", id: "net1" }] },
  },
  {
    name: "a new element does not take the name of an interface being removed",
    wanted: [{ network: "voice" }],
    have: [ETH0, plugged("net1", "media")],
    plan: {
      detach: [{ ifName: "net1", id: "net1" }],
      attach: [{ ifName: "net2", network: "voice" }],
    },
  },
  {
    name: "a hot-plugged interface named for another network is made again on it",
    wanted: [{ network: "voice", ifName: "net1" }],
    have: [ETH0, plugged("net1", "media", "x1")],
    plan: {
      detach: [{ ifName: "net1", id: "x1" }],
      attach: [{ ifName: "net1", network: "voice" }],
    },
  },
  {
    name: "a hot-plugged interface asked with another address is made again",
    wanted: [{ network: "media", ip: "10.9.0.7" }],
    have: [ETH0, plugged("net1", "media", "x1", { ip: "10.9.0.6" })],
    plan: {
      detach: [{ ifName: "net1", id: "x1" }],
      attach: [{ ifName: "net2", network: "media", ip: "10.9.0.7" }],
    },
  },
  {
    name: "an interface the pod started with is never removed: refused, said",
    wanted: [],
    have: [ETH0, NET1],
    plan: {
      refused: [
        "net1 (network data) was made when the pod started and stays until the pod is recreated: only hot-plugged interfaces can be removed",
      ],
    },
  },
  {
    name: "an interface the pod started with cannot move to another network: refused, kept",
    wanted: [{ network: "media", ifName: "net1" }],
    have: [ETH0, NET1],
    plan: {
      refused: [
        "net1 is on network data since the pod started; a running pod's own interfaces cannot change: name another interface for media, or recreate the pod",
      ],
    },
  },
  {
    name: "an IP group is refused; a default route is not moved",
    wanted: [{ network: "data" }, { network: "media", ipGroup: "g" }, {
      network: "voice",
      defaultRoute: true,
    }],
    have: [ETH0, NET1],
    plan: {
      attach: [{ ifName: "net2", network: "voice" }],
      refused: [
        'media: an address from IP group g is taken only when the pod starts: recreate the pod, or ask for an address ("ips")',
        "net2 (network voice) is added without the default route: a running pod keeps the one it started with",
      ],
    },
  },
  {
    name: "the primary interface is never touched",
    wanted: [{ network: "data", ifName: "eth0" }],
    have: [ETH0],
    plan: { refused: ["data@eth0: eth0 is the pod's primary interface: name another"] },
  },
];

for (const c of CASES) {
  Deno.test(`planHotplug: ${c.name}`, () => {
    const plan = planHotplug(c.wanted, c.have, "eth0");
    assert.deepEqual(plan, { detach: [], attach: [], refused: [], ...c.plan });
  });
}
