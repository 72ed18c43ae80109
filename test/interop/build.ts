// Builds test/interop/ (steleinterop, Go) into .scratch/interop/ once per process, offline:
// no module proxy, golang.org/x/mod from Debian's golang-golang-x-mod-dev (see go.mod).
// Without Go or x/mod it throws, naming the one command that installs them: the
// interoperability check fails rather than skips.
import { spawn } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../helpers/vectors.js';

export const interopSrc = path.join(repoRoot, 'test', 'interop');
const outDir = path.join(repoRoot, '.scratch', 'interop');
export const interopBin = path.join(outDir, 'steleinterop');
const X_MOD = '/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog';
const INSTALL_HINT = 'install Go and x/mod with: bash test/setup/system-packages.sh (as root, or with sudo)';

export interface ProcResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function runProc(
  cmd: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<ProcResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? repoRoot,
      env: opts.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const exists = (p: string, mode = constants.F_OK) =>
  fs.access(p, mode).then(
    () => true,
    () => false,
  );

async function newestSourceMtime(): Promise<number> {
  let newest = 0;
  for (const name of await fs.readdir(interopSrc)) {
    if (name.endsWith('.go') || name === 'go.mod')
      newest = Math.max(newest, (await fs.stat(path.join(interopSrc, name))).mtimeMs);
  }
  return newest;
}

async function build(): Promise<string> {
  if ((await exists(interopBin, constants.X_OK)) && (await fs.stat(interopBin)).mtimeMs >= (await newestSourceMtime()))
    return interopBin;
  if (!(await exists(X_MOD)))
    throw new Error(`golang.org/x/mod is not installed (${X_MOD} is missing): ${INSTALL_HINT}`);
  await fs.mkdir(outDir, { recursive: true });
  // Offline and self-contained: no proxy, no checksum database, no toolchain download, and
  // the build cache under .scratch rather than the user's home.
  const env = {
    ...process.env,
    GOPROXY: 'off',
    GOSUMDB: 'off',
    GOFLAGS: '-mod=mod',
    GOTOOLCHAIN: 'local',
    GOCACHE: path.join(repoRoot, '.scratch', 'go-cache'),
    GOPATH: path.join(repoRoot, '.scratch', 'gopath'),
  };
  let built: ProcResult;
  try {
    built = await runProc('go', ['build', '-o', interopBin, '.'], { env, cwd: interopSrc });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error(`the go command is not installed: ${INSTALL_HINT}`);
    throw e;
  }
  if (built.code !== 0)
    throw new Error(`go build of test/interop failed (exit ${built.code}):\n${built.stdout}${built.stderr}`);
  return interopBin;
}

let building: Promise<string> | undefined;

/** Path of the built steleinterop binary (built at most once per process). */
export function steleinteropBinary(): Promise<string> {
  building ??= build();
  return building;
}

export interface InteropResult extends ProcResult {
  readonly passed: number;
  readonly failed: number;
  readonly failures: string[];
}

/** Runs steleinterop and parses its closing line `steleinterop: N passed, M failed`. */
export async function runSteleinterop(args: readonly string[]): Promise<InteropResult> {
  const r = await runProc(await steleinteropBinary(), args);
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
  const m = /^steleinterop: (\d+) passed, (\d+) failed$/.exec(lines[lines.length - 1] ?? '');
  return {
    ...r,
    passed: m ? Number(m[1]) : -1,
    failed: m ? Number(m[2]) : -1,
    failures: lines.filter((l) => l.startsWith('FAIL')),
  };
}
