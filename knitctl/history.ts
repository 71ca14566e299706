/**
 * history: who held an address or MAC when, from the manager's address history
 * (manager/service/history.ts). The tenant's own holders by default (`-t`), every tenant's with
 * `--all-tenants` (an admin token); at one time (`--at`), over a range (`--from`, `--to`), or all
 * the manager keeps.
 */
import { parseIsoTime } from "@knitter/common";
import { isIp, parseMac } from "@knitter/common/address";
import { requireFlagsOf, str, VERB_FLAGS } from "./args.ts";
import { UsageError } from "./errors.ts";
import { explainManagerError } from "./failures.ts";
import { json, table } from "./output.ts";
import { managerClient, type VerbContext } from "./verbs.ts";

/** One holding, as the manager answers it. */
interface Holding {
  tenant: string;
  network: string;
  networkTenant: string;
  port: string;
  ip: string;
  mac: string;
  pod?: { namespace: string; name: string; uid?: string };
  node?: string;
  interface?: string;
  from: string;
  to?: string;
  ended?: string;
}

export async function history(c: VerbContext): Promise<void> {
  requireFlagsOf(c.line, VERB_FLAGS.history, "history");
  const [addr, ...extra] = c.line.args;
  if (!addr || extra.length) {
    throw new UsageError(
      "history takes one address or MAC: knitctl history 10.10.0.5 [--at TIME] (or 02:52:49:00:00:01)",
    );
  }
  const query = new URLSearchParams();
  const mac = parseMac(addr);
  if (mac) query.set("mac", mac);
  else if (isIp(addr)) query.set("ip", addr);
  else throw new UsageError(`"${addr}" is neither an IPv4 or IPv6 address nor a MAC`);
  for (const flag of ["at", "from", "to"]) {
    const text = str(c.line.flags, flag);
    if (text !== undefined) query.set(flag, timeArg(flag, text));
  }
  if (query.has("at") && (query.has("from") || query.has("to"))) {
    throw new UsageError("history takes --at, or --from and/or --to, not both");
  }
  const all = c.line.flags["all-tenants"] === true;
  if (all && c.line.given.includes("tenant")) {
    throw new UsageError("history takes --tenant or --all-tenants, not both");
  }
  const path = all
    ? `/api/v1/history?${query}`
    : `/api/v1/tenants/${encodeURIComponent(c.settings.tenant)}/history?${query}`;
  const client = await managerClient(c.settings);
  let answer: { items: Holding[] };
  try {
    answer = await client.request("GET", path);
  } catch (err) {
    throw explainManagerError(err);
  } finally {
    client.close();
  }
  if (c.settings.output === "json") return c.io.out(json(answer));
  if (answer.items.length === 0) {
    const who = all ? "" : ` of tenant "${c.settings.tenant}"`;
    return c.io.err(`No port${who} held ${addr}${when(query)} (as far as the history goes)\n`);
  }
  c.io.out(holdersTable(answer.items, c.settings.output === "wide"));
}

/** The holders, oldest first: who (tenant, network, port, pod, node), what, and when. */
export function holdersTable(items: Holding[], wide: boolean): string {
  const headers = ["TENANT", "NETWORK", "PORT", "POD", "NODE", "IP", "MAC", "FROM", "TO"];
  if (wide) headers.push("INTERFACE", "POD UID", "ENDED");
  return table(
    headers,
    items.map((h) => {
      const row = [
        h.tenant,
        h.networkTenant === h.tenant ? h.network : `${h.networkTenant}/${h.network}`,
        h.port,
        h.pod ? `${h.pod.namespace}/${h.pod.name}` : "-",
        h.node ?? "-",
        h.ip,
        h.mac,
        h.from,
        h.to ?? "now",
      ];
      if (wide) row.push(h.interface ?? "-", h.pod?.uid ?? "-", h.ended ?? "-");
      return row;
    }),
  );
}

/** A time as the manager takes it (ISO 8601, UTC); "now" is now. */
function timeArg(flag: string, text: string): string {
  const t = text === "now" ? { ms: Date.now() } : parseIsoTime(text);
  if ("error" in t) {
    throw new UsageError(
      `--${flag} "${text}" ${t.error}: use ISO 8601 (2026-11-25T03:00:00Z) or "now"`,
    );
  }
  return new Date(t.ms).toISOString();
}

function when(q: URLSearchParams): string {
  if (q.has("at")) return ` at ${q.get("at")}`;
  if (q.has("from") || q.has("to")) {
    return ` from ${q.get("from") ?? "the start"} to ${q.get("to") ?? "now"}`;
  }
  return "";
}
