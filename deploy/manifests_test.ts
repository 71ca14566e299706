/**
 * The manifests a user applies: each parses, each object matches the Kubernetes schema of its
 * kind (no unknown field either), the kustomization holds together, RBAC stays least-privilege,
 * and the components' own configuration loaders accept what the pods would be given.
 */
import assert from "node:assert/strict";
import { parse as parseYaml } from "yaml";
import { type AgentRequest, podRequest } from "../agent/cni/pod_request.ts";
import { FINALIZER } from "../monitor/crd_types.ts";
import { loadConfig } from "@knitter/manager";
import { loadAgentConfig } from "@knitter/agent";
import { loadMonitorConfig } from "@knitter/monitor";
import { checkConfig, decodeConfig } from "../agent/cni/cni_config.ts";
import { ipamPodRequest, isIpamCall } from "../agent/cni/ipam_call.ts";
import { PLUGIN_SOURCE } from "../plugin/build.ts";
import { AGENT_SOCKET, BINARIES, PLUGIN } from "./binaries.ts";
import { kindKey, KINDS, KUBERNETES_MODELS } from "./kinds.ts";
import { FILES, makeSecrets } from "./make_secrets.ts";
import {
  DEPLOY_DIR,
  findObject,
  loadManifests,
  type Manifest,
  NOT_OBJECTS,
  parseManifestFile,
  yamlFiles,
} from "./manifests.ts";
import {
  containerArgv,
  containerEnv,
  generatorFiles,
  generatorOf,
  mountedFile,
  type PodFacts,
  readKustomization,
} from "./pod_env.ts";

// deno-lint-ignore no-explicit-any
type Obj = any;

const manifests = loadManifests();
const kustomization = readKustomization();

function where(m: Manifest): string {
  return `${m.file} document ${m.index} (${m.object.kind} ${m.object.metadata?.name})`;
}

function podSpec(kind: string, name: string): Obj {
  return findObject(manifests, kind, name).object.spec.template.spec;
}

function container(pod: Obj, name: string): Obj {
  const found = pod.containers.find((c: Obj) => c.name === name);
  assert.ok(found, `no container "${name}"`);
  return found;
}

/** Secrets as make_secrets.ts writes them, in a temp dir; node tokens for worker1. */
async function withSecrets<T>(
  fn: (facts: PodFacts, secretFiles: Record<string, Record<string, string>>) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "knitter-deploy-secrets-" });
  try {
    await makeSecrets(dir, ["worker1"]);
    const secretFiles: Record<string, Record<string, string>> = {};
    const secrets: Record<string, Record<string, string>> = {};
    for (const g of kustomization.secretGenerator) {
      secretFiles[g.name] = {};
      secrets[g.name] = {};
      for (const [key, path] of Object.entries(generatorFiles(g))) {
        const file = `${dir}/${path.split("/").pop()}`;
        secretFiles[g.name][key] = file;
        secrets[g.name][key] = await Deno.readTextFile(file);
      }
    }
    const service = findObject(manifests, "Service", "knitter-manager").object;
    const facts: PodFacts = {
      fields: { "spec.nodeName": "worker1", "status.hostIP": "192.0.2.11" },
      secrets,
      services: [{
        name: "knitter-manager",
        clusterIp: "10.96.0.27",
        port: service.spec.ports[0].port,
      }],
    };
    return await fn(facts, secretFiles);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("every YAML file under deploy/ parses, documents are mappings, YAML 1.1 and 1.2 agree", () => {
  const files = yamlFiles();
  assert.ok(files.length >= 10, `only ${files.length} YAML files found`);
  for (const file of files) parseManifestFile(file);
});

Deno.test("the YAML check refuses what kubectl would read differently", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/a.yaml`, "apiVersion: v1\nkind: ConfigMap\ndata:\n  x: yes\n");
    assert.throws(() => parseManifestFile("a.yaml", dir), /YAML 1.1 \(kubectl\) and 1.2/);
    await Deno.writeTextFile(`${dir}/b.yaml`, "a: 1\n---\n- not a mapping\n");
    assert.throws(() => parseManifestFile("b.yaml", dir), /b.yaml document 1/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("every object matches the Kubernetes schema of its kind", () => {
  for (const m of manifests) {
    const kind = KINDS[kindKey(m.object)];
    assert.ok(kind, `${where(m)}: ${kindKey(m.object)} is not a kind deploy/ knows`);
    assert.ok(m.object.metadata?.name, `${where(m)} has no name`);
    try {
      new kind.model(m.object).validate();
    } catch (err) {
      assert.fail(`${where(m)} does not match its schema: ${(err as Error).message}`);
    }
  }
});

Deno.test("the schema check catches a wrong type", () => {
  const ds = structuredClone(findObject(manifests, "DaemonSet", "knitter-agent").object);
  ds.spec.template.spec.hostNetwork = "yes";
  assert.throws(() => new KINDS["apps/v1/DaemonSet"].model(ds).validate(), /hostNetwork/);
});

/** Each object as a literal of its kind's interface: TypeScript refuses unknown fields. */
function typedModule(objects: Manifest[]): string {
  const lines = objects.map((m, i) => {
    const kind = KINDS[kindKey(m.object)];
    const type = `I${m.object.kind}`;
    return [
      `import type { ${type} as T${i} } from "${KUBERNETES_MODELS}/${kind.module}";`,
      `// ${where(m)}`,
      `export const o${i}: T${i} = ${JSON.stringify(m.object)};`,
    ].join("\n");
  });
  return lines.join("\n") + "\n";
}

