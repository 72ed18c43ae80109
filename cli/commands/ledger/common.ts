// Shared plumbing of the ledger commands: configuration and trust loading, output (human
// or --json), the PASS/FAIL report renderer, progress bars (only on a terminal), options.
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import type CliProgress from 'cli-progress';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { LedgerApi, normalizeEndpoint } from '../../../src/client/api.js';
import { type LoadedConfig, loadConfig, proofsDir } from '../../../src/client/config.js';
import { ClientConfigError, UsageError } from '../../../src/client/errors.js';
import { ApiView, type LogView, TilesView } from '../../../src/client/views.js';
import { type Session, trustOf } from '../../../src/client/session.js';
import {
  DirObjectReader,
  FallbackObjectReader,
  HttpObjectReader,
  type LogObjectSource,
  isUrl,
  openObjectSource,
} from '../../../src/client/objects.js';
import { STDIN } from '../../../src/client/hashfile.js';
import { ProofStore } from '../../../src/client/proofs.js';
import type { Report } from '../../../src/client/rules.js';
import { EXIT, type ExitCode, describeError } from '../../errors.js';
import { asInvoked } from '../../invocation.js';
import { isQuiet } from '../../verbosity.js';

export interface CommonOptions {
  config?: string;
  json?: boolean;
}

export const EXIT_CODES_HELP = `
Exit codes:
  0  success: every check that ran passed (a PASS that names checks "not checked",
     e.g. rule 2 with --offline, or "not witnessed", also exits 0; read the Result line)
  1  a verification failed (FAIL in the report, bad proof or signature)
  2  usage or configuration error
  3  network or I/O error`;

const ENV_HELP = `
Configuration: --config <path>, else $XDG_CONFIG_HOME/stele/ledger.toml, else
~/.config/stele/ledger.toml. STELE_LEDGER_ENDPOINT and STELE_LEDGER_TENANT override the
file's endpoint and tenant. Proof bundles: $XDG_DATA_HOME/stele/proofs (default
~/.local/share/stele/proofs). STELE_LEDGER_TOKEN is sent as a bearer token on anchors
(a log in production mode); STELE_HTTP_TIMEOUT_MS sets the per-request timeout (default
30000).
`;

/** Adds --config and --json and the help epilogue. */
export function common(cmd: Command, { config = true } = {}): Command {
  if (config) cmd.option('--config <path>', 'configuration file (default ~/.config/stele/ledger.toml)');
  return cmd
    .option('--json', 'print one JSON document on stdout instead of text')
    .addHelpText('after', `${config ? ENV_HELP : ''}${EXIT_CODES_HELP}`);
}

export function intArg(name: string, min = 0) {
  return (v: string): number => {
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v)) || Number(v) < min)
      throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return Number(v);
  };
}

export const tilesOption = () =>
  new Option(
    '--tiles [url|dir]',
    'verify from the tiles (a URL or a local mirror) instead of the JSON API; without a value, the configured tiles location or the endpoint',
  );

// ---- session ----------------------------------------------------------------------------

export interface Opened {
  readonly loaded: LoadedConfig;
  readonly session: Session;
  readonly api: LedgerApi | null;
}

