/**
 * Small node models with golden flow sets (`<name>.flows` next to this file), shared by
 * flows_test.ts (golden comparison) and flows_ovs_test.ts (loaded into a real Open vSwitch).
 * `sample_node` is also the SAMPLE FLOW DUMP of ../../agent/PIPELINE.md.
 *
 * Ofports: local ports 1..99, tunnel 100, physnet patch port 200 (as the OVS test creates them).
 *
 * @module
 */
import type { FlowAclRule } from "../acl_input.ts";
import type { FlowInput } from "../flow_input.ts";
import type { FlowServicePort } from "../service_input.ts";

/** A group's rules: TCP 80-81 and ping from its members (two local ports, one remote), all out. */
const GROUP_WEB: FlowAclRule[] = [
  {
    direction: "ingress",
    protocol: "tcp",
    portMin: 80,
    portMax: 81,
    remote: ["10.0.0.2", "10.0.0.3", "10.0.0.5"],
  },
  { direction: "ingress", protocol: "icmp", remote: ["10.0.0.2", "10.0.0.3", "10.0.0.5"] },
  { direction: "egress", protocol: "any" },
];

/** Three pods of network 1 on the node, 10.0.0.2-4 at ofports 1-3. */
const THREE_PODS: FlowInput["localPorts"] = [1, 2, 3].map((i) => ({
  ofport: i,
  network: 1,
  mac: `02:00:0a:00:00:0${i + 1}`,
  ips: [`10.0.0.${i + 1}`],
  cookie: i,
}));

