/**
 * What a container of the manifests would see at run time, worked out the way the kubelet does
 * it: its environment (literal values, downward API fields, Secret keys, the Service variables
 * of its namespace, `$(VAR)` references expanded) and where each mounted file comes from.
 * Tests use it to feed the components' own configuration loaders what a cluster would.
 */
import { parse } from "yaml";
import { DEPLOY_DIR } from "./manifests.ts";

// deno-lint-ignore no-explicit-any
type Obj = any;

/** The pod facts the downward API hands out, with the values a test chooses. */
export interface PodFacts {
  fields: Record<string, string>;
  /** Secret name → key → value. */
  secrets: Record<string, Record<string, string>>;
  /** Services of the namespace: the kubelet turns each into NAME_SERVICE_HOST/PORT. */
  services: { name: string; clusterIp: string; port: number }[];
}

/** `$(NAME)` → value when NAME is known, `$$` → `$`, anything else unchanged (kubelet rules). */
export function expandReferences(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (whole, name?: string) => {
    if (whole === "$$") return "$";
    return name !== undefined && name in env ? env[name] : whole;
  });
}

function serviceVariables(facts: PodFacts): Record<string, string> {
  const env: Record<string, string> = {};
  for (const s of facts.services) {
    const prefix = s.name.toUpperCase().replaceAll("-", "_");
    env[`${prefix}_SERVICE_HOST`] = s.clusterIp;
    env[`${prefix}_SERVICE_PORT`] = String(s.port);
  }
  return env;
}

function envValue(entry: Obj, facts: PodFacts, env: Record<string, string>): string {
  if (entry.value !== undefined) return expandReferences(entry.value, env);
  const field = entry.valueFrom?.fieldRef?.fieldPath;
  if (field !== undefined) {
    if (!(field in facts.fields)) throw new Error(`No test value for the field ${field}`);
    return facts.fields[field];
  }
  const secret = entry.valueFrom?.secretKeyRef;
  if (secret !== undefined) {
    const value = facts.secrets[secret.name]?.[secret.key];
    if (value === undefined) throw new Error(`No Secret ${secret.name} with key ${secret.key}`);
    return value;
  }
  throw new Error(`Cannot work out the value of ${entry.name}`);
}

/** The container's environment as its process gets it. */
export function containerEnv(pod: Obj, container: Obj, facts: PodFacts): Record<string, string> {
  const env: Record<string, string> = pod.enableServiceLinks === false
    ? {}
    : serviceVariables(facts);
  for (const entry of container.env ?? []) env[entry.name] = envValue(entry, facts, env);
  return env;
}

/** The container's argv (command + args) after `$(VAR)` expansion. */
export function containerArgv(container: Obj, env: Record<string, string>): string[] {
  return [...(container.command ?? []), ...(container.args ?? [])].map((a: string) =>
    expandReferences(a, env)
  );
}

/** A kustomize generator's files as key → path under deploy/ ("key=path" or a plain path). */
export function generatorFiles(generator: Obj): Record<string, string> {
  const files: Record<string, string> = {};
  for (const entry of generator.files ?? []) {
    const [key, path] = entry.includes("=") ? entry.split("=", 2) : [entry.split("/").pop(), entry];
    files[key] = `${DEPLOY_DIR}/${path}`;
  }
  return files;
}

export function readKustomization(): Obj {
  return parse(Deno.readTextFileSync(`${DEPLOY_DIR}/kustomization.yaml`));
}

/** The generator (configMap or secret) that makes the object called `name`. */
export function generatorOf(kustomization: Obj, name: string): Obj {
  const all = [
    ...(kustomization.configMapGenerator ?? []),
    ...(kustomization.secretGenerator ?? []),
  ];
  const found = all.find((g) => g.name === name);
  if (!found) throw new Error(`kustomization.yaml generates nothing called "${name}"`);
  return found;
}

/**
 * Maps a path inside the container to the file it would be: a ConfigMap or Secret mount resolves
 * to the generator's source file (or to `secretFiles` for secrets made outside deploy/).
 */
export function mountedFile(
  pod: Obj,
  container: Obj,
  path: string,
  sources: { kustomization: Obj; secretFiles?: Record<string, Record<string, string>> },
): string {
  for (const mount of container.volumeMounts ?? []) {
    if (!path.startsWith(`${mount.mountPath}/`)) continue;
    const key = path.slice(mount.mountPath.length + 1);
    const volume = (pod.volumes ?? []).find((v: Obj) => v.name === mount.name);
    const name = volume?.configMap?.name ?? volume?.secret?.secretName;
    if (name === undefined) throw new Error(`${path} is on volume ${mount.name}, not a config`);
    const file = sources.secretFiles?.[name]?.[key] ??
      generatorFiles(generatorOf(sources.kustomization, name))[key];
    if (file === undefined) throw new Error(`${name} has no key "${key}" for ${path}`);
    return file;
  }
  throw new Error(`Nothing is mounted at ${path} in container ${container.name}`);
}
