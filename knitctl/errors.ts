/**
 * The two ways knitctl fails, with their exit codes: the command line was wrong (2), or the manager
 * or the agent refused or failed (1). Both carry a message that says what to do.
 */

/** The command line cannot be run as given: exit code 2. */
export class UsageError extends Error {
  readonly exitCode = 2;

  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** The manager or the agent refused or failed: exit code 1. */
export class CommandFailed extends Error {
  readonly exitCode = 1;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CommandFailed";
  }
}