async function checkTyped(objects: Manifest[]): Promise<{ ok: boolean; output: string }> {
  const file = await Deno.makeTempFile({ prefix: "knitter-manifests-", suffix: ".ts" });
  try {
    await Deno.writeTextFile(file, typedModule(objects));
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["check", "--no-config", "--no-lock", "--quiet", file],
      env: { NO_COLOR: "1" },
    }).output();
    const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    return { ok: out.success, output: text };
  } finally {
    await Deno.remove(file);
  }
}

Deno.test("no object has a field its kind does not define (kubectl's strict validation)", async () => {
  const typed = await checkTyped(manifests);
  assert.ok(typed.ok, typed.output);
  // And the check is real: a misspelt field fails it.
  const bad = structuredClone(findObject(manifests, "DaemonSet", "knitter-agent"));
  bad.object.spec.template.spec.hostNetwrk = true;
  const refused = await checkTyped([bad]);
  assert.ok(!refused.ok);
  assert.match(refused.output, /hostNetwrk/);
});

Deno.test("the kustomization lists every manifest, and every file it names exists", () => {
  const listed: string[] = kustomization.resources;
  const objects = yamlFiles().filter((f) => !NOT_OBJECTS.has(f));
  assert.deepEqual(
    [...listed].sort(),
    objects,
    "resources and the YAML files under deploy/ differ",
  );
  assert.equal(kustomization.namespace, "knitter-system");
  assert.equal(findObject(manifests, "Namespace", "knitter-system").file, "namespace.yaml");
  for (const g of kustomization.configMapGenerator) {
    for (const path of Object.values(generatorFiles(g))) {
      assert.ok(Deno.statSync(path).isFile, `${g.name}: ${path} is missing`);
    }
  }
  // Secrets come from files the user makes with make_secrets.ts: the names must be its names.
  const made = Object.values(FILES).map((f) => `${DEPLOY_DIR}/secrets/${f}`).sort();
  const named = kustomization.secretGenerator.flatMap((g: unknown) =>
    Object.values(generatorFiles(g))
  ).sort();
  assert.deepEqual(named, made);
  const ignored = Deno.readTextFileSync(`${DEPLOY_DIR}/secrets/.gitignore`);
  assert.match(ignored, /^\*$/m, "deploy/secrets/ must never be committed");
});

