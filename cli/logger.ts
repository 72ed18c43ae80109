// The log of every long-running command (serve, control serve, witness serve, mirror serve,
// dev-idp serve): pino JSON lines on stderr, with bearer tokens redacted wherever a request's
// headers are logged. One option, so every command takes the same levels and refuses others.
import { Option } from 'commander';
import type { Logger } from 'pino';

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** `--log-level`: one of pino's levels (commander refuses others as a usage error), default info. */
export const logLevelOption = (): Option =>
  new Option('--log-level <level>', 'level of the JSON log lines on stderr').choices(LEVELS).default('info');

/** Loaded when a server starts, so the other commands do not pay for pino. */
export async function stderrLogger(level: string): Promise<Logger> {
  const { pino } = await import('pino');
  return pino({ level, base: undefined, redact: ['req.headers.authorization'] }, pino.destination(2));
}
