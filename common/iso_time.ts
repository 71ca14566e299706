/**
 * ISO 8601 times as the manager's address history takes them: a date ("2026-11-25", midnight UTC)
 * or a date-time with optional seconds and fraction and a zone (Z or ±hh:mm). Date.parse alone
 * takes impossible dates: 2026-02-30 becomes March 2nd, and a query would answer another day.
 */
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/** Milliseconds since the epoch, or why `text` is no time (to follow the quoted text). */
export function parseIsoTime(text: string): { ms: number } | { error: string } {
  const m = ISO_TIME.exec(text);
  if (!m) return { error: "is not a time" };
  const [year, month, day, hour, minute, second, zoneH, zoneM] = m.slice(1).map((v) =>
    v === undefined ? 0 : Number(v)
  );
  if (month < 1 || month > 12) return { error: `names no such date (there is no month ${m[2]})` };
  const date = new Date(Date.UTC(year, month - 1, day));
  if (
    date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day
  ) {
    return { error: `names no such date (${m[1]}-${m[2]} has no day ${m[3]})` };
  }
  if (hour > 23 || minute > 59 || second > 59 || zoneH > 23 || zoneM > 59) {
    return { error: "names no such time of day (hours 00-23, minutes and seconds 00-59)" };
  }
  return { ms: Date.parse(m[4] === undefined ? `${text}T00:00:00Z` : text) };
}
