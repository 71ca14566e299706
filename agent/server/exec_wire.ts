/**
 * The plugin's wire, version 1: `POST /v1/cni/exec` with `Knitter-Wire: 1` and the JSON body
 * `{"wire": 1, "env": {"CNI_COMMAND": ..., ...}, "stdin": "..."}`; the answer carries
 * `Knitter-Wire: 1`, `Knitter-Exit-Code: N` and, as its body, exactly what the plugin prints.
 * A request of another wire version is answered in this one, with a CNI error that names both
 * (the plugin of another version then prints its own). See "The plugin's wire" in ../README.md.
 */
import { z } from "zod";
import { CNI_CODE, CniError, LATEST_CNI_VERSION } from "@knitter/plugin/contract";
import { sniffVersion } from "../cni/cni_config.ts";
import type { ExecAnswer } from "../cni/cni_exec.ts";

export const EXEC_WIRE = 1;

export interface ExecCall {
  env: Record<string, string>;
  stdin: string;
}

export interface ExecReply {
  status: 200 | 400;
  headers: Record<string, string>;
  body: string;
}

/** What the plugin sends: the variables it forwards (CNI_* only) and stdin, as text. */
const ExecShape = z.object({
  wire: z.number(),
  env: z.record(z.string().regex(/^CNI_[A-Z]+$/).max(32), z.string()).refine(
    (e) => Object.keys(e).length <= 16,
    "at most 16 variables",
  ),
  stdin: z.string(),
});

function refused(e: CniError, stdin = ""): { refused: ExecAnswer } {
  const version = sniffVersion(stdin) ?? LATEST_CNI_VERSION;
  return {
    refused: {
      stdout: `${JSON.stringify(e.toBody(version))}\n`,
      exitCode: 1,
      command: "",
      code: e.code,
    },
  };
}

function mismatch(wire: unknown, stdin: string): { refused: ExecAnswer } {
  return refused(
    new CniError(
      CNI_CODE.internal,
      `the knitter plugin speaks wire version ${JSON.stringify(wire)}, this agent ${EXEC_WIRE}`,
      "the plugin in the CNI bin dir and the agent come from different Knitter releases: install " +
        "the plugin that comes with the running agent (the agent DaemonSet's install-cni init " +
        "container copies it), or run the agent of the plugin's release",
    ),
    stdin,
  );
}

/** The body of `POST /v1/cni/exec` (and its Knitter-Wire header) as a call, or the refusal. */
export function parseExec(
  text: string,
  headerWire: string | undefined,
): ExecCall | { refused: ExecAnswer } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return refused(malformed("the body is not JSON"));
  }
  const wire = (raw as { wire?: unknown } | null)?.wire;
  const stdin = (raw as { stdin?: unknown } | null)?.stdin;
  const sniff = typeof stdin === "string" ? stdin : "";
  if (wire !== EXEC_WIRE || headerWire !== String(EXEC_WIRE)) {
    return mismatch(wire ?? headerWire ?? "none", sniff);
  }
  const r = ExecShape.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    const field = issue.path.join(".");
    return refused(malformed(`${field ? `${field}: ` : ""}${issue.message}`), sniff);
  }
  return { env: r.data.env, stdin: r.data.stdin };
}

function malformed(why: string): CniError {
  return new CniError(CNI_CODE.decodeFailure, `The agent got a malformed request: ${why}`);
}

/** A request the body limit stopped: answered in the wire, so the plugin prints it as it is. */
export function tooLarge(msg: string): ExecAnswer {
  return refused(new CniError(CNI_CODE.decodeFailure, msg)).refused;
}

/** The HTTP answer of one call: what to print as the body, the exit status in a header. */
export function execReply(a: ExecAnswer, status: 200 | 400 = 200): ExecReply {
  return {
    status,
    headers: {
      "Content-Type": "application/json",
      "Knitter-Wire": String(EXEC_WIRE),
      "Knitter-Exit-Code": String(a.exitCode),
    },
    body: a.stdout,
  };
}