Deno.test("every image is the kustomization's knitter image, running a binary it contains", () => {
  const image = kustomization.images.find((i: { name: string }) => i.name === "knitter");
  assert.ok(image?.newTag, "kustomization.yaml sets no knitter image tag");
  const containerfile = Deno.readTextFileSync(`${DEPLOY_DIR}/image/Containerfile`);
  const copied = [...containerfile.matchAll(/^COPY (.+) \S+$/gm)].flatMap((m) => m[1].split(" "));
  assert.deepEqual([...copied].sort(), [...BINARIES.map((b) => b.name), PLUGIN].sort());
  for (const m of manifests.filter((m) => m.object.spec?.template)) {
    const pod = m.object.spec.template.spec;
    for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
      assert.equal(c.image, "knitter", `${where(m)} container ${c.name}`);
      const argv: string[] = [...(c.command ?? []), ...(c.args ?? [])];
      const binary = argv[0] === "/bin/sh" ? argv[4] : argv[0];
      if (binary !== undefined) {
        assert.ok(copied.includes(binary), `${where(m)}: ${binary} is not in the image`);
      }
    }
  }
});

Deno.test("RBAC: no wildcards, and each component gets exactly what it needs", () => {
  const rules = (name: string) =>
    findObject(manifests, "ClusterRole", name).object.rules.map(
      (r: { apiGroups: string[]; resources: string[]; verbs: string[] }) =>
        `${r.apiGroups.join(",")}|${r.resources.join(",")}|${r.verbs.join(",")}`,
    );
  for (const m of manifests.filter((m) => /Role$/.test(m.object.kind))) {
    for (const rule of m.object.rules) {
      for (const field of ["apiGroups", "resources", "verbs", "resourceNames"]) {
        assert.ok(!(rule[field] ?? []).includes("*"), `${where(m)}: wildcard in ${field}`);
      }
      assert.ok(!rule.nonResourceURLs, `${where(m)} grants non-resource URLs`);
    }
  }
  assert.deepEqual(rules("knitter-agent"), [
    "|pods|get,list,watch",
    "|events|create",
    "|nodes|get,list,watch",
  ]);
  assert.deepEqual(rules("knitter-monitor"), [
    "|pods|get,list,watch,patch",
    "|namespaces|get,list,watch",
    "|events|create,patch",
    "knitter.io|networks,ipgroups,routers,mirrors|get,list,watch,update,patch",
    "knitter.io|networks/status,ipgroups/status,routers/status,mirrors/status|update,patch",
    "k8s.cni.cncf.io|multi-networkpolicies|get,list,watch",
    "k8s.cni.cncf.io|ipamclaims|get,list,watch,update,patch",
    "k8s.cni.cncf.io|ipamclaims/status|update,patch",
    "kubevirt.io|virtualmachineinstancemigrations|get,list,watch",
    "|services|get,list,watch",
    "discovery.k8s.io|endpointslices|get,list,watch",
  ]);
  assert.equal(
    manifests.filter((m) => /Role$/.test(m.object.kind) && /manager/.test(m.object.metadata.name))
      .length,
    0,
    "the manager must have no roles",
  );
});

Deno.test("RBAC: every workload runs as its own service account, bound to its own role", () => {
  const accounts = manifests.filter((m) => m.object.kind === "ServiceAccount");
  for (
    const [kind, name] of [
      ["Deployment", "knitter-manager"],
      ["Deployment", "knitter-monitor"],
      ["DaemonSet", "knitter-agent"],
    ]
  ) {
    const pod = podSpec(kind, name);
    assert.equal(pod.serviceAccountName, name);
    assert.ok(accounts.some((a) => a.object.metadata.name === name), `no ServiceAccount ${name}`);
  }
  const manager = findObject(manifests, "ServiceAccount", "knitter-manager").object;
  assert.equal(manager.automountServiceAccountToken, false);
  assert.equal(podSpec("Deployment", "knitter-manager").automountServiceAccountToken, false);
  for (const b of manifests.filter((m) => m.object.kind === "ClusterRoleBinding")) {
    const { roleRef, subjects } = b.object;
    findObject(manifests, roleRef.kind, roleRef.name);
    assert.deepEqual(subjects, [{
      kind: "ServiceAccount",
      name: roleRef.name,
      namespace: "knitter-system",
    }]);
  }
});

