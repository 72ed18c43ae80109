// `stele ledger mirror --follow` as a subprocess beside a running `stele serve`: the local
// mirror keeps up as the log grows (one step behind at most), `ledger audit` passes on it, and
// SIGTERM ends the follower with exit 0; a source that turns into a fork (a second log under
// the same key) stops it with exit 1 and the mirror left as it was.
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, type RunningServe, Sandbox, copyLogKey, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import { digestOf, makeLog } from '../helpers/logs.js';

const ORIGIN = 'follow.test/log';

async function until(what: string, cond: () => boolean, ms = 90_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const sizeOf = (dir: string): number => {
  try {
    return Number(readFileSync(join(dir, 'checkpoint'), 'utf8').split('\n')[1]);
  } catch {
    return -1;
  }
};

describe('stele ledger mirror --follow', () => {
  const sb = new Sandbox('stele-mirror-follow-');
  const mirror = join(sb.root, 'mirror');
  let log: RunningServe;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    await ensureBuilt();
    log = await startServe({ dataDir: join(sb.root, 'log'), origin: ORIGIN });
    await postAnchor(log.url, digestOf('follow', 0));
    const init = await sb.run(['ledger', 'init', '--endpoint', log.url, '--tenant', 't', '--trust-key', log.keyId]);
    expect(init.code, init.stderr).toBe(0);
  }, 180_000);
  afterAll(async () => {
    child?.kill('SIGKILL');
    await log?.stop();
    sb.cleanup();
  });

  const anchor = async (from: number, n: number) => {
    for (let i = from; i < from + n; i += 50)
      await Promise.all(
        Array.from({ length: Math.min(50, from + n - i) }, (_, j) => postAnchor(log.url, digestOf('follow', i + j))),
      );
  };

  it('keeps a local mirror current as the log grows; audit passes on it; SIGTERM ends it', async () => {
    child = spawn(process.execPath, [CLI, 'ledger', 'mirror', mirror, '--follow', '--interval', '50', '--json'], {
      cwd: sb.work,
      env: sb.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child!.once('close', (code) => r(code)));
    await until('the first copy', () => sizeOf(mirror) === 1).catch((e: Error) => {
      throw new Error(`${e.message}: ${stderr}`);
    });
    await anchor(1, 299);
    await until('the mirror to reach 300', () => sizeOf(mirror) === 300);
    await anchor(300, 120);
    await until('the mirror to reach 420', () => sizeOf(mirror) === 420);

    const audit = await sb.json(['ledger', 'audit', mirror]);
    expect(audit.code, audit.stderr).toBe(0);
    expect(JSON.stringify(audit.out)).toContain('recomputed 420 entry hashes');

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const steps = stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { result: string; treeSize: number; status: string });
    expect(steps.every((s) => s.result === 'PASS')).toBe(true);
    expect(steps[0]!.treeSize).toBe(1);
    expect(steps.at(-1)!.treeSize).toBe(420);
    expect(steps.map((s) => s.treeSize)).toEqual([...steps.map((s) => s.treeSize)].sort((a, b) => a - b));
  }, 180_000);

  it('stops with exit 1 when the source turns into a fork, leaving the mirror as it was', async () => {
    const src = join(sb.root, 'src');
    cpSync(join(log.dataDir, 'log'), src, { recursive: true });
    const size = sizeOf(src);
    const forkDir = join(sb.root, 'fork');
    await copyLogKey(log.dataDir, forkDir);
    await makeLog(forkDir, ORIGIN, [size + 80]);
    const copy = join(sb.root, 'mirror2');
    const follower = spawn(
      process.execPath,
      [CLI, 'ledger', 'mirror', copy, '--from', src, '--follow', '--interval', '50'],
      { cwd: sb.work, env: sb.env(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    follower.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => follower.once('close', (code) => r(code)));
    await until('the first copy', () => sizeOf(copy) === size);
    const before = readFileSync(join(copy, 'checkpoint'), 'utf8');
    renameSync(src, `${src}.old`);
    cpSync(join(forkDir, 'log'), `${src}.new`, { recursive: true });
    renameSync(`${src}.new`, src);
    expect(await exited).toBe(1);
    expect(stderr).toMatch(/forked/);
    expect(readFileSync(join(copy, 'checkpoint'), 'utf8')).toBe(before);
  }, 180_000);
});
