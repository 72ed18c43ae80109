// Crash safety (docs/design.md §3.2, §3.3): a real sequencer (fsync on) in a child process is
// SIGKILLed at random moments under continuous load and restarted, several times. Then:
// every anchor that was ever acknowledged is in the log at its acknowledged leaf index with
// the same entry hash; the entry chain and the root verify from scratch; the checkpoint
// signature verifies; no tile or bundle file was ever rewritten with different bytes; after
// every kill the public checkpoint is fully backed by verifiable tiles; and every checkpoint
// seen between rounds belongs to the final tree (no fork, no rollback).
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { SeedSigner } from '../../src/core/note.js';
import { auditLogDir, listTileFiles, verifyCheckpointNote, writeTestKey } from '../helpers/audit.js';

const ORIGIN = 'test.example/crash'; // as in test/helpers/crash-child.ts
const SEED_FILL = 7;
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const childScript = path.join(repoRoot, 'test', 'helpers', 'crash-child.ts');
const ROUNDS = 10;

interface Ack {
  readonly entryHash: string;
  readonly digest: string;
  readonly round: number;
}

interface Run {
  readonly child: ChildProcess;
  readonly ready: Promise<number>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly stderr: () => string;
  readonly lines: string[];
}

/** Children still running, killed when the suite ends however it ends. */
const live = new Set<ChildProcess>();

function startChild(dataDir: string, onLine: (line: string) => void, args: string[] = []): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', childScript, dataDir, ...args], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  child.on('exit', () => live.delete(child));
  let err = '';
  let buf = '';
  const lines: string[] = [];
  let resolveReady!: (n: number) => void;
  let rejectReady!: (e: Error) => void;
  const ready = new Promise<number>((res, rej) => {
    resolveReady = res;
    rejectReady = rej;
  });
  ready.catch(() => undefined);
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.startsWith('ready ')) resolveReady(Number(line.slice(6)));
      else if (!line.startsWith('ack ')) lines.push(line);
      onLine(line);
    }
  });
  // A partial last line (cut by the kill) is ignored: the child never finished saying it.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => {
    child.on('close', (code, signal) => {
      rejectReady(new Error(`child exited (${code ?? signal}) before it was ready: ${err}`));
      res({ code, signal });
    });
  });
  return { child, ready, exited, stderr: () => err, lines };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `p`, or a rejection after `ms` (so a wedged child fails the test instead of hanging it). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
const randomInt = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

