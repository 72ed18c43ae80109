// Running the `stele` CLI as a subprocess in a sandbox (HOME and XDG directories in a
// temporary directory), bundling dist/cli first when it is older than the sources, and
// starting a real `stele serve` for end-to-end tests.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, promises as fs, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './vectors.js';
import type { JsonObject } from './json.js';

export const CLI = join(repoRoot, 'dist', 'cli', 'main.js');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, name.name);
    if (name.isDirectory()) newest = Math.max(newest, newestMtime(p));
    else if (name.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

function builtMtime(): number {
  try {
    return statSync(CLI).mtimeMs;
  } catch {
    return 0;
  }
}

const BUNDLER = join(repoRoot, 'packages', 'bin', 'bundle.ts');

const isFresh = () =>
  builtMtime() >
  Math.max(newestMtime(join(repoRoot, 'src')), newestMtime(join(repoRoot, 'cli')), statSync(BUNDLER).mtimeMs);

/**
 * Bundles the CLI into dist/cli (packages/bin/bundle.ts: what `stele` runs) unless it is newer
 * than every source file. Test files running in parallel share one build through a lock directory.
 */
export async function ensureBuilt(): Promise<void> {
  const lock = join(tmpdir(), 'stele-cli-test-build.lock');
  const deadline = Date.now() + 240_000;
  for (;;) {
    if (isFresh()) return;
    try {
      mkdirSync(lock);
      break;
    } catch {
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 200_000) rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error('timed out waiting for another test file to build dist/');
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  try {
    if (isFresh()) return;
    // The bundler ignores types: other work in progress with type errors still builds.
    const r = await run(process.execPath, ['--import', 'tsx', BUNDLER], { cwd: repoRoot, timeoutMs: 170_000 });
    if (r.code !== 0 || !builtMtime()) throw new Error(`bundling the CLI failed: ${r.stderr}`);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
  });
}

/** A sandboxed user: its own HOME, XDG config and data directories, and a work directory. */
export class Sandbox {
  readonly root: string;
  readonly home: string;
  readonly work: string;
  readonly configHome: string;
  readonly dataHome: string;

  constructor(prefix = 'stele-cli-') {
    this.root = mkdtempSync(join(tmpdir(), prefix));
    this.home = join(this.root, 'home');
    this.work = join(this.root, 'work');
    this.configHome = join(this.root, 'xdg-config');
    this.dataHome = join(this.root, 'xdg-data');
    for (const d of [this.home, this.work]) mkdirSync(d, { recursive: true });
  }

  get configFile(): string {
    return join(this.configHome, 'stele', 'ledger.toml');
  }

  get proofsDir(): string {
    return join(this.dataHome, 'stele', 'proofs');
  }

  env(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('STELE_') || k.startsWith('XDG_')) delete env[k];
    Object.assign(
      env,
      { HOME: this.home, XDG_CONFIG_HOME: this.configHome, XDG_DATA_HOME: this.dataHome, NO_COLOR: '1' },
      extra,
    );
    for (const [k, v] of Object.entries(extra)) if (v === undefined) delete env[k];
    return env;
  }

  /** Runs `stele <args>` in the work directory. */
  run(args: string[], extraEnv: Record<string, string | undefined> = {}): Promise<CliRun> {
    return run(process.execPath, [CLI, ...args], { cwd: this.work, env: this.env(extraEnv) });
  }

  /** Runs with --json and parses stdout. */
  async json<T = JsonObject>(
    args: string[],
    extraEnv: Record<string, string | undefined> = {},
  ): Promise<CliRun & { out: T }> {
    const r = await this.run([...args, '--json'], extraEnv);
    let out: T;
    try {
      out = JSON.parse(r.stdout) as T;
    } catch {
      throw new Error(`stele ${args.join(' ')} --json printed no JSON (exit ${r.code}): ${r.stdout}\n${r.stderr}`);
    }
    return { ...r, out };
  }

  file(name: string, content: string | Uint8Array): string {
    const p = join(this.work, name);
    writeFileSync(p, content);
    return p;
  }

  cleanup(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}

export interface ServeInfo {
  readonly url: string;
  readonly origin: string;
  readonly keyId: string;
  readonly vkey: string;
  readonly dataDir: string;
}

export interface RunningServe extends ServeInfo {
  readonly proc: ChildProcess;
  /** What the server has written to stderr so far (its log lines, at warn and above). */
  stderr(): string;
  /** Stops the server with SIGTERM and waits for it to exit. */
  stop(): Promise<void>;
}

/** Starts `stele serve --json` on a free loopback port and waits for its ready line. */
export async function startServe(opts: {
  dataDir: string;
  origin: string;
  batchInterval?: number;
  args?: string[];
  /** STELE_* settings of this start (the test's own STELE_* variables are never passed on). */
  env?: Record<string, string>;
}): Promise<RunningServe> {
  const args = [
    CLI,
    'serve',
    '--data-dir',
    opts.dataDir,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--origin',
    opts.origin,
    '--batch-interval',
    String(opts.batchInterval ?? 10),
    '--log-level',
    'warn',
    '--json',
    ...(opts.args ?? []),
  ];
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('STELE_')) delete env[k];
  Object.assign(env, opts.env);
  const proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += d));
  const info = await new Promise<ServeInfo>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`stele serve did not become ready: ${stderr}`)), 30_000);
    proc.stdout!.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        let doc: ServeInfo | { error: unknown };
        try {
          doc = JSON.parse(buf.slice(0, nl)) as ServeInfo | { error: unknown };
        } catch {
          reject(new Error(`stele serve printed no JSON ready line: ${buf} ${stderr}`));
          return;
        }
        // A failed start prints its error document under --json; the exit handler reports it.
        if (!('error' in doc)) resolve(doc);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`stele serve exited with ${code}: ${stderr}`));
    });
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  return {
    ...info,
    proc,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    },
  };
}

/** Copies a log's signing key into a new data directory (to build a fork signed by the same key). */
export async function copyLogKey(fromDataDir: string, toDataDir: string): Promise<void> {
  await fs.mkdir(join(toDataDir, 'private'), { recursive: true, mode: 0o700 });
  await fs.copyFile(join(fromDataDir, 'private', 'log.key'), join(toDataDir, 'private', 'log.key'));
  await fs.chmod(join(toDataDir, 'private', 'log.key'), 0o600);
}

/** Anchors a digest straight through the API (no client verification). */
export async function postAnchor(
  url: string,
  digest: string,
  extra: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}/api/ledger/anchor`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ digest, ...extra }),
  });
  if (!res.ok) throw new Error(`anchor failed: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}