export const scenarios: Record<string, FlowInput> = {
  /** One vxlan network, three pods on one node, nobody elsewhere. */
  vxlan_one_node: {
    tunnelPort: 100,
    networks: [{ id: 1, type: "vxlan", segmentId: 5001 }],
    localPorts: THREE_PODS,
    remotePorts: [],
  },

  /** Two vxlan networks (overlapping subnets), remote ports on two other nodes. */
  two_networks_remote: {
    tunnelPort: 100,
    networks: [
      { id: 1, type: "vxlan", segmentId: 5001 },
      { id: 2, type: "vxlan", segmentId: 0xabcdef },
    ],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 1 },
      { ofport: 2, network: 2, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 2 },
      { ofport: 3, network: 2, mac: "02:00:0a:00:00:05", ips: ["10.0.0.5"], cookie: 7 },
    ],
    remotePorts: [
      { network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], nodeIp: "192.168.0.12" },
      { network: 1, mac: "02:00:0a:00:00:04", ips: ["10.0.0.4"], nodeIp: "192.168.0.13" },
      { network: 1, mac: "02:00:0a:00:00:06", ips: ["10.0.0.6"], nodeIp: "192.168.0.12" },
      { network: 2, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], nodeIp: "192.168.0.13" },
    ],
  },

  /** A vlan and a flat network on one physnet patch port, with remote ports behind it. */
  physnet_vlan_flat: {
    tunnelPort: 100,
    networks: [
      { id: 3, type: "vlan", segmentId: 100, physnetPort: 200 },
      { id: 4, type: "flat", physnetPort: 200 },
    ],
    localPorts: [
      { ofport: 5, network: 3, mac: "02:00:ac:10:00:05", ips: ["172.16.0.5"], cookie: 11 },
      { ofport: 6, network: 3, mac: "02:00:ac:10:00:06", ips: ["172.16.0.6"], cookie: 12 },
      { ofport: 7, network: 4, mac: "02:00:c0:a8:64:07", ips: ["192.168.100.7"], cookie: 13 },
    ],
    remotePorts: [
      { network: 3, mac: "02:00:ac:10:00:09", ips: ["172.16.0.9"], nodeIp: "10.10.0.2" },
      { network: 4, mac: "02:00:c0:a8:64:09", ips: ["192.168.100.9"], nodeIp: "10.10.0.2" },
    ],
  },

  /** Dual-stack and IPv6-only ports; addresses in non-canonical spellings. */
  ipv6: {
    tunnelPort: 100,
    networks: [{ id: 9, type: "vxlan", segmentId: 77 }],
    localPorts: [
      {
        ofport: 1,
        network: 9,
        mac: "02:00:00:00:09:01",
        ips: ["10.9.0.1", "FD00:0:0:0:0:0:0:1"],
        cookie: 0x80000000,
      },
      {
        ofport: 2,
        network: 9,
        mac: "02:00:00:00:09:02",
        ips: ["2001:db8:0:0:1:0:0:2", "fe80::2"],
        cookie: 42,
      },
    ],
    remotePorts: [
      { network: 9, mac: "02:00:00:00:09:03", ips: ["10.9.0.3", "fd00::3"], nodeIp: "10.0.0.3" },
    ],
  },

  /** The small node of ../../agent/PIPELINE.md. */
  sample_node: {
    tunnelPort: 100,
    networks: [
      {
        id: 1,
        type: "vxlan",
        segmentId: 1001,
        gateway: "10.0.0.1",
        gatewayMac: "0a:58:00:00:00:01",
      },
      { id: 2, type: "vlan", segmentId: 100, physnetPort: 200 },
    ],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 1 },
      { ofport: 2, network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], cookie: 2 },
      { ofport: 3, network: 2, mac: "02:00:ac:10:00:02", ips: ["172.16.0.2"], cookie: 3 },
    ],
    remotePorts: [
      { network: 1, mac: "02:00:0a:00:00:04", ips: ["10.0.0.4"], nodeIp: "192.168.0.12" },
    ],
  },

  /**
   * The distributed gateway on every network type: two tenants' vxlan networks with the same CIDR
   * and gateway address (each answered with its own gateway MAC), a vlan and a flat network.
   */
  gateways: {
    tunnelPort: 100,
    networks: [
      {
        id: 1,
        type: "vxlan",
        segmentId: 5001,
        gateway: "10.1.0.1",
        gatewayMac: "0a:58:0a:01:00:01",
      },
      {
        id: 2,
        type: "vxlan",
        segmentId: 5002,
        gateway: "10.1.0.1",
        gatewayMac: "0A:58:0A:01:00:02",
      },
      {
        id: 3,
        type: "vlan",
        segmentId: 300,
        physnetPort: 200,
        gateway: "10.3.0.254",
        gatewayMac: "0a:58:0a:03:00:fe",
      },
      {
        id: 4,
        type: "flat",
        physnetPort: 201,
        gateway: "10.4.0.1",
        gatewayMac: "0a:58:0a:04:00:01",
      },
      {
        id: 5,
        type: "vxlan",
        segmentId: 5005,
        gateway: "FD00:5:0::1",
        gatewayMac: "0a:58:fd:05:00:01",
      },
    ],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2"], cookie: 1 },
      { ofport: 2, network: 2, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2"], cookie: 2 },
      { ofport: 3, network: 3, mac: "02:00:0a:03:00:02", ips: ["10.3.0.2"], cookie: 3 },
      { ofport: 4, network: 4, mac: "02:00:0a:04:00:02", ips: ["10.4.0.2"], cookie: 4 },
      { ofport: 5, network: 5, mac: "02:00:fd:05:00:02", ips: ["fd00:5::2"], cookie: 5 },
    ],
    remotePorts: [
      { network: 1, mac: "02:00:0a:01:00:03", ips: ["10.1.0.3"], nodeIp: "192.168.0.12" },
    ],
  },

  /**
   * Dual stack: a network with an IPv4 and an IPv6 gateway (one gateway MAC), its ports with an
   * address of each family, here and on another node; both gateways answered, both addresses vetted.
   */
  /**
   * An IPv6 network whose gateway sends router advertisements (PIPELINE.md, "Router
   * advertisements"): solicitations punted, the pods' own advertisements dropped, the gateway's
   * link-local address answered.
   */
  router_adverts: {
    tunnelPort: 100,
    networks: [
      {
        id: 3,
        type: "vxlan",
        segmentId: 5008,
        gateway: "fd00:8::1",
        gatewayMac: "0a:58:12:34:56:00",
        routerAdvertisements: true,
      },
    ],
    localPorts: [
      {
        ofport: 1,
        network: 3,
        mac: "02:00:0a:08:00:02",
        ips: ["fd00:8::2", "fd00:8::ff:fe08:2"],
        cookie: 1,
      },
    ],
    remotePorts: [],
  },

  dual_stack: {
    tunnelPort: 100,
    networks: [
      {
        id: 1,
        type: "vxlan",
        segmentId: 5006,
        gateway: "10.6.0.1",
        gatewayMac: "0a:58:0a:06:00:01",
        gateway6: "FD00:6::1",
      },
    ],
    localPorts: [
      {
        ofport: 1,
        network: 1,
        mac: "02:00:0a:06:00:02",
        ips: ["10.6.0.2", "fd00:6::2"],
        cookie: 1,
      },
    ],
    remotePorts: [
      {
        network: 1,
        mac: "02:00:0a:06:00:03",
        ips: ["10.6.0.3", "fd00:6::3"],
        nodeIp: "192.168.0.12",
      },
    ],
  },

  /**
   * Conflicting and malformed remote entries (wasm/flow_conflicts.ts isolates them first): only
   * the remote ports 10.0.0.7 (network 1) and 10.0.0.3 (network 2) get flows.
   */
  /**
   * A router connects red (vxlan, a local and a remote port) and blue (vlan, a local port) and has a
   * static route to 10.9.0.0/16 through blue's local port 10.2.0.9 (a CNF), and one through an
   * address no port has yet (it waits); green (not connected) stays as it is.
   */
  routing: {
    tunnelPort: 100,
    networks: [
      {
        id: 1,
        type: "vxlan",
        segmentId: 5001,
        gateway: "10.1.0.1",
        gatewayMac: "0a:58:0a:01:00:01",
      },
      {
        id: 2,
        type: "vlan",
        segmentId: 300,
        physnetPort: 200,
        gateway: "10.2.0.1",
        gatewayMac: "0a:58:0a:02:00:01",
      },
      {
        id: 3,
        type: "vxlan",
        segmentId: 5003,
        gateway: "10.3.0.1",
        gatewayMac: "0a:58:0a:03:00:01",
      },
    ],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2"], cookie: 1 },
      { ofport: 2, network: 2, mac: "02:00:0a:02:00:09", ips: ["10.2.0.9"], cookie: 2 },
      { ofport: 3, network: 3, mac: "02:00:0a:03:00:02", ips: ["10.3.0.2"], cookie: 3 },
    ],
    remotePorts: [
      { network: 1, mac: "02:00:0a:01:00:03", ips: ["10.1.0.3"], nodeIp: "192.168.0.12" },
    ],
    routes: [
      // net-2's MTU is smaller: what is larger goes to the slow path.
      { from: 1, to: 2, dst: "10.2.0.0/24", mtu: 1400 },
      { from: 2, to: 1, dst: "10.1.0.0/24" },
      { from: 1, to: 2, dst: "10.9.0.0/16", via: "10.2.0.9" },
      { from: 2, to: 2, dst: "10.9.0.0/16", via: "10.2.0.9" },
      { from: 1, to: 2, dst: "0.0.0.0/0", via: "10.2.0.77" },
    ],
  },
  conflicts: {
    tunnelPort: 100,
    networks: [
      { id: 1, type: "vxlan", segmentId: 5001 },
      { id: 2, type: "vxlan", segmentId: 5002 },
    ],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 1 },
      { ofport: 2, network: 2, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 2 },
    ],
    remotePorts: [
      // The local port's address (a lost DEL elsewhere): the local port wins.
      { network: 1, mac: "02:00:0a:00:00:aa", ips: ["10.0.0.2"], nodeIp: "192.168.0.12" },
      // One MAC on two nodes: both out.
      { network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], nodeIp: "192.168.0.12" },
      { network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.4"], nodeIp: "192.168.0.13" },
      // One address on two nodes: both out.
      { network: 1, mac: "02:00:0a:00:00:05", ips: ["10.0.0.5"], nodeIp: "192.168.0.12" },
      { network: 1, mac: "02:00:0a:00:00:06", ips: ["10.0.0.5"], nodeIp: "192.168.0.13" },
      // Malformed.
      { network: 1, mac: "01:00:5e:00:00:01", ips: ["10.0.0.8"], nodeIp: "192.168.0.12" },
      { network: 1, mac: "02:00:0a:00:00:09", ips: ["10.0.0.9"], nodeIp: "224.0.0.1" },
      // Fine: network 1, and the same MAC and address in network 2 (another network).
      { network: 1, mac: "02:00:0a:00:00:07", ips: ["10.0.0.7"], nodeIp: "192.168.0.13" },
      { network: 2, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], nodeIp: "192.168.0.12" },
    ],
  },

  /**
   * Security groups (assembly/acl.ts): pod 1 (dual stack) may be reached on TCP 80 from 10.0.0.0/24
   * and on UDP 5000-5010 from fd00::3, and opens anything to 10.0.0.3 and ICMPv6 anywhere; pod 2
   * (IPv4) opens TCP 443 anywhere and takes nothing in; pod 3 has no groups and keeps its flows.
   */
  security_groups: {
    tunnelPort: 100,
    networks: [{ id: 1, type: "vxlan", segmentId: 5001 }],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2", "fd00::2"], cookie: 1 },
      { ofport: 2, network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], cookie: 2 },
      { ofport: 3, network: 1, mac: "02:00:0a:00:00:04", ips: ["10.0.0.4"], cookie: 3 },
    ],
    remotePorts: [
      { network: 1, mac: "02:00:0a:00:00:05", ips: ["10.0.0.5"], nodeIp: "192.168.0.12" },
    ],
    acls: [
      {
        cookie: 1,
        rules: [
          {
            direction: "ingress",
            protocol: "tcp",
            portMin: 80,
            portMax: 80,
            remote: ["10.0.0.0/24"],
          },
          {
            direction: "ingress",
            protocol: "udp",
            portMin: 5000,
            portMax: 5010,
            remote: ["fd00::3"],
          },
          { direction: "egress", protocol: "any", remote: ["10.0.0.3"] },
          { direction: "egress", protocol: "icmpv6" },
        ],
      },
      { cookie: 2, rules: [{ direction: "egress", protocol: "tcp", portMin: 443, portMax: 443 }] },
    ],
  },
  // Security group rules as conjunctive matches: ports 1 and 2 in a group whose members (1, 2 and
  // the remote 10.0.0.5) may reach TCP 80-81 and ping: each peer is one flow for every rule that
  // names it, each block of ports one. Port 3 allows all TCP in (a plain flow of its port's match,
  // which leaves out its SSH-from-the-group conjunction) and DNS from 10.0.0.6 (port × blocks).
  security_groups_conjunctions: {
    tunnelPort: 100,
    networks: [{ id: 1, type: "vxlan", segmentId: 5001 }],
    localPorts: THREE_PODS,
    remotePorts: [
      { network: 1, mac: "02:00:0a:00:00:05", ips: ["10.0.0.5"], nodeIp: "192.168.0.12" },
      { network: 1, mac: "02:00:0a:00:00:06", ips: ["10.0.0.6"], nodeIp: "192.168.0.12" },
    ],
    acls: [
      { cookie: 1, rules: GROUP_WEB },
      { cookie: 2, rules: GROUP_WEB },
      {
        cookie: 3,
        rules: [
          { direction: "ingress", protocol: "tcp" },
          {
            direction: "ingress",
            protocol: "tcp",
            portMin: 22,
            portMax: 22,
            remote: ["10.0.0.2", "10.0.0.5"],
          },
          {
            direction: "ingress",
            protocol: "udp",
            portMin: 53,
            portMax: 54,
            remote: ["10.0.0.6"],
          },
          { direction: "egress", protocol: "any" },
        ],
      },
    ],
  },
  // Security groups on routed traffic: red (3) and blue (2) joined by routes share conntrack zone
  // 2; green (1) on no route keeps its own. Egress flows match the port alone (reg1), and blue,
  // without a port with groups here, gets the commit flow of a connection routed into it.
  routed_security_groups: {
    tunnelPort: 100,
    networks: [1, 2, 3].map((id) => ({
      id,
      type: "vxlan" as const,
      segmentId: 5000 + id,
      gateway: `10.${id}.0.1`,
      gatewayMac: `0a:58:0a:0${id}:00:01`,
    })),
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2"], cookie: 1 },
      { ofport: 2, network: 3, mac: "02:00:0a:03:00:02", ips: ["10.3.0.2"], cookie: 2 },
      { ofport: 3, network: 2, mac: "02:00:0a:02:00:02", ips: ["10.2.0.2"], cookie: 3 },
    ],
    remotePorts: [
      { network: 2, mac: "02:00:0a:02:00:03", ips: ["10.2.0.3"], nodeIp: "192.168.0.12" },
    ],
    routes: [
      { from: 3, to: 2, dst: "10.2.0.0/24" },
      { from: 2, to: 3, dst: "10.3.0.0/24" },
    ],
    acls: [
      { cookie: 1, rules: [{ direction: "ingress", protocol: "tcp", remote: ["10.1.0.0/24"] }] },
      {
        cookie: 2,
        rules: [{ direction: "egress", protocol: "tcp", remote: ["10.2.0.0/24"] }],
      },
    ],
  },
  /**
   * Host ports (the node's interface on a network: egress, the node reaching its pods): red (1,
   * vxlan) has host port 50, is routed to blue (2, vlan, no host port) and has a pod with security
   * groups (so IPv4 from the node is committed past its ingress rules); green (3, flat) has host
   * port 51 and no route: IPv4 to its gateway MAC goes to the node through ROUTE's catch-all.
   */
  host_ports: {
    tunnelPort: 100,
    networks: [
      {
        id: 1,
        type: "vxlan",
        segmentId: 5001,
        gateway: "10.1.0.1",
        gatewayMac: "0a:58:0a:01:00:01",
        hostPort: 50,
      },
      {
        id: 2,
        type: "vlan",
        segmentId: 300,
        physnetPort: 200,
        gateway: "10.2.0.1",
        gatewayMac: "0a:58:0a:02:00:01",
      },
      {
        id: 3,
        type: "flat",
        physnetPort: 201,
        gateway: "10.3.0.1",
        gatewayMac: "0a:58:0a:03:00:01",
        hostPort: 51,
      },
    ],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2"], cookie: 1 },
      { ofport: 2, network: 2, mac: "02:00:0a:02:00:02", ips: ["10.2.0.2"], cookie: 2 },
      { ofport: 3, network: 3, mac: "02:00:0a:03:00:02", ips: ["10.3.0.2"], cookie: 3 },
    ],
    remotePorts: [
      { network: 1, mac: "02:00:0a:01:00:03", ips: ["10.1.0.3"], nodeIp: "192.168.0.12" },
    ],
    routes: [
      { from: 1, to: 2, dst: "10.2.0.0/24" },
      { from: 2, to: 1, dst: "10.1.0.0/24" },
    ],
    acls: [
      { cookie: 1, rules: [{ direction: "ingress", protocol: "tcp", portMin: 80, portMax: 80 }] },
    ],
  },

  /**
   * A live migration's target node: the claim's port here (ofport 2) is inactive, its active port
   * (same MAC and address) is on node 192.168.0.12; a pod here reaches the guest there.
   */
  migration_target: {
    tunnelPort: 100,
    networks: [{ id: 1, type: "vxlan", segmentId: 5001 }],
    localPorts: [
      { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 1 },
    ],
    remotePorts: [
      { network: 1, mac: "02:00:0a:00:00:09", ips: ["10.0.0.9"], nodeIp: "192.168.0.12" },
    ],
    inactivePorts: [{ ofport: 2, network: 1, mac: "02:00:0A:00:00:09", cookie: 2 }],
  },
};