Deno.test("the manager loads the configuration and tokens its pod is given", async () => {
  await withSecrets(async (facts, secretFiles) => {
    const pod = podSpec("Deployment", "knitter-manager");
    const c = container(pod, "manager");
    const env = containerEnv(pod, c, facts);
    const argv = containerArgv(c, env);
    assert.equal(argv[0], "knitter-manager");
    const sources = { kustomization, secretFiles };
    const { config } = await loadConfig(
      argv.slice(1),
      (name) => env[name],
      (path) => Deno.readTextFile(mountedFile(pod, c, path, sources)),
    );
    // Admin (for the monitor) and the node's token, as make_secrets.ts wrote them.
    assert.deepEqual(config.tokens.map((t) => t.scope).sort(), ["admin", "node"]);
    const admin = config.tokens.find((t) => t.scope === "admin")!;
    assert.equal(admin.token, facts.secrets["knitter-admin-token"].token, "the monitor's token");
    // The store lives on the volume claim, and the Service reaches the port served.
    const storeMount = c.volumeMounts.find((v: { mountPath: string }) =>
      config.store.path.startsWith(`${v.mountPath}/`)
    );
    assert.ok(storeMount, `the store ${config.store.path} is on no volume`);
    const volume = pod.volumes.find((v: { name: string }) => v.name === storeMount.name);
    assert.equal(volume.persistentVolumeClaim?.claimName, "knitter-manager-store");
    findObject(manifests, "PersistentVolumeClaim", "knitter-manager-store");
    const port = c.ports.find((p: { name: string }) => p.name === "api");
    assert.equal(port.containerPort, config.listen.port);
    const service = findObject(manifests, "Service", "knitter-manager").object;
    assert.equal(service.spec.ports[0].targetPort, "api");
    assert.deepEqual(
      service.spec.selector,
      findObject(manifests, "Deployment", "knitter-manager").object.spec.selector.matchLabels,
    );
  });
});

Deno.test("the manager keeps one replica: a Deno KV file has one writer", () => {
  const d = findObject(manifests, "Deployment", "knitter-manager").object;
  assert.equal(d.spec.replicas, 1);
  assert.equal(d.spec.strategy.type, "Recreate");
});

Deno.test("the agent loads its configuration with the DaemonSet's environment", async () => {
  await withSecrets(async (facts, secretFiles) => {
    const pod = podSpec("DaemonSet", "knitter-agent");
    const c = container(pod, "agent");
    const env = containerEnv(pod, c, facts);
    // The entrypoint takes this node's line of the node tokens (see scripts_test.ts).
    const tokens = await Deno.readTextFile(secretFiles["knitter-node-tokens"]["node-tokens"]);
    env.KNITTER_AGENT_MANAGER_TOKEN = tokens.split("\n")[0].split(" ")[1];
    const argv = containerArgv(c, env);
    const args = argv.slice(argv.indexOf("knitter-agent") + 1);
    const configPath = args[args.indexOf("--config") + 1];
    const file = mountedFile(pod, c, configPath, { kustomization, secretFiles });
    const { config } = await loadAgentConfig(["--config", file], (name) => env[name]);
    assert.equal(config.nodeName, "worker1");
    assert.equal(config.underlayIp, "192.0.2.11");
    assert.equal(config.manager.url, "http://10.96.0.27:9527");
    assert.equal(config.socket, AGENT_SOCKET);
    // Kubernetes mode with the pod's service account: pods' annotations choose their networks,
    // also of running pods (hot-plug).
    assert.deepEqual(config.kubernetes, { hotplug: true });
    assert.equal(pod.automountServiceAccountToken, undefined);
  });
});

