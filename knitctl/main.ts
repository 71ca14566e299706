/**
 * knitctl's entry: parse the command line, resolve the settings, run the verb, and turn any
 * failure into a message on stderr and an exit code (0 done, 1 failed, 2 usage).
 */
import { parseCommandLine } from "./args.ts";
import { attach, detach } from "./attach.ts";
import { flows } from "./flows.ts";
import { trace } from "./trace.ts";
import { capture } from "./capture.ts";
import { verify } from "./verify.ts";
import { history } from "./history.ts";
import { type Env, resolveSettings } from "./config.ts";
import { UsageError } from "./errors.ts";
import { mainHelp, verbHelp, VERSION } from "./help.ts";
import { activate, bind, create, get, type Io, remove, unbind, update, usage } from "./verbs.ts";

const VERBS = [
  "get",
  "create",
  "update",
  "delete",
  "usage",
  "attach",
  "detach",
  "flows",
  "trace",
  "capture",
  "verify",
  "history",
  "activate",
  "bind",
  "unbind",
  "version",
  "help",
];

export interface MainOptions {
  env?: Env;
  io?: Io;
}

const stdio: Io = {
  out: (text) => void Deno.stdout.writeSync(new TextEncoder().encode(text)),
  err: (text) => void Deno.stderr.writeSync(new TextEncoder().encode(text)),
};

/** Runs one command line; answers the exit code. */
export async function main(argv: string[], opts: MainOptions = {}): Promise<number> {
  const env = opts.env ?? ((name: string) => Deno.env.get(name));
  const io = opts.io ?? stdio;
  try {
    const line = parseCommandLine(argv);
    const verb = line.verb;
    if (verb === undefined || verb === "help") {
      const about = line.args[0];
      if (about !== undefined && !VERBS.includes(about)) throw unknownVerb(about);
      io.out(about ? verbHelp(about) : mainHelp());
      return line.flags.help || verb === "help" ? 0 : 2;
    }
    if (!VERBS.includes(verb)) throw unknownVerb(verb);
    if (line.flags.help) {
      io.out(verbHelp(verb));
      return 0;
    }
    const settings = await resolveSettings(line.flags, env);
    const c = { line, settings, io, env };
    switch (verb) {
      case "get":
        await get(c);
        break;
      case "create":
        await create(c);
        break;
      case "update":
        await update(c);
        break;
      case "delete":
        await remove(c);
        break;
      case "usage":
        await usage(c);
        break;
      case "attach":
        await attach(c);
        break;
      case "detach":
        await detach(c);
        break;
      case "flows":
        await flows(c);
        break;
      case "trace":
        await trace(c);
        break;
      case "capture":
        await capture(c);
        break;
      case "verify":
        await verify(c);
        break;
      case "history":
        await history(c);
        break;
      case "activate":
        await activate(c);
        break;
      case "bind":
        await bind(c);
        break;
      case "unbind":
        await unbind(c);
        break;
      case "version":
        io.out(settings.output === "json" ? `{"version":"${VERSION}"}\n` : `knitctl ${VERSION}\n`);
        break;
    }
    return 0;
  } catch (err) {
    const code = (err as { exitCode?: number }).exitCode;
    if ((err as { quiet?: boolean }).quiet) return code ?? 1;
    io.err(`Error: ${(err as Error).message}\n`);
    if (code === undefined) io.err(`${(err as Error).stack ?? ""}\n`);
    return code ?? 1;
  }
}

function unknownVerb(verb: string): UsageError {
  return new UsageError(`Unknown verb "${verb}": use one of ${VERBS.join(", ")}`);
}

if (import.meta.main) Deno.exit(await main(Deno.args));
