// Builds and starts goref, the read path's Go reference (bench/goref/main.go), for the API
// benchmark and for the test that keeps its answers byte-identical to ours
// (test/interop/goref.test.ts). Built offline in GOPATH mode against Debian's
// golang-golang-x-mod-dev (installed by test/setup/system-packages.sh), as test/interop is:
// no module proxy, no checksum database, no go.mod.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const SRC = new URL('.', import.meta.url).pathname;
const ROOT = join(SRC, '..', '..');
const OUT = join(ROOT, '.scratch', 'goref');
const BINARY = join(OUT, 'goref');
const X_MOD = '/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog';

let building: Promise<string> | undefined;

/** The goref binary, built when missing or older than its sources (once per process). */
export function gorefBinary(): Promise<string> {
  building ??= build();
  return building;
}

async function build(): Promise<string> {
  const newest = Math.max(
    ...readdirSync(SRC)
      .filter((f) => f.endsWith('.go'))
      .map((f) => statSync(join(SRC, f)).mtimeMs),
  );
  if (existsSync(BINARY) && statSync(BINARY).mtimeMs >= newest) return BINARY;
  if (!existsSync(X_MOD))
    throw new Error(`${X_MOD} is missing: install Go and x/mod with bash test/setup/system-packages.sh`);
  mkdirSync(OUT, { recursive: true });
  const env = {
    ...process.env,
    GO111MODULE: 'off',
    GOFLAGS: '',
    GOPROXY: 'off',
    GOTOOLCHAIN: 'local',
    GOPATH: `${join(ROOT, '.scratch', 'gopath')}:/usr/share/gocode`,
    GOCACHE: join(ROOT, '.scratch', 'go-cache'),
  };
  await promisify(execFile)('go', ['build', '-o', BINARY, '.'], { cwd: SRC, env });
  return BINARY;
}

/** A running goref: its URL and process. */
export interface Goref {
  readonly url: string;
  readonly child: ChildProcess;
}

/**
 * Starts goref over `logDir` (a data directory's log/), embedding `checkpointJson` (our
 * server's GET /api/ledger/checkpoint) in entry answers; `wrap` may prefix the command
 * (taskset). Resolves once it listens (it first reads and checks every bundle).
 */
export async function startGoref(
  logDir: string,
  checkpointJsonFile: string,
  wrap: (command: string, args: string[]) => [string, string[]] = (c, a) => [c, a],
): Promise<Goref> {
  const [command, args] = wrap(await gorefBinary(), ['-log', logDir, '-checkpoint-json', checkpointJsonFile]);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`goref exited with ${code} before listening: ${stderr.trim()}`);
  });
  const [line] = (await Promise.race([once(child.stdout!, 'data'), exited])) as [Buffer];
  exited.catch(() => {});
  return { url: (JSON.parse(line.toString().split('\n')[0]!) as { url: string }).url, child };
}
