/**
 * Makes the files deploy/kustomization.yaml turns into Secrets: an admin token (for the monitor
 * and for people), one node token per node, and the manager's tokens file listing all of them.
 * Tokens already there are kept, so adding a node changes nothing else.
 *
 *   deno task deploy:secrets --nodes worker1,worker2 [--dir deploy/secrets]
 */
import { parseArgs } from "node:util";

/** The manager's node names (manager/schemas.ts NodeName). */
const NODE_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export const FILES = {
  admin: "admin-token",
  tokens: "tokens.json",
  nodes: "node-tokens",
} as const;

export interface TokenEntry {
  token: string;
  scope: "admin" | "node";
  node?: string;
}

export class SecretsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SecretsError";
  }
}

function newToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replaceAll("=", "");
}

async function readExisting(dir: string): Promise<TokenEntry[]> {
  let text;
  try {
    text = await Deno.readTextFile(`${dir}/${FILES.tokens}`);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return [];
    throw err;
  }
  try {
    return JSON.parse(text) as TokenEntry[];
  } catch (err) {
    throw new SecretsError(
      `${dir}/${FILES.tokens} is not valid JSON (${(err as Error).message}): fix or remove it`,
    );
  }
}

/** The existing tokens plus an admin token and a token per new node. */
export function addTokens(existing: TokenEntry[], nodes: string[]): TokenEntry[] {
  const bad = nodes.filter((n) => !NODE_NAME.test(n));
  if (bad.length > 0) {
    throw new SecretsError(
      `Not a node name: ${
        bad.map((n) => `"${n}"`).join(", ")
      }; use the names "kubectl get nodes" shows`,
    );
  }
  const tokens = [...existing];
  if (!tokens.some((t) => t.scope === "admin")) tokens.push({ token: newToken(), scope: "admin" });
  for (const node of nodes) {
    if (!tokens.some((t) => t.scope === "node" && t.node === node)) {
      tokens.push({ token: newToken(), scope: "node", node });
    }
  }
  return tokens;
}

/** Each file in full or not at all: written beside its target, then renamed, owner-only. */
async function writeAtomic(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp`;
  await Deno.writeTextFile(tmp, text, { mode: 0o600 });
  await Deno.rename(tmp, path);
}

export async function makeSecrets(dir: string, nodes: string[]): Promise<TokenEntry[]> {
  const tokens = addTokens(await readExisting(dir), nodes);
  const admin = tokens.find((t) => t.scope === "admin")!;
  const nodeLines = tokens.filter((t) => t.scope === "node").map((t) => `${t.node} ${t.token}\n`);
  await Deno.mkdir(dir, { recursive: true });
  await writeAtomic(`${dir}/${FILES.tokens}`, JSON.stringify(tokens, null, 2) + "\n");
  await writeAtomic(`${dir}/${FILES.admin}`, admin.token);
  await writeAtomic(`${dir}/${FILES.nodes}`, nodeLines.join(""));
  return tokens;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      nodes: { type: "string", default: "" },
      dir: { type: "string", default: new URL("./secrets", import.meta.url).pathname },
    },
  });
  const nodes = values.nodes.split(",").map((n) => n.trim()).filter((n) => n !== "");
  try {
    const tokens = await makeSecrets(values.dir, nodes);
    const names = tokens.filter((t) => t.node).map((t) => t.node).join(", ") || "none yet";
    console.log(`Wrote ${values.dir}: an admin token and node tokens for ${names}.`);
    console.log("Next: kubectl apply -k deploy/");
  } catch (err) {
    if (!(err instanceof SecretsError)) throw err;
    console.error(`deploy:secrets: ${err.message}`);
    Deno.exit(1);
  }
}
