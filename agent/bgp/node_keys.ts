/**
 * A node's own BGP settings from its Kubernetes Node object (agent/README.md, "BGP advertisement"):
 * labels or annotations under `bgp.knitter.io/`, one key per field of the config file's `bgp`
 * section. Pure: the values the keys set, or every bad key with what is wrong and what to write.
 * A key may be a label or an annotation (an annotation can hold what a label value cannot: JSON,
 * colons); set in both, the two must agree.
 *
 * @module
 */
import type { z } from "zod";
import { Asn, Communities, Ipv4, Ipv6, NodeBgpPeers } from "../config.ts";
import type { BgpPeer } from "./bird_config.ts";

export const PREFIX = "bgp.knitter.io/";

/** What a Node's keys may set; each overrides the config file's field of the same name. */
export interface NodeBgp {
  localAsn?: number;
  peers?: BgpPeer[];
  routerId?: string;
  communities?: string[];
  nextHop?: string;
  nextHop6?: string;
}

/** A key that cannot be used: which, what is wrong with it, and what to write. */
export interface KeyError {
  key: string;
  message: string;
}

interface KeySpec {
  field: keyof NodeBgp;
  schema: z.ZodType;
  /** The key's text as the value the schema checks. */
  read(text: string): unknown;
  example: string;
  /** The value is not repeated in messages (a peer list may carry a password by mistake). */
  secret?: boolean;
}

/** JSON; the parser's message is left out: it quotes the text. */
const json = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error("is not JSON");
  }
};
const number = (text: string): unknown => /^\d+$/.test(text.trim()) ? Number(text) : text;
const commaList = (text: string) => text.split(",").map((c) => c.trim()).filter((c) => c !== "");

/** The keys, as data: `bgp.knitter.io/<name>`. */
export const NODE_KEYS: Record<string, KeySpec> = {
  asn: {
    field: "localAsn",
    schema: Asn,
    read: number,
    example: "bgp.knitter.io/asn=65010 (a number 1-4294967295)",
  },
  peers: {
    field: "peers",
    schema: NodeBgpPeers,
    read: json,
    secret: true,
    example: `bgp.knitter.io/peers='[{"address":"192.0.2.1","asn":65000,"holdTime":9}]'`,
  },
  "router-id": {
    field: "routerId",
    schema: Ipv4,
    read: (t) => t,
    example: "bgp.knitter.io/router-id=192.0.2.11 (an IPv4 address)",
  },
  communities: {
    field: "communities",
    schema: Communities,
    read: commaList,
    example: "bgp.knitter.io/communities=65010:100,65010:200 (empty: none)",
  },
  "next-hop": {
    field: "nextHop",
    schema: Ipv4,
    read: (t) => t,
    example: "bgp.knitter.io/next-hop=192.0.2.11 (an IPv4 address of the node)",
  },
  "next-hop6": {
    field: "nextHop6",
    schema: Ipv6,
    read: (t) => t,
    example: "bgp.knitter.io/next-hop6=fd00::11 (an IPv6 address of the node)",
  },
};

/** The node's BGP values, or the keys that are wrong (none of the values apply then). */
export function nodeBgp(
  node: { labels: Record<string, string>; annotations: Record<string, string> },
): { values: NodeBgp; errors: KeyError[] } {
  const values: NodeBgp = {};
  const errors: KeyError[] = [];
  for (const key of keysOf(node)) {
    const name = key.slice(PREFIX.length);
    const spec = NODE_KEYS[name];
    if (!spec) {
      const known = Object.keys(NODE_KEYS).map((k) => PREFIX + k).join(", ");
      errors.push({ key, message: `is not a key the agent knows: use one of ${known}` });
      continue;
    }
    const text = textOf(node, key);
    if ("error" in text) {
      errors.push({ key, message: text.error });
      continue;
    }
    const parsed = check(spec, text.value);
    if ("error" in parsed) {
      errors.push({ key, message: `${parsed.error}; write e.g. ${spec.example}` });
    } else Object.assign(values, { [spec.field]: parsed.value });
  }
  return { values, errors };
}

function keysOf(node: { labels: Record<string, string>; annotations: Record<string, string> }) {
  const all = [...Object.keys(node.labels), ...Object.keys(node.annotations)];
  return [...new Set(all.filter((k) => k.startsWith(PREFIX)))].sort();
}

/** The key's text: the label's or the annotation's, which must agree when both are set. */
function textOf(
  node: { labels: Record<string, string>; annotations: Record<string, string> },
  key: string,
): { value: string } | { error: string } {
  const label = node.labels[key];
  const annotation = node.annotations[key];
  if (label !== undefined && annotation !== undefined && label !== annotation) {
    return {
      error: `is a label ("${label}") and an annotation ("${annotation}") that differ: ` +
        "remove one of them",
    };
  }
  return { value: annotation ?? label };
}

function check(spec: KeySpec, text: string): { value: unknown } | { error: string } {
  const shown = spec.secret ? "the value" : `"${clip(text)}"`;
  let raw: unknown;
  try {
    raw = spec.read(text);
  } catch (err) {
    return { error: `${shown} ${(err as Error).message}` };
  }
  const r = spec.schema.safeParse(raw);
  if (r.success) return { value: r.data };
  const issue = r.error.issues[0];
  const where = issue.path.length ? ` at ${issue.path.join(".")}` : "";
  const why = issue.code === "unrecognized_keys" && issue.keys.includes("password")
    ? "a password does not belong on a Node, whose annotations many may read: keep the peer " +
      "with its password in the agent's config file"
    : issue.message;
  return { error: `${shown}${where}: ${why}` };
}

/** A long value, cut for the message. */
function clip(text: string): string {
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}