Deno.test("the monitor loads its configuration, the manager's URL and the admin token", async () => {
  await withSecrets(async (facts, secretFiles) => {
    const pod = podSpec("Deployment", "knitter-monitor");
    const c = container(pod, "monitor");
    const env = containerEnv(pod, c, facts);
    const argv = containerArgv(c, env);
    assert.equal(argv[0], "knitter-monitor");
    const configPath = argv[argv.indexOf("--config") + 1];
    const file = mountedFile(pod, c, configPath, { kustomization, secretFiles });
    const { config } = await loadMonitorConfig(["--config", file], (name) => env[name]);
    assert.equal(config.manager.url, "http://10.96.0.27:9527");
    assert.equal(config.manager.token, facts.secrets["knitter-admin-token"].token);
    // In-cluster credentials: the service account's token is mounted, no kubeconfig named.
    assert.equal(config.kubernetes.kubeconfig, undefined);
    assert.notEqual(pod.automountServiceAccountToken, false);
    assert.ok(config.publicNamespaces.includes(kustomization.namespace));
    // One apply is a working install: the monitor makes the agents' default network itself.
    const agentJson = JSON.parse(Deno.readTextFileSync(`${DEPLOY_DIR}/agent/agent.json`));
    assert.equal(config.defaultNetwork?.name, agentJson.defaultNetwork);
    assert.equal(config.defaultNetwork?.namespace, kustomization.namespace);
  });
});

Deno.test("the monitor and the agent are probed where their configuration serves /healthz and /readyz", async () => {
  await withSecrets(async (facts, secretFiles) => {
    for (
      const [kind, name, cname] of [
        ["Deployment", "knitter-monitor", "monitor"],
        ["DaemonSet", "knitter-agent", "agent"],
      ]
    ) {
      const pod = podSpec(kind, name);
      const c = container(pod, cname);
      const env = containerEnv(pod, c, facts);
      if (cname === "agent") {
        const tokens = await Deno.readTextFile(secretFiles["knitter-node-tokens"]["node-tokens"]);
        env.KNITTER_AGENT_MANAGER_TOKEN = tokens.split("\n")[0].split(" ")[1];
      }
      const argv = containerArgv(c, env);
      const configPath = argv[argv.indexOf("--config") + 1];
      const file = mountedFile(pod, c, configPath, { kustomization, secretFiles });
      const load = cname === "agent" ? loadAgentConfig : loadMonitorConfig;
      const { config } = await load(["--config", file], (n) => env[n]);
      const health = config.health!;
      assert.ok(health, `${name}: its configuration serves probes`);
      // The kubelet runs on the host: with the host's network the pod's loopback is its own.
      assert.equal(pod.hostNetwork, true, name);
      assert.equal(health.hostname, "127.0.0.1", `${name}: probes only on the loopback`);
      for (const [probe, path] of [["livenessProbe", "/healthz"], ["readinessProbe", "/readyz"]]) {
        const get = c[probe]?.httpGet;
        assert.ok(get, `${name}: ${probe} is an HTTP GET`);
        assert.equal(get.path, path, `${name}: ${probe} path`);
        assert.equal(get.host, health.hostname, `${name}: ${probe} host`);
        assert.equal(get.port, health.port, `${name}: ${probe} port`);
        assert.ok(c[probe].periodSeconds > 0 && c[probe].failureThreshold > 0);
      }
      // /healthz fails once a watch is stale (a deadline without a sign of life); the kubelet
      // restarts the monitor only when it stays so for another deadline.
      if (cname === "monitor") {
        const l = c.livenessProbe;
        const deadline = (config as { watchDeadlineSeconds: number }).watchDeadlineSeconds;
        assert.ok(l.periodSeconds * l.failureThreshold >= deadline, "time to recover first");
      }
    }
  });
});

