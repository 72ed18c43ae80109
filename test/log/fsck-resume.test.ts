// fsck that keeps pace (issue 35): a check killed mid-way (SIGKILL of the CLI) continues when
// run again and reports what an uninterrupted check reports; `--since` checks only what is
// new since a checkpoint fsck verified, so a corrupt record below it is not seen (by design)
// while one above it is, and a log rolled back below it is reported; `--since` with no such
// checkpoint is refused in one line (exit 2).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { FsckSinceError } from '../../src/log/fsck-resume.js';
import { fsckLog } from '../../src/log/fsck.js';
import { localTarget } from '../../src/log/targets.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { CLI, Sandbox, ensureBuilt } from '../helpers/cli.js';
import { copyLog, digestOf, makeLog } from '../helpers/logs.js';
import { scratchDir } from '../helpers/tmp.js';
import { readContent, writeContent } from '../helpers/stored-objects.js';

const ORIGIN = 'fsck-resume.test/log';
const sandbox = new Sandbox('stele-fsck-resume-');

/** Appends `count` anchors (digests after `from`) to the log in `dataDir`. */
async function append(dataDir: string, from: number, count: number): Promise<void> {
  const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 5, sweepPartials: false });
  try {
    await Promise.all(
      Array.from({ length: count }, (_, i) =>
        log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(ORIGIN, from + i), { scope: 'test' })),
      ),
    );
  } finally {
    await log.sequencer.close();
  }
}

/** Flips a byte inside the JSON of a record bundle (a record that no longer hashes to its entry). */
function corrupt(dataDir: string, bundle: string): void {
  const file = join(dataDir, 'log', 'tile', 'records', bundle);
  const content = readContent(file);
  content[100]! ^= 0x01;
  writeContent(file, content);
}

/** Flips a byte of a record bundle as stored: its gzip stream no longer decodes. */
function corruptStored(dataDir: string, bundle: string): void {
  const file = join(dataDir, 'log', 'tile', 'records', bundle);
  const bytes = readFileSync(file);
  bytes[40]! ^= 0xff;
  writeFileSync(file, bytes);
}

describe('fsck --since', () => {
  let base: string;
  let backup: string;

  beforeAll(async () => {
    base = join(scratchDir('stele-fsck-since-'), 'data');
    await makeLog(base, ORIGIN, [3000]);
    expect((await fsckLog(await localTarget(base))).ok).toBe(true); // records size 3000 as verified
    backup = copyLog(base, join(scratchDir('stele-fsck-since-backup-'), 'data'));
    await append(base, 10_000, 2000);
  }, 120_000);

  it('checks only the entries since the verified checkpoint, and records the new one', async () => {
    const dir = copyLog(base, join(scratchDir('stele-fsck-since-a-'), 'data'));
    const r = await fsckLog(await localTarget(dir), { since: 3000 });
    expect(r.ok).toBe(true);
    expect(r.since?.size).toBe(3000);
    expect(r.objectsListed).toBe(0);
    // From the bundle of leaf 2999 (bundle 11, leaves 2816–) to 5000.
    expect(r.audit?.entriesChecked).toBe(5000 - 2816);
    const again = await fsckLog(await localTarget(dir), { since: 'last' });
    expect(again.since?.size).toBe(5000);
    expect(again.audit?.entriesChecked).toBe(5000 - 4864);
  });

  it('does not see a corrupt record below the checkpoint, and names one above it', async () => {
    const dir = copyLog(base, join(scratchDir('stele-fsck-since-b-'), 'data'));
    corrupt(dir, '000'); // leaves 0–255, below 3000
    expect((await fsckLog(await localTarget(dir), { since: 3000 })).ok).toBe(true);
    const full = await fsckLog(await localTarget(dir));
    expect(full.ok).toBe(false);
    expect(full.firstBad).toBe('tile/records/000');

    const above = copyLog(base, join(scratchDir('stele-fsck-since-c-'), 'data'));
    corrupt(above, '015'); // leaves 3840–4095
    const r = await fsckLog(await localTarget(above), { since: 3000 });
    expect(r.ok).toBe(false);
    expect(r.firstBad).toBe('tile/records/015');
  });

  it('names a record bundle whose stored gzip stream is broken, as a finding (not a failed check)', async () => {
    const dir = copyLog(base, join(scratchDir('stele-fsck-gzip-'), 'data'));
    corruptStored(dir, '002');
    const r = await fsckLog(await localTarget(dir));
    expect(r.ok).toBe(false);
    expect(r.firstBad).toBe('tile/records/002');
  });

  it('reports a log rolled back below the verified checkpoint', async () => {
    const dir = copyLog(base, join(scratchDir('stele-fsck-since-d-'), 'data'));
    expect((await fsckLog(await localTarget(dir))).ok).toBe(true); // records 5000
    // The log restored from the backup at 3000, fsck's own state kept.
    const restored = copyLog(backup, join(scratchDir('stele-fsck-since-e-'), 'data'));
    cpSync(join(dir, 'private', 'fsck'), join(restored, 'private', 'fsck'), { recursive: true });
    const r = await fsckLog(await localTarget(restored), { since: 'last' });
    expect(r.ok).toBe(false);
    expect(r.counts.rollback).toBe(1);
    expect(r.findings.find((f) => f.kind === 'rollback')?.message).toMatch(
      /tree \(size 3000\) is smaller than the checkpoint of size 5000 .*rolled back/,
    );
  });

  it('refuses a size fsck never verified: the library throws, the CLI says so in one line (exit 2)', async () => {
    await expect(fsckLog(await localTarget(base), { since: 1234 })).rejects.toThrow(FsckSinceError);
    await ensureBuilt();
    const r = await sandbox.run(['log', 'fsck', '--data-dir', base, '--since', '1234']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--since 1234: fsck has verified no checkpoint of size 1234 \(verified sizes: 3000/);
  }, 240_000);
});

describe('fsck killed mid-way', () => {
  it('continues when run again, and reports what an uninterrupted check reports', async () => {
    const N = 80_000;
    const made = join(scratchDir('stele-fsck-kill-'), 'data');
    await Promise.all([makeLog(made, ORIGIN, [N]), ensureBuilt()]);
    corrupt(made, '300'); // a finding near the end, past where the check is killed
    const whole = copyLog(made, join(scratchDir('stele-fsck-kill-whole-'), 'data'));
    const straight = await sandbox.json(['log', 'fsck', '--data-dir', whole]);
    expect(straight.code).toBe(1);

    const child = spawn(process.execPath, [CLI, 'log', 'fsck', '--data-dir', made, '--json'], {
      env: sandbox.env(),
      stdio: 'ignore',
    });
    const exited = once(child, 'exit');
    const progress = join(made, 'private', 'fsck', 'progress.json');
    while (!existsSync(progress) && child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    child.kill('SIGKILL');
    const [, signal] = await exited;
    expect(signal).toBe('SIGKILL');

    const resumed = await sandbox.json(['log', 'fsck', '--data-dir', made]);
    expect(resumed.code).toBe(1);
    expect(resumed.out.resumedAt).toBeGreaterThan(0);
    expect(resumed.out.resumedAt).toBeLessThan(300 * 256);
    const same = (o: Record<string, unknown>) => {
      const { elapsedMs: _e, where: _w, resumedAt: _r, inUseBy: _i, ...rest } = o;
      return rest;
    };
    expect(same(resumed.out)).toEqual(same(straight.out));
    expect(existsSync(progress)).toBe(false);
  }, 300_000);
});
