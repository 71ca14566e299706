/** A small structured logger: one JSON object per line on stderr, filtered by level. */

export type Level = "debug" | "info" | "warn" | "error";

const RANK: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export function isLevel(value: string): value is Level {
  return value in RANK;
}

export function createLogger(component: string, level: Level = "info"): Logger {
  const min = RANK[level];
  const emit = (lvl: Level) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < min) return;
    const line = { time: new Date().toISOString(), level: lvl, component, msg, ...fields };
    console.error(JSON.stringify(line));
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}
