// Exit codes of the `stele` command (documented in README.md and `stele --help`). No
// imports: every command module and the start of main.ts use these without loading more.
export const EXIT = {
  OK: 0,
  /** A verification failed (FAIL in a report, a bad proof or signature). */
  VERIFY_FAILED: 1,
  /** Usage or configuration error. */
  USAGE: 2,
  /** Network or I/O error. */
  IO: 3,
  /** The log's storage needs an operator: `serve` refused to start, or its sequencer stopped (see `stele log fsck`). */
  LOG_STATE: 4,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error the CLI reports as one line on stderr with its exit code. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    readonly exitCode: ExitCode,
    message: string,
  ) {
    super(message);
  }
}