/** Loads the configuration and pinned trust; `online` requires an endpoint. */
export async function openSession(
  opts: CommonOptions,
  mode: {
    online?: boolean;
    requireOnline?: boolean;
    /** Without an endpoint, the configured tiles will do (a configuration written offline). */
    tilesFallback?: boolean;
  } = {},
): Promise<Opened> {
  const online = mode.online ?? true;
  const requireOnline = mode.requireOnline ?? online;
  const loaded = await loadConfig(opts.config);
  let api: LedgerApi | null = null;
  const endpoint = loaded.effective.endpoint;
  if (online && endpoint) {
    try {
      api = new LedgerApi(endpoint, process.env.STELE_LEDGER_TOKEN ? { token: process.env.STELE_LEDGER_TOKEN } : {});
    } catch (e) {
      throw new ClientConfigError(
        `${loaded.overridden.endpoint ? 'STELE_LEDGER_ENDPOINT' : `${loaded.path}: ledger.endpoint`}: ${(e as Error).message}`,
      );
    }
  } else if (requireOnline && !(mode.tilesFallback && loaded.effective.tiles)) {
    throw new ClientConfigError(`no endpoint: set [ledger] endpoint in ${loaded.path} or STELE_LEDGER_ENDPOINT`);
  }
  const trust = await trustOf(loaded.effective, api ?? undefined);
  // Tiles beside the API (to bind entries to their hashes): [ledger] tiles, else the endpoint.
  // A configured mirror may lag behind the log: what it lacks is read from the endpoint.
  // A command of a session reads a few objects: a local copy is read with blocking calls.
  const reader = (at: string) =>
    isUrl(at) ? new HttpObjectReader(at) : new DirObjectReader(resolve(at), { blocking: true });
  const configured = loaded.effective.tiles;
  const tiles =
    configured && api && configured !== api.endpoint
      ? new FallbackObjectReader(reader(configured), reader(api.endpoint))
      : configured
        ? reader(configured)
        : api
          ? reader(api.endpoint)
          : undefined;
  return {
    loaded,
    api,
    session: {
      config: loaded,
      trust,
      proofs: new ProofStore(proofsDir()),
      ...(tiles ? { tiles } : {}),
      onNotice: (line) => void process.stderr.write(`stele: ${line}\n`),
    },
  };
}

/** The source for --tiles: the given value, else [ledger] tiles, else the endpoint. */
export async function tilesSource(value: string | true, loaded: LoadedConfig): Promise<LogObjectSource> {
  const where = value === true ? (loaded.effective.tiles ?? loaded.effective.endpoint) : value;
  if (!where) throw new UsageError('--tiles needs a URL or directory (none configured)');
  return openObjectSource(where === loaded.effective.endpoint ? normalizeEndpoint(where) : where, { blocking: true });
}

/** Where a command reads the log: the tiles (--tiles, proofs computed here) or the JSON API. */
export async function logView(
  tiles: string | true | undefined,
  loaded: LoadedConfig,
  api: LedgerApi | null,
): Promise<LogView> {
  // No endpoint but a configured tiles location (an offline `ledger init`): read the tiles.
  const where = tiles ?? (api ? undefined : loaded.effective.tiles);
  if (where) {
    const src = await tilesSource(where, loaded);
    // The API, when there is one, proves a copy older than the pin consistent with it (rule 2).
    return new TilesView(src, src.describe(), api ? new ApiView(api).prove : null);
  }
  if (!api)
    throw new ClientConfigError(
      `no endpoint: set [ledger] endpoint in ${loaded.path} or STELE_LEDGER_ENDPOINT, or use --tiles`,
    );
  return new ApiView(api);
}

// ---- output -----------------------------------------------------------------------------

const color = (): boolean => Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
const paint = (code: number, s: string) => (color() ? `\u001b[${code}m${s}\u001b[0m` : s);
export const green = (s: string) => paint(32, s);
export const red = (s: string) => paint(31, s);
export const dim = (s: string) => paint(2, s);
export const bold = (s: string) => paint(1, s);

/** One line of human output on stdout (silenced by -q). */
export function out(text = ''): void {
  if (!isQuiet()) process.stdout.write(`${asInvoked(text)}\n`);
}

let emitted = false;

