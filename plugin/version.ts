/** The VERSION answer, kept apart so that main.ts can give it without loading anything else. */
import { CNI_VERSIONS, LATEST_CNI_VERSION } from "./contract.ts";

/** Echoes the asked version (as the spec says) and never fails: a probe always gets an answer. */
export function versionReply(stdin: string): string {
  let asked: unknown;
  try {
    asked = (JSON.parse(stdin) as { cniVersion?: unknown } | null)?.cniVersion;
  } catch { /* an empty or odd probe still gets an answer */ }
  const cniVersion = typeof asked === "string" && asked !== "" ? asked : LATEST_CNI_VERSION;
  return JSON.stringify({ cniVersion, supportedVersions: CNI_VERSIONS });
}
