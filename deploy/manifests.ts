/**
 * The manifests under deploy/ as data: every YAML file, every document in it, parsed the way
 * kubectl reads them (YAML 1.1) and checked to mean the same in YAML 1.2, so that no value (an
 * octal mode, a yes/no) silently changes between tools.
 */
import { isDeepStrictEqual } from "node:util";
import { parseAllDocuments } from "yaml";

export const DEPLOY_DIR = new URL(".", import.meta.url).pathname.replace(/\/$/, "");

/** One document of a manifest file. */
export interface Manifest {
  /** Relative to deploy/, e.g. "agent/daemonset.yaml". */
  file: string;
  /** Position of the document in its file, from 0. */
  index: number;
  // deno-lint-ignore no-explicit-any
  object: any;
}

/** Files that are YAML but not Kubernetes objects. */
export const NOT_OBJECTS = new Set(["kustomization.yaml"]);

/**
 * Kustomizations of their own, applied after deploy/ (their objects need its CRDs), and the
 * monitoring Component (Prometheus operator objects; monitoring_test.ts checks it): not part of
 * `kubectl apply -k deploy/`.
 */
export const SEPARATE_KUSTOMIZATIONS = new Set(["default-network", "monitoring"]);

export function yamlFiles(dir = DEPLOY_DIR, prefix = ""): string[] {
  const files: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const rel = prefix + entry.name;
    if (entry.isDirectory && prefix === "" && SEPARATE_KUSTOMIZATIONS.has(entry.name)) continue;
    if (entry.isDirectory) files.push(...yamlFiles(`${dir}/${entry.name}`, `${rel}/`));
    else if (/\.ya?ml$/.test(entry.name)) files.push(rel);
  }
  return files.sort();
}

function parseAs(text: string, file: string, version: "1.1" | "1.2"): unknown[] {
  return parseAllDocuments(text, { version, prettyErrors: true }).map((doc, index) => {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length > 0) {
      throw new SyntaxError(
        `${file} document ${index}: ${problems.map((p) => p.message).join("; ")}`,
      );
    }
    return doc.toJS();
  });
}

/** Every document of one file; throws naming the file for bad YAML or YAML-1.1/1.2 ambiguity. */
export function parseManifestFile(file: string, dir = DEPLOY_DIR): Manifest[] {
  const text = Deno.readTextFileSync(`${dir}/${file}`);
  const objects = parseAs(text, file, "1.1");
  const strict = parseAs(text, file, "1.2");
  objects.forEach((object, index) => {
    if (!isDeepStrictEqual(object, strict[index])) {
      throw new SyntaxError(
        `${file} document ${index} reads differently in YAML 1.1 (kubectl) and 1.2: quote ` +
          "strings like yes/no/on/off and write modes in decimal",
      );
    }
    if (object === null || typeof object !== "object" || Array.isArray(object)) {
      throw new SyntaxError(`${file} document ${index} is empty or not a mapping`);
    }
  });
  return objects.map((object, index) => ({ file, index, object }));
}

/** All Kubernetes objects under deploy/. */
export function loadManifests(dir = DEPLOY_DIR): Manifest[] {
  return yamlFiles(dir).filter((f) => !NOT_OBJECTS.has(f)).flatMap((f) =>
    parseManifestFile(f, dir)
  );
}

/** The one object of a kind and name; throws when it is missing or not unique. */
export function findObject(manifests: Manifest[], kind: string, name: string): Manifest {
  const found = manifests.filter((m) => m.object.kind === kind && m.object.metadata?.name === name);
  if (found.length !== 1) {
    throw new Error(`Expected one ${kind} "${name}" under deploy/, found ${found.length}`);
  }
  return found[0];
}
