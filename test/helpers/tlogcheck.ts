// The Go reference check of a log (Go's golang.org/x/mod/sumdb/tlog and note) for the tests
// that read a log as any C2SP client would. It is ../shared/tlogcheck where that checker is
// at hand, else the repository's own test/interop (steleinterop), so a clone with nothing
// beside it runs them too (issue 33):
//
//   1. $TLOGCHECK_BIN, if set (CI builds it first and sets this); it must exist.
//   2. <repo>/.scratch/tlogbin/tlogcheck, if present and newer than the checker's sources.
//   3. ../shared/tlogcheck/build.sh with TLOGCHECK_OUT=<repo>/.scratch/tlogbin, if present
//      (it apt-installs Go and x/mod if they are missing).
//   4. Otherwise steleinterop (test/interop/build.ts), given tlogcheck's flags translated:
//      -src is its -log, -old-checkpoint its -old; it always reads every entry and tile
//      (-full), and checks no witness cosignatures (-witness is dropped, with an INFO line).
// Any failure to build throws: the check fails rather than skips without Go.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** In CI and locally the shared folder sits beside the repository. */
export const sharedDir = path.resolve(repoRoot, '../shared');
const outDir = path.join(repoRoot, '.scratch', 'tlogbin');

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function run(
  cmd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  cwd = repoRoot,
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    await fs.access(file, constants.X_OK);
    return (await fs.stat(file)).isFile();
  } catch {
    return false;
  }
}

/** Newest modification time of the checker's Go sources (0 if the folder is absent). */
async function newestSource(dir: string): Promise<number> {
  let newest = 0;
  async function walk(d: string): Promise<void> {
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'bin') await walk(p);
      } else if (e.name.endsWith('.go') || e.name === 'go.mod') {
        newest = Math.max(newest, (await fs.stat(p)).mtimeMs);
      }
    }
  }
  await walk(dir);
  return newest;
}

async function locate(): Promise<string> {
  const fromEnv = process.env.TLOGCHECK_BIN;
  if (fromEnv) {
    if (!(await isExecutable(fromEnv))) throw new Error(`TLOGCHECK_BIN=${fromEnv} is not an executable file`);
    return fromEnv;
  }
  const bin = path.join(outDir, 'tlogcheck');
  const src = path.join(sharedDir, 'tlogcheck');
  const script = path.join(src, 'build.sh');
  const haveScript = await fs.access(script).then(
    () => true,
    () => false,
  );
  if (await isExecutable(bin)) {
    if (!haveScript || (await fs.stat(bin)).mtimeMs >= (await newestSource(src))) return bin;
  }
  if (!haveScript)
    throw new Error(`tlogcheck is not built and ${script} is missing (is ../shared beside the repository?)`);
  const built = await run('bash', [script], { ...process.env, TLOGCHECK_OUT: outDir }, src);
  if (built.code !== 0 || !(await isExecutable(bin))) {
    throw new Error(`building tlogcheck failed (exit ${built.code}):\n${built.stdout}\n${built.stderr}`);
  }
  return bin;
}

let located: Promise<string> | undefined;

/** Path of the checker runTlogcheck runs (tlogcheck, else steleinterop), built once per process if needed. */
export function tlogcheckBinary(): Promise<string> {
  located ??= haveTlogcheck() ? locate() : import('../interop/build.js').then((m) => m.steleinteropBinary());
  return located;
}

export interface TlogcheckResult extends RunResult {
  readonly passed: number;
  readonly failed: number;
  /** The `FAIL` lines, for assertion messages. */
  readonly failures: string[];
}

/** True when ../shared/tlogcheck (or $TLOGCHECK_BIN) is at hand; else steleinterop checks. */
export function haveTlogcheck(): boolean {
  if (process.env.TLOGCHECK_BIN) return true;
  return existsSync(path.join(sharedDir, 'tlogcheck', 'build.sh')) || existsSync(path.join(outDir, 'tlogcheck'));
}

/**
 * Runs tlogcheck with `args` (steleinterop where tlogcheck is not at hand); parses its
 * summary line `tlogcheck: N passed, M failed`.
 */
export async function runTlogcheck(args: readonly string[]): Promise<TlogcheckResult> {
  if (!haveTlogcheck()) return runSteleinteropAsTlogcheck(args);
  const result = await run(await tlogcheckBinary(), args);
  const lines = result.stdout.split('\n').filter((l) => l.trim() !== '');
  const m = /^tlogcheck: (\d+) passed, (\d+) failed$/.exec(lines[lines.length - 1] ?? '');
  return {
    ...result,
    passed: m ? Number(m[1]) : -1,
    failed: m ? Number(m[2]) : -1,
    failures: lines.filter((l) => l.startsWith('FAIL')),
  };
}

/** tlogcheck flags that take a value, and steleinterop's name for each (null: dropped). */
const TRANSLATED: Readonly<Record<string, string | null>> = {
  '-src': '-log',
  '-vkey': '-vkey',
  '-origin': '-origin',
  '-api': '-api',
  '-samples': '-samples',
  '-old-size': '-old-size',
  '-old-checkpoint': '-old',
  '-seed': '-seed',
  '-entry-url-template': null, // steleinterop asks the API by leaf itself
  '-full-limit': null,
  '-witness': null,
};

async function runSteleinteropAsTlogcheck(args: readonly string[]): Promise<TlogcheckResult> {
  const { runSteleinterop } = await import('../interop/build.js');
  const out: string[] = [];
  let witnesses = 0;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith('-full=') || a === '-full' || a === '-q' || a === '-v') continue; // always full; never quiet
    if (!(a in TRANSLATED)) throw new Error(`runTlogcheck: no steleinterop equivalent for ${a}`);
    const to = TRANSLATED[a];
    const value = args[++i];
    if (value === undefined) throw new Error(`runTlogcheck: ${a} needs a value`);
    if (a === '-witness') witnesses++;
    if (to) out.push(to, value);
  }
  const r = await runSteleinterop(out);
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
  // tlogcheck counts each proved leaf as a check; steleinterop says "N leaves proved" once.
  let passed = r.passed;
  for (const l of lines) {
    const m = /^PASS inclusion: (\d+) leaves proved/.exec(l);
    if (m) passed += Number(m[1]) - 1;
  }
  const note = witnesses > 0 ? `INFO ${witnesses} witness cosignature(s) not checked: steleinterop checks none\n` : '';
  return { ...r, stdout: note + r.stdout, passed: r.passed < 0 ? -1 : passed };
}