/**
 * DSCP marking: the routing model with red (vxlan) marked EF (46) and its port dual-stack, blue
 * (vlan, with the CNF that is the next hop of the static routes) marked AF31 (26), green (vxlan)
 * unmarked. Only the SPOOF flows that let IPv4 and IPv6 through (DAD too) carry the marking; ARP
 * does not.
 */
scenarios.dscp = (() => {
  const model = structuredClone(scenarios.routing);
  model.networks[0].dscp = 46;
  model.networks[1].dscp = 26;
  model.localPorts[0].ips.push("fd00:1::2");
  return model;
})();

/**
 * Flow records (flow_sampling.ts): the security groups model sampled 1 in 10 (probability 6553)
 * to collector set 1. Each local port's CLASSIFY flow samples what it sends (point 1), the two
 * ACL defaults sample what they drop (point 2), all in observation domain 0; nothing else changes.
 */
scenarios.flow_records = {
  ...structuredClone(scenarios.security_groups),
  sampling: { probability: 6553, collectorSetId: 1 },
};

/**
 * Services (../../agent/PIPELINE.md, "Services"): on vxlan network 1, "web" (TCP 80 → 8080 and UDP
 * 53) over a local backend, a remote one and an address no port has (no bucket); "sticky" (TCP 443,
 * ClientIP affinity) over the remote one; "idle" without backends (its port drops). On vlan network
 * 2, "db" (TCP 5432) over a local backend, its client on the same node.
 */
