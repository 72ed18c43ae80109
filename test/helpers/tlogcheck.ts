// Locates (or builds) the Go tlogcheck binary of ../shared/tlogcheck and runs it.
//
//   1. $TLOGCHECK_BIN, if set (CI builds it first and sets this); it must exist.
//   2. <repo>/.scratch/tlogbin/tlogcheck, if present and newer than the checker's sources.
//   3. Otherwise ../shared/tlogcheck/build.sh with TLOGCHECK_OUT=<repo>/.scratch/tlogbin
//      (it apt-installs Go and x/mod if they are missing).
// Any failure throws: the interoperability test fails rather than skips without Go.
import { spawn } from 'node:child_process';
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

/** Path of a working tlogcheck binary, building it once per process if needed. */
export function tlogcheckBinary(): Promise<string> {
  located ??= locate();
  return located;
}

export interface TlogcheckResult extends RunResult {
  readonly passed: number;
  readonly failed: number;
  /** The `FAIL` lines, for assertion messages. */
  readonly failures: string[];
}

/** Runs tlogcheck with `args`; parses its summary line `tlogcheck: N passed, M failed`. */
export async function runTlogcheck(args: readonly string[]): Promise<TlogcheckResult> {
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
