/**
 * Who wrote a pod's `k8s.v1.cni.cncf.io/network-status`: the monitor marks every status it writes
 * (STATUS_WRITER); a status without the mark, or whose text no longer matches it, is Multus'. The
 * monitor never overwrites such a status, and the agent's hot-plug leaves such a pod to Multus.
 */
import { NETWORK_STATUS } from "./annotations.ts";

/**
 * Set beside every network-status the monitor writes: its name and a digest of the text it wrote.
 * A status without it, or whose text no longer matches the digest, is someone else's and is never
 * overwritten nor taken away. That is Multus': as the meta-plugin it writes every pod's status
 * itself, Knitter's attachments included, and may do so after the monitor did (it patches its own
 * annotation only, so the mark stays beside a text that is no longer ours). Knitter as a Multus
 * delegate thus leaves the status to Multus; as the primary plugin, it writes it.
 */
export const STATUS_WRITER = "knitter.io/network-status-writer";
const WRITER = "knitter-monitor";

/** The mark beside a status the monitor wrote. */
export function statusMark(status: string): string {
  return `${WRITER} ${fnv1a(status)}`;
}

/** Whether the monitor wrote this status (a bare name: a monitor from before the digest). */
export function wroteStatus(annotations: Record<string, string>): boolean {
  const status = annotations[NETWORK_STATUS];
  const mark = annotations[STATUS_WRITER];
  return status !== undefined && (mark === statusMark(status) || mark === WRITER);
}

/** FNV-1a, 32 bits, as hex: tells our text from another's, not a secret. */
export function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, "0");
}