/** The command's one JSON document on stdout. */
export function emitJson(value: unknown): void {
  emitted = true;
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** True once the command printed its JSON document: a failure after it must not print a second one. */
export function emittedJson(): boolean {
  return emitted;
}

/**
 * `result` stays PASS/FAIL (FAIL only when a check that ran failed); `verdict` qualifies a
 * PASS ("PASS (rule 2 not checked: offline)", "PASS (not witnessed)"); `notChecked` lists
 * the SKIPped rules and `complete` is true only when none was skipped.
 */
export function reportJson(r: Report) {
  const notChecked = r.notChecked;
  return {
    result: r.result,
    verdict: r.verdict,
    witnessed: !r.unwitnessed,
    complete: notChecked.length === 0,
    notChecked,
    checks: r.checks,
  };
}

export function renderReport(r: Report): string {
  const badge = (s: string) => (s === 'PASS' ? green('PASS') : s === 'FAIL' ? red('FAIL') : dim('SKIP'));
  const lines = r.checks.map((c) => `  ${badge(c.status)}  ${c.rule}. ${c.name}: ${c.detail}`);
  // A SKIP is never counted as passed: the result line names what was not checked.
  const skipped = r.notChecked.map((c) => `rule ${c.rule} not checked: ${c.reason}`);
  if (r.failed) lines.push(`Result: ${red('FAIL')} — not verified; do not trust it`);
  else if (skipped.length) {
    lines.push(
      `Result: ${green('PASS')} (${[...skipped, ...(r.unwitnessed ? ['not witnessed'] : [])].join('; ')}) — the checks that ran passed; not done: ${r.notChecked.map((c) => `rule ${c.rule}`).join(', ')}`,
    );
  } else if (r.unwitnessed) lines.push(`Result: ${green('PASS')} (not witnessed)`);
  else lines.push(`Result: ${green('PASS')} — verified`);
  return lines.join('\n');
}

/** The labels an entry records (artifact, scope, tenant), for the text reports. */
export function labelsLine(e: Readonly<Record<string, unknown>>): string {
  const shown = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : '(none)');
  return `  labels      artifact ${shown(e.artifact)}, scope ${shown(e.scope)}, tenant ${shown(e.tenant)}`;
}

/** A report in a few words: its verdict, or the first failed check. */
export function verdictLine(r: Report): string {
  const failed = r.checks.find((c) => c.status === 'FAIL' && c.rule !== 6);
  return failed ? `FAIL: rule ${failed.rule} (${failed.name}): ${failed.detail}` : r.verdict;
}

/** Sets the exit code from a report (1 on FAIL). */
export function exitFor(r: Report): void {
  if (r.failed) process.exitCode = EXIT.VERIFY_FAILED;
}

export const short = (h: string | undefined, n = 16) => (h ? `${h.slice(0, n)}…` : '');

