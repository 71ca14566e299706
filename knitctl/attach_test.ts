import assert from "node:assert/strict";
import { parseCommandLine } from "./args.ts";
import { attachRequest } from "./attach.ts";

const line = (args: string[]) => parseCommandLine(["attach", ...args]);

Deno.test("attachRequest: a network interface with routes via a gateway and via the interface", () => {
  assert.deepEqual(
    attachRequest(
      line([
        ...["--pod", "acme/web-1", "--ifname", "eth1", "--network", "blue", "--ip", "10.1.0.9"],
        ...["--route-gw", "10.9.0.0/16,10.1.0.254", "--route-intf", "10.8.0.0/24", "--mtu", "1400"],
      ]),
      "acme",
    ),
    {
      pod: "acme/web-1",
      ifName: "eth1",
      network: "blue",
      tenant: "acme",
      ip: "10.1.0.9",
      mtu: 1400,
      routes: [{ dst: "10.9.0.0/16", via: "10.1.0.254" }, { dst: "10.8.0.0/24" }],
    },
  );
});

Deno.test("attachRequest: a bridge interface with a VLAN tag; the tenant is not sent", () => {
  assert.deepEqual(
    attachRequest(
      line([
        ...["--pid", "42", "--ifname", "d0", "--bridge", "br-data", "--vlan", "120"],
        ...["--ip", "192.168.5.2/24", "--mac", "02:AA:00:00:00:01"],
      ]),
      "default",
    ),
    {
      pid: 42,
      ifName: "d0",
      bridge: "br-data",
      vlan: 120,
      ip: "192.168.5.2/24",
      mac: "02:aa:00:00:00:01",
    },
  );
});

Deno.test("attachRequest: what cannot go together is a usage error that says so", () => {
  const cases: [string[], RegExp][] = [
    [["--netns", "x", "--ifname", "e"], /exactly one of --network NAME .* or --bridge BR/],
    [["--netns", "x", "--ifname", "e", "--network", "n", "--bridge", "b"], /exactly one of/],
    [["--netns", "x", "--pid", "1", "--ifname", "e", "--network", "n"], /exactly one of --netns/],
    [["--ifname", "e", "--network", "n"], /exactly one of --netns/],
    [["--netns", "x", "--network", "n"], /--ifname/],
    [
      ["--netns", "x", "--ifname", "e", "--network", "n", "--vlan", "5"],
      /--vlan goes with --bridge/,
    ],
    [
      ["--netns", "x", "--ifname", "e", "--bridge", "b", "--ip", "10.0.0.1"],
      /needs a prefix length/,
    ],
    [["--netns", "x", "--ifname", "e", "--bridge", "b", "--vlan", "5000"], /from 1 to 4094/],
    [["--pod", "web-1", "--ifname", "e", "--network", "n"], /NAMESPACE\/NAME/],
    [["--netns", "x", "--ifname", "e", "--network", "n", "--route-gw", "10.0.0.0/8"], /CIDR,GW/],
  ];
  for (const [args, message] of cases) {
    assert.throws(() => attachRequest(line(args), "t"), message, args.join(" "));
  }
});
