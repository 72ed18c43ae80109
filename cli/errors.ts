// How a failure of the `stele` command is told: its exit code (cli/exit.ts) and one line.
import { ClientError, type ClientErrorKind } from '../src/client/errors.js';
import { LogStateError } from '../src/sequencer/contract.js';
import { fsReason } from '../src/store/files.js';
import { UnreachableError } from '../src/store/unreachable.js';
import { CliError, EXIT, type ExitCode } from './exit.js';

export { CliError, EXIT, type ExitCode } from './exit.js';

/** What a failed file-system call was doing, for its message. */
const FS_CALLS: Readonly<Record<string, string>> = {
  open: 'open',
  read: 'read',
  write: 'write',
  mkdir: 'create the directory',
  rename: 'rename',
  link: 'link',
  unlink: 'remove',
  rmdir: 'remove',
  scandir: 'list',
  stat: 'read',
  lstat: 'read',
  fsync: 'sync',
};

/** Maps any thrown value to an exit code and a one-line message (never a stack trace). */
export function describeError(e: unknown): { code: ExitCode; message: string } {
  if (e instanceof CliError) return { code: e.exitCode, message: e.message };
  if (e instanceof ClientError) return { code: CLIENT_EXIT[e.kind], message: oneLine(e.message) };
  // A storage endpoint, KMS, identity provider or witness: what, its setting and why (src/store/unreachable.ts).
  if (e instanceof UnreachableError) return { code: EXIT.IO, message: oneLine(e.message) };
  const err = e as NodeJS.ErrnoException;
  if (e instanceof LogStateError) return { code: EXIT.LOG_STATE, message: oneLine(e.message) };
  if (err?.code === 'ENOSPC')
    return {
      code: EXIT.IO,
      message: `no space left on the device${err.path ? ` holding ${err.path}` : ''}: free space on that filesystem and start again (nothing acknowledged is lost)`,
    };
  const io = [
    'ENOENT',
    'EACCES',
    'EPERM',
    'ECONNREFUSED',
    'ECONNRESET',
    'ETIMEDOUT',
    'ENOTFOUND',
    'EAI_AGAIN',
    'EISDIR',
    'ENOSPC',
  ];
  // A file-system call's error names its call and path: said in words, not `EACCES: permission denied, mkdir '…'`.
  if (err?.syscall && err.path !== undefined)
    return { code: EXIT.IO, message: `cannot ${FS_CALLS[err.syscall] ?? err.syscall} ${err.path}: ${fsReason(err)}` };
  if (err && typeof err.code === 'string' && io.includes(err.code)) return { code: EXIT.IO, message: err.message };
  if (err?.name === 'TypeError' && /fetch failed/.test(err.message)) {
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    return { code: EXIT.IO, message: `network error: ${cause ?? err.message}` };
  }
  const msg = err?.message ?? String(e);
  return { code: EXIT.IO, message: msg.split('\n')[0] ?? msg };
}

/** The name of each exit code in a JSON error document. */
const EXIT_NAME: Record<ExitCode, string> = {
  [EXIT.OK]: 'ok',
  [EXIT.VERIFY_FAILED]: 'verification_failed',
  [EXIT.USAGE]: 'usage',
  [EXIT.IO]: 'io',
  [EXIT.LOG_STATE]: 'log_state',
};

/** `{"error":{"code","message","exitCode"}}` and a newline: a failure under --json. */
export function errorJson(e: { code: ExitCode; message: string }): string {
  return `${JSON.stringify({ error: { code: EXIT_NAME[e.code], message: e.message, exitCode: e.code } })}\n`;
}

/** Exit code of each kind of ledger-client error (src/client/errors.ts). */
const CLIENT_EXIT: Record<ClientErrorKind, ExitCode> = {
  verify: EXIT.VERIFY_FAILED,
  usage: EXIT.USAGE,
  config: EXIT.USAGE,
  network: EXIT.IO,
  io: EXIT.IO,
};

function oneLine(s: string): string {
  return s.split('\n')[0] ?? s;
}

/** A key in an HSM that cannot be used: configuration (exit 2) unless the token itself failed (exit 3). */
export function hsmError(e: unknown): CliError | null {
  if ((e as Error)?.name !== 'Pkcs11KeyError') return null;
  const kind = (e as { kind?: string }).kind;
  return new CliError(kind === 'device' ? EXIT.IO : EXIT.USAGE, `HSM: ${(e as Error).message}`);
}