scenarios.services = {
  tunnelPort: 100,
  networks: [
    { id: 1, type: "vxlan", segmentId: 5001 },
    { id: 2, type: "vlan", segmentId: 100, physnetPort: 200 },
  ],
  localPorts: [
    { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2"], cookie: 1 },
    { ofport: 2, network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3"], cookie: 2 },
    { ofport: 3, network: 2, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2"], cookie: 3 },
    { ofport: 4, network: 2, mac: "02:00:0a:01:00:03", ips: ["10.1.0.3"], cookie: 4 },
  ],
  remotePorts: [
    { network: 1, mac: "02:00:0a:00:00:04", ips: ["10.0.0.4"], nodeIp: "192.168.0.12" },
  ],
  services: [
    {
      id: 1,
      network: 1,
      vip: "10.0.0.100",
      mac: "0a:58:0a:00:00:64",
      ports: [
        { protocol: "tcp", port: 80, targetPort: 8080 },
        { protocol: "udp", port: 53, targetPort: 53 },
      ],
      backends: ["10.0.0.3", "10.0.0.4", "10.0.0.9"],
    },
    {
      id: 2,
      network: 1,
      vip: "10.0.0.101",
      mac: "0a:58:0a:00:00:65",
      ports: [{ protocol: "tcp", port: 443, targetPort: 443 }],
      backends: ["10.0.0.4"],
      affinity: true,
    },
    {
      id: 3,
      network: 1,
      vip: "10.0.0.102",
      mac: "0a:58:0a:00:00:66",
      ports: [{ protocol: "tcp", port: 80, targetPort: 80 }],
      backends: [],
    },
    {
      id: 4,
      network: 2,
      vip: "10.1.0.100",
      mac: "0a:58:0a:01:00:64",
      ports: [{ protocol: "tcp", port: 5432, targetPort: 5432 }],
      backends: ["10.1.0.3"],
    },
  ],
};

/**
 * Filtered mirrors (../../agent/PIPELINE.md, "Filtered mirrors"): of the three pods of
 * vxlan_one_node, what pod 1 (ofport 1) sends over TCP to port 5001 is copied to the collector
 * pod (ofport 3), and what pod 2 sends over UDP to ports 5000-5003 of 10.0.0.0/24 and its ICMP
 * to any address to a mirror tunnel port (ofport 900). The rest of their traffic is not copied.
 */
scenarios.mirror_filters = {
  ...structuredClone(scenarios.vxlan_one_node),
  mirrorFilters: [
    { source: 1, output: 3, protocol: "tcp", portMin: 5001, portMax: 5001 },
    {
      source: 2,
      output: 900,
      protocol: "udp",
      portMin: 5000,
      portMax: 5003,
      remote: "10.0.0.0/24",
    },
    { source: 2, output: 900, protocol: "icmp" },
  ],
};

/**
 * A service behind a router (../../agent/PIPELINE.md, "Services"): a router connects red (vxlan 1,
 * the client 10.1.0.2 on this node) and blue (vxlan 2, the service "api" on 10.2.0.100, TCP 80 →
 * 8080, over a local backend 10.2.0.3 and a remote one 10.2.0.4); green (vxlan 3, a local pod) is
 * on no router.
 */
scenarios.services_routed = {
  tunnelPort: 100,
  networks: [
    { id: 1, type: "vxlan", segmentId: 5001, gateway: "10.1.0.1", gatewayMac: "0a:58:0a:01:00:01" },
    { id: 2, type: "vxlan", segmentId: 5002, gateway: "10.2.0.1", gatewayMac: "0a:58:0a:02:00:01" },
    { id: 3, type: "vxlan", segmentId: 5003, gateway: "10.3.0.1", gatewayMac: "0a:58:0a:03:00:01" },
  ],
  localPorts: [
    { ofport: 1, network: 1, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2"], cookie: 1 },
    { ofport: 2, network: 2, mac: "02:00:0a:02:00:03", ips: ["10.2.0.3"], cookie: 2 },
    { ofport: 3, network: 3, mac: "02:00:0a:03:00:02", ips: ["10.3.0.2"], cookie: 3 },
  ],
  remotePorts: [
    { network: 2, mac: "02:00:0a:02:00:04", ips: ["10.2.0.4"], nodeIp: "192.168.0.12" },
  ],
  routes: [
    { from: 1, to: 2, dst: "10.2.0.0/24" },
    { from: 2, to: 1, dst: "10.1.0.0/24" },
  ],
  services: [
    {
      id: 1,
      network: 2,
      vip: "10.2.0.100",
      mac: "0a:58:0a:02:00:64",
      ports: [{ protocol: "tcp", port: 80, targetPort: 8080 }],
      backends: ["10.2.0.3", "10.2.0.4"],
    },
  ],
};

/**
 * IPv6 routing (../../agent/PIPELINE.md, "Routing"): a router connects red (vxlan 1, dual stack: a
 * local and a remote port with an address of each family) and blue (vlan 2, IPv6 only, a local
 * CNF fd00:2::9), with static IPv6 routes through the CNF (a /48, a /128) and one through an
 * address no port has yet (it waits); green (vxlan 3, dual stack) is on no router. Red's IPv4 has
 * no other network to go to: only IPv6 is routed.
 */
scenarios.routing6 = {
  tunnelPort: 100,
  networks: [
    {
      id: 1,
      type: "vxlan",
      segmentId: 5001,
      gateway: "10.1.0.1",
      gatewayMac: "0a:58:0a:01:00:01",
      gateway6: "fd00:1::1",
    },
    {
      id: 2,
      type: "vlan",
      segmentId: 300,
      physnetPort: 200,
      gateway: "fd00:2::1",
      gatewayMac: "0a:58:0a:02:00:01",
    },
    {
      id: 3,
      type: "vxlan",
      segmentId: 5003,
      gateway: "10.3.0.1",
      gatewayMac: "0a:58:0a:03:00:01",
      gateway6: "fd00:3::1",
    },
  ],
  localPorts: [
    { ofport: 1, network: 1, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2", "fd00:1::2"], cookie: 1 },
    { ofport: 2, network: 2, mac: "02:00:0a:02:00:09", ips: ["fd00:2::9"], cookie: 2 },
    { ofport: 3, network: 3, mac: "02:00:0a:03:00:02", ips: ["10.3.0.2", "fd00:3::2"], cookie: 3 },
  ],
  remotePorts: [
    {
      network: 1,
      mac: "02:00:0a:01:00:03",
      ips: ["10.1.0.3", "fd00:1::3"],
      nodeIp: "192.168.0.12",
    },
  ],
  routes: [
    { from: 1, to: 2, dst: "fd00:2::/64", mtu: 1400 },
    { from: 2, to: 1, dst: "fd00:1::/64" },
    { from: 1, to: 2, dst: "fd00:9::/48", via: "fd00:2::9" },
    { from: 2, to: 2, dst: "fd00:9::/48", via: "fd00:2::9" },
    { from: 1, to: 2, dst: "fd00:9:1::5/128", via: "fd00:2::9" },
    { from: 1, to: 2, dst: "::/0", via: "fd00:2::77" },
  ],
};

/**
 * Host ports and IPv6 (../../agent/PIPELINE.md, "Host port"): red (1, vxlan, IPv4 and IPv6
 * gateways) has host port 50 and a pod with security groups (IPv4 and IPv6 from the node are
 * committed past its ingress rules); the host port carries IPv6 (neighbour discovery, egress) as it
 * does IPv4. blue (2, vlan, IPv6 only) has host port 51: IPv6 alone, no ARP or IPv4 from it.
 */
scenarios.host_ports6 = {
  tunnelPort: 100,
  networks: [
    {
      id: 1,
      type: "vxlan",
      segmentId: 5001,
      gateway: "10.1.0.1",
      gatewayMac: "0a:58:0a:01:00:01",
      gateway6: "fd00:1::1",
      hostPort: 50,
    },
    {
      id: 2,
      type: "vlan",
      segmentId: 300,
      physnetPort: 200,
      gateway: "fd00:2::1",
      gatewayMac: "0a:58:0a:02:00:01",
      hostPort: 51,
    },
  ],
  localPorts: [
    { ofport: 1, network: 1, mac: "02:00:0a:01:00:02", ips: ["10.1.0.2", "fd00:1::2"], cookie: 1 },
    { ofport: 2, network: 2, mac: "02:00:0a:02:00:02", ips: ["fd00:2::2"], cookie: 2 },
  ],
  remotePorts: [
    {
      network: 1,
      mac: "02:00:0a:01:00:03",
      ips: ["10.1.0.3", "fd00:1::3"],
      nodeIp: "192.168.0.12",
    },
  ],
  acls: [
    { cookie: 1, rules: [{ direction: "ingress", protocol: "tcp", portMin: 80, portMax: 80 }] },
  ],
};

/**
 * Services on IPv6 (../../agent/PIPELINE.md, "Services"): a dual-stack service on dual-stack vxlan
 * network 1 is two services of the model, one per family: "web" on 10.0.0.100 and fd00::100 (TCP 80
 * → 8080, UDP 53) over a local backend and a remote one; "pin" on fd00::101 (TCP 443, ClientIP
 * affinity) over the remote one. On IPv6-only vxlan network 2, without a gateway, "six" on
 * fd00:2::100 (TCP 80) over a local backend.
 */
const webPorts: FlowServicePort[] = [
  { protocol: "tcp", port: 80, targetPort: 8080 },
  { protocol: "udp", port: 53, targetPort: 53 },
];
scenarios.services6 = {
  tunnelPort: 100,
  networks: [
    {
      id: 1,
      type: "vxlan",
      segmentId: 5001,
      gateway: "10.0.0.1",
      gatewayMac: "0a:58:0a:00:00:01",
      gateway6: "fd00::1",
    },
    { id: 2, type: "vxlan", segmentId: 5002 },
  ],
  localPorts: [
    { ofport: 1, network: 1, mac: "02:00:0a:00:00:02", ips: ["10.0.0.2", "fd00::2"], cookie: 1 },
    { ofport: 2, network: 1, mac: "02:00:0a:00:00:03", ips: ["10.0.0.3", "fd00::3"], cookie: 2 },
    { ofport: 3, network: 2, mac: "02:00:0a:02:00:02", ips: ["fd00:2::2"], cookie: 3 },
    { ofport: 4, network: 2, mac: "02:00:0a:02:00:03", ips: ["fd00:2::3"], cookie: 4 },
  ],
  remotePorts: [
    {
      network: 1,
      mac: "02:00:0a:00:00:04",
      ips: ["10.0.0.4", "fd00::4"],
      nodeIp: "192.168.0.12",
    },
  ],
  services: [
    {
      id: 1,
      network: 1,
      vip: "10.0.0.100",
      mac: "0a:58:0a:00:00:64",
      ports: structuredClone(webPorts),
      backends: ["10.0.0.3", "10.0.0.4"],
    },
    {
      id: 2,
      network: 1,
      vip: "fd00::100",
      mac: "0a:58:0a:00:00:64",
      ports: structuredClone(webPorts),
      backends: ["fd00::3", "fd00::4"],
    },
    {
      id: 3,
      network: 1,
      vip: "fd00::101",
      mac: "0a:58:0a:00:00:65",
      ports: [{ protocol: "tcp", port: 443, targetPort: 443 }],
      backends: ["fd00::4"],
      affinity: true,
    },
    {
      id: 4,
      network: 2,
      vip: "fd00:2::100",
      mac: "0a:58:0a:02:00:64",
      ports: [{ protocol: "tcp", port: 80, targetPort: 80 }],
      backends: ["fd00:2::3"],
    },
  ],
};

/**
 * IPv6 VIPs behind a router (../../agent/PIPELINE.md, "Services"): services6 with network 2's IPv6
 * gateway and a router joining its IPv6 subnet and network 1's: the client on network 1 reaches
 * "six" (fd00:2::100) through the router, and network 2's pods reach "web"'s IPv6 VIP.
 */
scenarios.services6_routed = {
  ...structuredClone(scenarios.services6),
  networks: [
    structuredClone(scenarios.services6.networks[0]),
    {
      id: 2,
      type: "vxlan",
      segmentId: 5002,
      gateway: "fd00:2::1",
      gatewayMac: "0a:58:0a:02:00:01",
    },
  ],
  routes: [
    { from: 1, to: 2, dst: "fd00:2::/64" },
    { from: 2, to: 1, dst: "fd00::/64" },
  ],
};
