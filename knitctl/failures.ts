/**
 * The manager's and the transport's errors as knitctl says them: what failed, why, and what to
 * do next. One place, so every verb words the same failure the same way.
 */
import { ManagerError, ManagerUnavailableError } from "@knitter/common";
import { CommandFailed } from "./errors.ts";

export function explainManagerError(err: unknown, listHint?: string): unknown {
  if (err instanceof ManagerUnavailableError) {
    return new CommandFailed(
      `${err.message}: check --server / KNITCTL_SERVER (or --stack) and that the manager is running`,
      { cause: err },
    );
  }
  if (!(err instanceof ManagerError)) return err;
  // Validation messages name their field; the manager's start with it already.
  const named = !err.field || err.status !== 400 || err.message.startsWith(`${err.field}:`);
  const what = `${named ? "" : `${err.field}: `}${err.message}`;
  const tag = `(${err.status} ${err.code})`;
  switch (err.status) {
    case 401:
      return new CommandFailed(
        `The manager did not accept the token ${tag}: ${err.message}; check --token / KNITCTL_TOKEN`,
      );
    case 403:
      return new CommandFailed(
        `${what} ${tag}: use a token allowed to do this (an admin token, or the tenant's own)`,
      );
    case 404:
      return new CommandFailed(
        `${what} ${tag}${listHint ? `: "${listHint}" lists what there is` : ""}`,
      );
    case 400:
      return new CommandFailed(`The manager refused the request: ${what} ${tag}`);
    case 429:
      // The client waited out Retry-After a few times already (THROTTLE_RETRY).
      return new CommandFailed(
        `${what} ${tag}: wait a little and run it again, run fewer commands at once with this ` +
          `token, or ask the admin to raise the limit ("fairness" in the manager's configuration)`,
      );
    default:
      return new CommandFailed(`${what} ${tag}`);
  }
}