describe('crash safety under SIGKILL', () => {
  let dataDir: string;
  afterAll(async () => {
    for (const child of live) child.kill('SIGKILL');
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('keeps every acknowledged anchor, never rewrites a tile, and verifies from scratch', async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'stele-crash-'));
    await writeTestKey(dataDir, ORIGIN, SEED_FILL);
    const publicKey = new SeedSigner(ORIGIN, new Uint8Array(32).fill(SEED_FILL)).publicKey;
    const logDir = path.join(dataDir, 'log');

    const acked = new Map<number, Ack>();
    const ackedRounds = new Set<number>();
    const tileBytes = new Map<string, string>(); // path → sha256 of the bytes first seen
    const roundCheckpoints: string[] = [];
    const problems: string[] = [];
    let lastLockSize = 0;
    let afterCommit = 0; // rounds killed between a lock swap and its public checkpoint
    const progress = (line: string) => process.stderr.write(`[crash] ${line}\n`);

    const onAck = (round: number) => (line: string) => {
      const m = /^ack (\d+) ([0-9a-f]{64}) ([0-9a-f]{64})$/.exec(line);
      if (!m) return;
      const seq = Number(m[1]);
      const had = acked.get(seq);
      if (had && (had.entryHash !== m[2] || had.digest !== m[3])) {
        problems.push(
          `seq ${seq} acknowledged twice with different entries (rounds ${had.round} and ${round}): a fork`,
        );
      }
      acked.set(seq, { entryHash: m[2]!, digest: m[3]!, round });
      ackedRounds.add(round);
    };

    const snapshotTiles = async (round: number) => {
      const files = await listTileFiles(logDir);
      for (const f of files) {
        const digest = sha(await readFile(path.join(logDir, f)));
        const seen = tileBytes.get(f);
        if (seen === undefined) tileBytes.set(f, digest);
        else if (seen !== digest) problems.push(`round ${round}: ${f} was rewritten with different bytes`);
      }
    };

    for (let round = 0; round < ROUNDS; round++) {
      const before = acked.size;
      const started = Date.now();
      const run = startChild(dataDir, onAck(round));
      // Even rounds: kill 100–600 ms into steady load, once the round's first anchor is
      // acknowledged (a busy machine may take a while to get there). Odd rounds: kill
      // 300–1,200 ms after spawn, which can land during startup, recovery or the
      // re-application of a staged batch.
      let delay: number;
      if (round % 2 === 0) {
        await within(run.ready, 20_000, `round ${round}: child start`).catch((e: Error) => {
          run.child.kill('SIGKILL');
          throw new Error(`${e.message}\n${run.stderr()}`);
        });
        for (const until = Date.now() + 20_000; !ackedRounds.has(round) && Date.now() < until; ) await sleep(10);
        delay = randomInt(100, 600);
        await sleep(delay);
      } else {
        delay = randomInt(300, 1200);
        await sleep(delay);
      }
      run.child.kill('SIGKILL');
      const { code, signal } = await run.exited;
      if (run.lines.some((l) => l.startsWith('err ')))
        problems.push(`round ${round}: child reported ${run.lines.join(' | ')} ${run.stderr()}`);
      expect(signal ?? code, run.stderr()).toBe('SIGKILL');
      await snapshotTiles(round);

      // The lock never goes backwards, and the public checkpoint is a signed one of ours.
      const lock = JSON.parse(await readFile(path.join(dataDir, 'private', 'lock.json'), 'utf8')) as { size: number };
      if (lock.size < lastLockSize)
        problems.push(`round ${round}: lock went back from ${lastLockSize} to ${lock.size}`);
      lastLockSize = lock.size;
      const note = await readFile(path.join(logDir, 'checkpoint'), 'utf8').catch(() => null);
      let publicSize = 0;
      if (note) {
        publicSize = verifyCheckpointNote(note, ORIGIN, publicKey).size;
        roundCheckpoints.push(note);
        // Whatever moment the kill hit, the public checkpoint is fully backed by its tiles
        // and bundles: a client reading the directory now could verify everything.
        await auditLogDir(logDir, ORIGIN, publicKey, note).catch((e: Error) =>
          problems.push(`round ${round}: public checkpoint ${publicSize}: ${e.message}`),
        );
      }
      // An acknowledgement comes only after the lock and the public checkpoint cover it.
      let maxAcked = -1;
      for (const [seq, a] of acked) if (a.round === round && seq > maxAcked) maxAcked = seq;
      if (maxAcked >= publicSize)
        problems.push(`round ${round}: seq ${maxAcked} acknowledged but the public checkpoint has ${publicSize}`);
      if (lock.size > publicSize) afterCommit++;
      progress(
        `round ${round}: killed after ${delay} ms (${Date.now() - started} ms in all), ${acked.size - before} new acks, ` +
          `lock size ${lock.size}, public checkpoint ${publicSize}${lock.size > publicSize ? ' (killed after a commit, before its checkpoint)' : ''}`,
      );
    }

    // The next start resumes (re-applying any staged batch) and closes cleanly.
    const finish = startChild(dataDir, onAck(ROUNDS), ['--finish']);
    const finishTimer = setTimeout(() => finish.child.kill('SIGKILL'), 30_000);
    const { code } = await finish.exited;
    clearTimeout(finishTimer);
    expect(code, finish.stderr() + finish.lines.join('\n')).toBe(0);
    const done = finish.lines.find((l) => l.startsWith('done '));
    expect(done).toBeDefined();
    await snapshotTiles(ROUNDS);
    progress(
      `${afterCommit} of ${ROUNDS} kills landed between a commit and its public checkpoint; ${acked.size} acknowledged in all`,
    );

    expect(problems.slice(0, 20), `${problems.length} problems`).toEqual([]);
    expect(acked.size).toBeGreaterThan(1000); // the test really ran under load

    // From scratch: signature, chain from the record bundles, root, every hash tile.
    const audit = await auditLogDir(logDir, ORIGIN, publicKey);
    const size = audit.checkpoint.size;
    expect(size).toBe(Number(done!.slice(5)));
    expect(size).toBeGreaterThanOrEqual(lastLockSize + 10);
    const missing: string[] = [];
    for (const [seq, a] of acked) {
      if (seq >= size) {
        missing.push(`${seq} beyond size ${size}`);
        continue;
      }
      const eh = Buffer.from(audit.entryHashes[seq]!).toString('hex');
      const digest = (JSON.parse(Buffer.from(audit.records[seq]!).toString('utf8')) as { digest: string }).digest;
      if (eh !== a.entryHash || digest !== a.digest) missing.push(`${seq} (round ${a.round})`);
    }
    expect(missing).toEqual([]);
    // Every checkpoint published between rounds is a prefix of the final tree.
    for (const note of roundCheckpoints) {
      const c = verifyCheckpointNote(note, ORIGIN, publicKey);
      expect(Buffer.from(audit.tree.root(c.size)).toString('hex')).toBe(Buffer.from(c.root).toString('hex'));
    }
    // Digests are unique per child run, so an entry appears at most once.
    const digests = audit.records.map(
      (r) => (JSON.parse(Buffer.from(r).toString('utf8')) as { digest: string }).digest,
    );
    expect(new Set(digests).size).toBe(digests.length);
  }, 90_000);
});