/** /var/run is a link to /run on the host and in the image: compare paths without it. */
function canonical(path: string): string {
  return path.replace(/^\/var\/run\//, "/run/");
}

Deno.test("the DaemonSet mounts from the host every path the agent's configuration names", async () => {
  const pod = podSpec("DaemonSet", "knitter-agent");
  const c = container(pod, "agent");
  const file = generatorFiles(generatorOf(kustomization, "knitter-agent-config"))["agent.json"];
  const env = {
    KNITTER_AGENT_MANAGER_URL: "http://manager:9527",
    KNITTER_AGENT_UNDERLAY_IP: "192.0.2.1",
    KNITTER_AGENT_MANAGER_TOKEN: "0123456789abcdef0123",
  };
  const { config } = await loadAgentConfig(["--config", file], (n) => env[n as keyof typeof env]);
  const paths = [
    config.socket,
    config.stateDir,
    config.ovs.dbSock ?? "/var/run/openvswitch/db.sock",
    config.ovs.rundir ?? "/var/run/openvswitch",
    // Where containerd and CRI-O put pod network namespaces (CNI_NETNS).
    "/var/run/netns/cni-0",
  ];
  for (const path of paths) {
    const mount = c.volumeMounts.find((m: { mountPath: string }) =>
      canonical(`${path}/`).startsWith(`${canonical(m.mountPath)}/`)
    );
    assert.ok(mount, `${path} is not mounted into the agent`);
    const volume = pod.volumes.find((v: { name: string }) => v.name === mount.name);
    assert.equal(
      canonical(volume.hostPath?.path ?? ""),
      canonical(mount.mountPath),
      `${path} is not the host's`,
    );
  }
  const netns = c.volumeMounts.find((m: { name: string }) => m.name === "netns");
  assert.equal(netns.mountPropagation, "HostToContainer", "pod netns made later must show up");
  assert.equal(c.securityContext.privileged, true);
  assert.equal(pod.hostNetwork, true);
  assert.equal(pod.hostPID, true);
  assert.deepEqual(pod.tolerations, [{ operator: "Exists" }]);
});

Deno.test("the CNI conflist is what the plugin accepts, for the agent's socket", () => {
  const file =
    generatorFiles(generatorOf(kustomization, "knitter-cni-config"))["10-knitter.conflist"];
  assert.equal(file, `${DEPLOY_DIR}/cni/10-knitter.conflist`);
  const list = JSON.parse(Deno.readTextFileSync(file));
  assert.equal(list.name, "knitter");
  const knitter = list.plugins.filter((p: { type: string }) => p.type === "knitter");
  assert.equal(knitter.length, 1);
  // The runtime hands each plugin its entry with the list's name and version put in.
  const stdin = JSON.stringify({ ...knitter[0], name: list.name, cniVersion: list.cniVersion });
  const checked = checkConfig(decodeConfig(stdin));
  assert.equal(checked.cniVersion, list.cniVersion);
  // No agentSocket: the plugin uses its default, where the agent listens.
  assert.equal(checked.agentSocket, undefined);
  assert.match(Deno.readTextFileSync(PLUGIN_SOURCE), new RegExp(`"${AGENT_SOCKET}"`));
});

Deno.test("the sriov-cni example is an IPAM call the agent takes, for the network it names", () => {
  const stdin = Deno.readTextFileSync(`${DEPLOY_DIR}/cni/sriov-knitter-ipam.json`);
  const config = checkConfig(decodeConfig(stdin));
  assert.equal(isIpamCall(config), true);
  const req = { command: "ADD", containerId: "c1", netns: "/run/netns/p", ifName: "net1" } as const;
  const want = ipamPodRequest({ ...req, args: { K8S_POD_NAMESPACE: "acme" }, path: "", config }, {
    tenant: "default",
  });
  assert.deepEqual([want.tenant, want.interfaces[0].network], ["acme", "data"]);
});

Deno.test("the CRDs are the agreed ones and the workloads' labels match their selectors", () => {
  const crds = manifests.filter((m) => m.object.kind === "CustomResourceDefinition");
  assert.deepEqual(crds.map((m) => m.object.metadata.name).sort(), [
    "ipamclaims.k8s.cni.cncf.io",
    "ipgroups.knitter.io",
    "mirrors.knitter.io",
    "multi-networkpolicies.k8s.cni.cncf.io",
    "networks.knitter.io",
    "routers.knitter.io",
  ]);
  for (const m of manifests.filter((m) => m.object.spec?.template)) {
    const labels = m.object.spec.template.metadata.labels;
    for (const [k, v] of Object.entries(m.object.spec.selector.matchLabels)) {
      assert.equal(labels[k], v, `${where(m)}: the pod template lacks ${k}=${v}`);
    }
  }
});

Deno.test("the shipped default network: made by the monitor from its config (one apply), public, the one the agents name; the optional Network resource says the same", () => {
  const monitorJson = JSON.parse(Deno.readTextFileSync(`${DEPLOY_DIR}/monitor/monitor.json`));
  const def = monitorJson.defaultNetwork;
  assert.equal(def.spec.public, true, "every namespace's pods attach to it");
  assert.ok(monitorJson.publicNamespaces.includes(def.namespace));
  const agentJson = JSON.parse(Deno.readTextFileSync(`${DEPLOY_DIR}/agent/agent.json`));
  assert.equal(agentJson.defaultNetwork, def.name);
  // The Network resource is a kustomization of its own, applied by choice after deploy/ (its CRD
  // must be established first); it names the same network with the same spec, so it adopts it.
  const dir = `${DEPLOY_DIR}/default-network`;
  const own = parseYaml(Deno.readTextFileSync(`${dir}/kustomization.yaml`)) as Obj;
  assert.deepEqual(own.resources, ["network.yaml"]);
  assert.equal(own.namespace, def.namespace);
  const [net] = parseManifestFile("network.yaml", dir);
  assert.equal(net.object.apiVersion, "knitter.io/v1alpha1");
  assert.equal(net.object.kind, "Network");
  assert.equal(net.object.metadata.name, def.name);
  assert.deepEqual(net.object.spec, def.spec);
  assert.ok(!yamlFiles().some((f) => f.startsWith("default-network/")));
  // An unannotated pod, and a Multus-annotated one: eth0 on it, the extra networks as net1...
  const defaults = { tenant: agentJson.defaultTenant, network: agentJson.defaultNetwork };
  const call = (annotations: Record<string, string>) =>
    podRequest({
      command: "ADD",
      containerId: "c0ffee",
      netns: "/var/run/netns/p",
      ifName: "eth0",
      path: "",
      args: { K8S_POD_NAMESPACE: "acme", K8S_POD_NAME: "web", K8S_POD_UID: "u-1" },
      config: { cniVersion: "1.1.0", name: "knitter", type: "knitter" },
      kubePod: { uid: "u-1", annotations, ownerKinds: [] },
    } as AgentRequest, defaults).interfaces.map((i) => [i.network, i.ifName]);
  assert.deepEqual(call({}), [["pods", "eth0"]]);
  assert.deepEqual(call({ "k8s.v1.cni.cncf.io/networks": "data,acme/media" }), [
    ["pods", "eth0"],
    ["data", "net1"],
    ["media", "net2"],
  ]);
});

Deno.test("uninstall: the README deletes the custom resources, while the monitor runs, before deploy/", () => {
  const readme = Deno.readTextFileSync(`${DEPLOY_DIR}/README.md`);
  const section = readme.slice(readme.indexOf("## Uninstall\n"), readme.indexOf("\n## Files"));
  const commands = [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => m[1].split("\n"))
    .map((l) => l.trim())
    .filter((l) => l.startsWith("kubectl delete"));
  const at = (re: RegExp) => {
    const i = commands.findIndex((c) => re.test(c));
    assert.ok(i >= 0, `no ${re} in the uninstall steps: ${commands.join(" | ")}`);
    return i;
  };
  // Every custom resource kind deploy/ defines is deleted, and waited for, before deploy/ itself.
  const crds = manifests.filter((m) => m.object.kind === "CustomResourceDefinition");
  const last = at(/^kubectl delete -k deploy\/$/);
  for (const crd of crds) {
    const i = at(new RegExp(`^kubectl delete ${crd.object.metadata.name} --all -A --wait`));
    assert.ok(i < last, `${crd.object.metadata.name} is deleted after deploy/`);
  }
  // IP groups and routers first: they use networks, which stay while anything does.
  assert.ok(at(/ipgroups\.knitter\.io/) < at(/networks\.knitter\.io/));
  assert.ok(at(/routers\.knitter\.io/) < at(/networks\.knitter\.io/));
  // Mirrors first too: a tenant with mirrors cannot go, nor can the ports they name.
  assert.ok(at(/mirrors\.knitter\.io/) < at(/networks\.knitter\.io/));
  // The finalizer the README names is the monitor's, and the default network goes with step 2.
  assert.match(section, new RegExp(FINALIZER.replace(".", "\\.")));
  const [net] = parseManifestFile("network.yaml", `${DEPLOY_DIR}/default-network`);
  assert.ok(crds.some((c) => c.object.spec.names.kind === net.object.kind));
});