export function fmtBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(1)} ${units[u]}`;
}

// ---- progress -----------------------------------------------------------------------------

export interface Progress {
  update(done: number, total: number): void;
  stop(): void;
}

const NO_PROGRESS: Progress = { update() {}, stop() {} };

/** A progress bar on stderr, shown only when stderr is a terminal and output is not JSON. */
export function progress(label: string, json: boolean | undefined, unit = ''): Progress {
  if (json || isQuiet() || !process.stderr.isTTY || process.env.STELE_NO_PROGRESS) return NO_PROGRESS;
  // Loaded here, on a terminal only: a run whose output is piped never pays for it.
  const cliProgress = createRequire(import.meta.url)('cli-progress') as typeof CliProgress;
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: `${label} [{bar}] {percentage}% | {value}/{total}${unit ? ` ${unit}` : ''} | {duration_formatted} elapsed, {eta_formatted} left`,
      hideCursor: true,
      clearOnComplete: true,
      etaBuffer: 50,
      fps: 10,
    },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  // Ctrl-C while the bar is drawn: end its line, say so, and exit as a shell expects (128 + 2).
  const interrupted = () => {
    bar.stop();
    process.stderr.write(`\n${label}: interrupted\n`);
    process.exit(130);
  };
  return {
    update(done, total) {
      if (!started) {
        bar.start(total, done);
        started = true;
        process.once('SIGINT', interrupted);
      } else {
        bar.setTotal(total);
        bar.update(done);
      }
    },
    stop() {
      if (!started) return;
      process.off('SIGINT', interrupted);
      bar.stop();
    },
  };
}

/** Progress of a search through the record bundles, in entries (shown on large logs only). */
export function scanProgress(json: boolean | undefined) {
  const p = progress('searching the records', json, 'entries');
  return {
    onScanProgress: (done: number, total: number) => {
      if (total >= 65_536) p.update(done, total);
    },
    stop: () => p.stop(),
  };
}

/** Progress of hashing a file, in MiB. */
export function hashProgress(file: string, json: boolean | undefined) {
  const p = progress(`hashing ${file}`, json, 'MiB');
  return {
    onHashProgress: (bytes: number, total: number) => {
      if (total >= 64 << 20) p.update(Math.floor(bytes / 2 ** 20), Math.ceil(total / 2 ** 20));
    },
    stop: () => p.stop(),
  };
}

// ---- several files ------------------------------------------------------------------------

/** One file's outcome in a command given several: its result, or the error that stopped it. */
export interface FileOutcome<R> {
  readonly file: string;
  readonly result?: R;
  readonly error?: { code: ExitCode; message: string };
}

/** The file names of a command: `-` (standard input) at most once, and never a label meant for one file. */
export function checkFiles(files: readonly string[], oneFileOptions: Record<string, unknown> = {}): void {
  if (files.filter((f) => f === STDIN).length > 1) throw new UsageError('standard input (-) can be read only once');
  if (files.length > 1) {
    const given = Object.entries(oneFileOptions).find(([, v]) => v !== undefined);
    if (given) throw new UsageError(`${given[0]} applies to one file: give one file with it`);
  }
}

/**
 * Runs `run` on each file in turn; with several files an error ends only that file's run
 * (it is reported with its exit code), with one it is thrown as usual.
 */
export async function eachFile<R>(
  files: readonly string[],
  run: (file: string) => Promise<R>,
): Promise<FileOutcome<R>[]> {
  const outcomes: FileOutcome<R>[] = [];
  for (const file of files) {
    try {
      outcomes.push({ file, result: await run(file) });
    } catch (e) {
      if (files.length === 1) throw e;
      const d = describeError(e);
      outcomes.push({ file, error: { code: d.code, message: asInvoked(d.message) } });
    }
  }
  return outcomes;
}

/** The exit code of several files: 1 if any verification failed (never hidden), else the highest. */
export function worstExit(codes: readonly number[]): number {
  return codes.includes(EXIT.VERIFY_FAILED) ? EXIT.VERIFY_FAILED : Math.max(EXIT.OK, ...codes);
}

/** How a file is named in output: `-` is standard input. */
export const fileLabel = (file: string): string => (file === STDIN ? 'standard input' : file);

/**
 * Prints several files' outcomes, one line each (`PASS  file  detail`), and returns the
 * exit code; under --json one document with every file's.
 */
export function reportFiles<R extends { report: Report }>(
  outcomes: readonly FileOutcome<R>[],
  json: boolean | undefined,
  asJson: (r: R) => object,
  line: (r: R) => string,
): number {
  const code = worstExit(
    outcomes.map((o) => (o.error ? o.error.code : o.result!.report.failed ? EXIT.VERIFY_FAILED : EXIT.OK)),
  );
  if (json) {
    emitJson({
      result: code === EXIT.OK ? 'PASS' : code === EXIT.VERIFY_FAILED ? 'FAIL' : 'ERROR',
      exitCode: code,
      files: outcomes.map((o) =>
        o.error ? { file: o.file, error: { message: o.error.message, exitCode: o.error.code } } : asJson(o.result!),
      ),
    });
  } else {
    for (const o of outcomes) {
      if (o.error) out(`${red('ERROR')} ${fileLabel(o.file)}: ${o.error.message}`);
      else out(`${o.result!.report.failed ? red('FAIL') : green('PASS')}  ${fileLabel(o.file)}  ${line(o.result!)}`);
    }
  }
  return code;
}
