import assert from "node:assert/strict";
import {
  directionsOf,
  type NetRef,
  parsePolicyFor,
  type PodView,
  selectedPods,
  translate,
  type World,
} from "./mnp_translate.ts";
import type { MultiNetworkPolicy, MultiNetworkPolicySpec } from "./mnp_types.ts";

const DATA: NetRef = { tenant: "acme", name: "data" };

/** acme and globex; pods with an address on data (and on "other", which no policy names). */
function world(): World {
  const pods: PodView[] = [
    { namespace: "acme", name: "web", uid: "u-web", labels: { app: "web" } },
    { namespace: "acme", name: "c1", uid: "u-c1", labels: { role: "client" } },
    { namespace: "acme", name: "c2", uid: "u-c2", labels: { role: "client" } },
    { namespace: "acme", name: "plain", uid: "u-plain", labels: {} },
    { namespace: "globex", name: "g1", uid: "u-g1", labels: { role: "client" } },
  ];
  const addresses: Record<string, string[]> = {
    "u-web": ["10.0.0.10"],
    "u-c1": ["10.0.0.4"],
    "u-c2": ["10.0.0.5", "fd00::5"],
    "u-plain": ["10.0.0.7"],
    "u-g1": ["10.0.0.20"],
  };
  return {
    namespaces: new Map([["acme", { team: "a" }], ["globex", { team: "g" }]]),
    pods,
    addresses: (uid, net) => (net.name === "data" ? addresses[uid] ?? [] : ["192.0.2.1"]),
  };
}

function policy(spec: Partial<MultiNetworkPolicySpec>): MultiNetworkPolicy {
  return {
    metadata: { name: "p", namespace: "acme", uid: "u-p" },
    spec: { podSelector: { matchLabels: { app: "web" } }, ...spec },
  };
}

Deno.test("policy-for: names, namespaced names, and a clear problem when absent or malformed", () => {
  assert.deepEqual(parsePolicyFor("data, globex/media"), {
    nets: [{ name: "data" }, { tenant: "globex", name: "media" }],
  });
  assert.match(
    parsePolicyFor(undefined).problem!,
    /no annotation "k8s.v1.cni.cncf.io\/policy-for"/,
  );
  assert.match(parsePolicyFor("a/b/c").problem!, /"a\/b\/c" is not "net" or "namespace\/net"/);
  assert.match(parsePolicyFor("Data").problem!, /lowercase DNS labels/);
});

Deno.test("policyTypes: Ingress by default, Egress when egress rules are given, or as listed", () => {
  assert.deepEqual(directionsOf(policy({})).types, { ingress: true, egress: false });
  // As Kubernetes defaults it: an empty egress list is no egress rule, so egress stays open.
  assert.deepEqual(directionsOf(policy({ egress: [] })).types, { ingress: true, egress: false });
  assert.deepEqual(directionsOf(policy({ egress: [{}] })).types, { ingress: true, egress: true });
  assert.deepEqual(directionsOf(policy({ policyTypes: ["Egress"] })).types, {
    ingress: false,
    egress: true,
  });
  assert.match(directionsOf(policy({ policyTypes: ["Sideways"] })).problems[0], /"Sideways"/);
});

Deno.test("selection: the policy's namespace only, by podSelector; empty selects every pod there", () => {
  const names = (p: MultiNetworkPolicy) => selectedPods(p, world()).map((x) => x.name);
  assert.deepEqual(names(policy({})), ["web"]);
  assert.deepEqual(names(policy({ podSelector: {} })), ["web", "c1", "c2", "plain"]);
});

Deno.test("ingress from pods: their addresses on THAT network, merged, on the ports given", () => {
  const t = translate(
    policy({
      ingress: [{
        from: [{ podSelector: { matchLabels: { role: "client" } } }],
        ports: [{ protocol: "TCP", port: 80 }, { protocol: "UDP", port: 5000, endPort: 5010 }],
      }],
    }),
    DATA,
    world(),
  );
  assert.deepEqual(t.problems, []);
  assert.deepEqual(t.rules, [
    { direction: "ingress", protocol: "tcp", ports: "80", peer: { cidr: "10.0.0.4/31" } },
    { direction: "ingress", protocol: "udp", ports: "5000-5010", peer: { cidr: "10.0.0.4/31" } },
    { direction: "ingress", protocol: "tcp", ports: "80", peer: { cidr: "fd00::5/128" } },
    { direction: "ingress", protocol: "udp", ports: "5000-5010", peer: { cidr: "fd00::5/128" } },
  ]);
});

Deno.test("namespaceSelector: pods of the namespaces it selects; with a podSelector, both hold", () => {
  const from = (peer: Record<string, unknown>) =>
    translate(policy({ ingress: [{ from: [peer] }] }), DATA, world()).rules.map((r) =>
      r.peer && "cidr" in r.peer ? r.peer.cidr : "any"
    );
  assert.deepEqual(from({ namespaceSelector: { matchLabels: { team: "g" } } }), ["10.0.0.20/32"]);
  assert.deepEqual(
    from({ namespaceSelector: {}, podSelector: { matchLabels: { role: "client" } } }),
    ["10.0.0.4/31", "10.0.0.20/32", "fd00::5/128"],
  );
  assert.deepEqual(from({ podSelector: { matchLabels: { role: "nobody" } } }), []);
});

Deno.test("ipBlock with except: the CIDRs that remain; no peers: anyone; no ports: any protocol", () => {
  const t = translate(
    policy({
      policyTypes: ["Egress"],
      egress: [
        { to: [{ ipBlock: { cidr: "10.1.0.0/24", except: ["10.1.0.0/25", "10.1.0.192/26"] } }] },
        { ports: [{ port: 53, protocol: "UDP" }, { port: 443 }] },
      ],
    }),
    DATA,
    world(),
  );
  assert.deepEqual(t.problems, []);
  assert.deepEqual(t.rules, [
    { direction: "egress", protocol: "any", peer: { cidr: "10.1.0.128/26" } },
    { direction: "egress", protocol: "udp", ports: "53" },
    { direction: "egress", protocol: "tcp", ports: "443" },
  ]);
});

Deno.test("an empty ingress list with Ingress allows nothing; Egress-only writes no ingress rule", () => {
  assert.deepEqual(translate(policy({ ingress: [] }), DATA, world()).rules, []);
  assert.deepEqual(
    translate(policy({ policyTypes: ["Egress"], ingress: [{}] }), DATA, world()).rules,
    [],
  );
  assert.deepEqual(translate(policy({ ingress: [{}] }), DATA, world()).rules, [
    { direction: "ingress", protocol: "any" },
  ]);
});

Deno.test("what cannot be expressed is a problem naming where, and allows nothing", () => {
  const t = translate(
    policy({
      ingress: [
        { ports: [{ protocol: "SCTP", port: 9 }, { port: "http" }] },
        { from: [{ ipBlock: { cidr: "10.2.0.0/24", except: ["10.3.0.0/25"] } }] },
        { from: [{ ipBlock: { cidr: "nonsense" } }] },
        { from: [{ podSelector: { matchExpressions: [{ key: "a", operator: "Gt" }] } }] },
        { from: [{ ipBlock: { cidr: "10.2.0.0/24" }, podSelector: {} }] },
        { from: [{}] },
      ],
    }),
    DATA,
    world(),
  );
  assert.deepEqual(t.rules, []);
  const expected = [
    /spec\.ingress\[0\]\.ports\[0\]\.protocol: SCTP is not supported/,
    /spec\.ingress\[0\]\.ports\[1\]\.port: the named port "http" is not supported/,
    /spec\.ingress\[1\]\.from\[0\]\.ipBlock\.except\[0\]: 10\.3\.0\.0\/25 is not inside 10\.2\.0\.0\/24/,
    /spec\.ingress\[2\]\.from\[0\]\.ipBlock\.cidr: "nonsense"/,
    /spec\.ingress\[3\]\.from\[0\]\.podSelector: operator "Gt"/,
    /spec\.ingress\[4\]\.from\[0\]: ipBlock cannot go with podSelector/,
    /spec\.ingress\[5\]\.from\[0\]: names no podSelector, namespaceSelector or ipBlock/,
  ];
  assert.equal(t.problems.length, expected.length, t.problems.join("\n"));
  for (const [i, re] of expected.entries()) assert.match(t.problems[i], re);
});
