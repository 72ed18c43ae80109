// `stele log fsck` and `stele log recover` as subprocesses, over copies of one real log
// written by the real sequencer in four batches (700 entries: full tiles 000 and 001, the
// right-edge partials 002.p/188 and tile/1/000.p/2, and older partials kept beside them).
// Each test corrupts its own copy in one way and checks that fsck names that object, or
// that recover restores or refuses as it must.
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openCheckpoint } from '../../src/core/checkpoint.js';
import { anchorRequest } from '../../src/core/anchor.js';
import { toHex } from '../../src/core/hash.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { SIG_ED25519, makeVerifier } from '../../src/core/note.js';
import { parsePrivateKey } from '../../src/keys/local-signer.js';
import { lockDataDir } from '../../src/store/dir-lock.js';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';
import { copyLog, digestOf, makeLog } from '../helpers/logs.js';
import { scratchDir } from '../helpers/tmp.js';
import type { JsonObject } from '../helpers/json.js';
import { readContent, writeContent } from '../helpers/stored-objects.js';

const ORIGIN = 'fsck.test/log';
type Json = JsonObject;

let root: string;
let pristine: string;
let sb: Sandbox;
let copies = 0;
/** The lock record and the public checkpoint as they were at sizes 101 and 401. */
const backups = { lock101: '', checkpoint401: '', checkpointJson401: '' };

function fresh(): string {
  return copyLog(pristine, join(root, `copy-${++copies}`));
}

function flipByte(file: string, offset: number): void {
  const b = readFileSync(file);
  b[offset]! ^= 0x01;
  writeFileSync(file, b);
}

const fsck = (dataDir: string) => sb.json(['log', 'fsck', '--data-dir', dataDir]);
const recover = (dataDir: string) => sb.json(['log', 'recover', '--data-dir', dataDir]);
const lockOf = (dataDir: string): Json =>
  JSON.parse(readFileSync(join(dataDir, 'private', 'lock.json'), 'utf8')) as Json;
const problems = (out: Json, kind: string): Json[] =>
  (out.findings as Json[]).filter((f) => f.severity === 'problem' && f.kind === kind);

beforeAll(async () => {
  await ensureBuilt();
  sb = new Sandbox('stele-log-');
  root = scratchDir('stele-fsck-');
  pristine = join(root, 'pristine');
  const save = (from: string, to: string) => copyFileSync(join(pristine, from), join(root, to));
  await makeLog(pristine, ORIGIN, [1, 100, 300, 299], (size) => {
    if (size === 101) save('private/lock.json', (backups.lock101 = 'lock-101.json'));
    if (size === 401) {
      save('log/checkpoint', (backups.checkpoint401 = 'checkpoint-401'));
      save('log/checkpoint.json', (backups.checkpointJson401 = 'checkpoint-401.json'));
    }
  });
}, 120_000);

describe('stele log fsck', () => {
  it('passes a clean log: the whole tree recomputed, older partials compared, the lock equal', async () => {
    const r = await fsck(pristine);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.out.result).toBe('PASS');
    expect(r.out.checkpoint.size).toBe(700);
    expect(r.out.audit.entriesChecked).toBe(700);
    expect(r.out.audit.hashTilesChecked).toBe(4); // tile/0/000, 001, 002.p/188, tile/1/000.p/2
    expect(r.out.stalePartialsChecked).toBeGreaterThan(0);
    expect(r.out.lock.relation).toBe('equal');
    expect(r.out.problems).toBe(0);

    const text = await sb.run(['log', 'fsck', '--data-dir', pristine]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('Result: PASS');
    const help = await sb.run(['log', 'fsck', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Exit codes');
  });

  it('names a level-0 hash tile with a flipped byte', async () => {
    const d = fresh();
    flipByte(join(d, 'log/tile/0/001'), 100);
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(r.out.firstBad).toBe('tile/0/001');
    expect(problems(r.out, 'tree')[0]?.message).toMatch(/tile\/0\/001 hash 3 .* differs/);
  });

  it('names a level-1 hash tile with a flipped byte (the right-edge partial; a full level-1 tile is in test/log/fsck-big.test.ts)', async () => {
    const d = fresh();
    flipByte(join(d, 'log/tile/1/000.p/2'), 40);
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(r.out.firstBad).toBe('tile/1/000.p/2');
  });

  it('names an entry bundle with a flipped byte', async () => {
    const d = fresh();
    flipByte(join(d, 'log/tile/entries/001'), 2 + 34 * 5 + 7); // inside item 5's entry hash
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(r.out.firstBad).toBe('tile/entries/001');
    expect(problems(r.out, 'tree')[0]?.message).toContain('item 5 (entry 261)');
  });

  it('names a record bundle whose record was altered (still valid JSON)', async () => {
    const d = fresh();
    const file = join(d, 'log/tile/records/002.p/188');
    const text = readContent(file).toString('latin1'); // the bundle's records, not its gzip stream
    const at = text.indexOf('"digest":"', text.indexOf('"digest":"') + 1) + 10; // entry 513's digest
    writeContent(file, Buffer.from(text.slice(0, at) + (text[at] === '0' ? '1' : '0') + text.slice(at + 1), 'latin1'));
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(r.out.firstBad).toBe('tile/records/002.p/188');
    expect(problems(r.out, 'tree')[0]?.message).toContain('record 513');
  });

  it('names a missing right-edge partial tile, and accepts an older partial missing beside its full tile', async () => {
    const d = fresh();
    rmSync(join(d, 'log/tile/0/002.p/188'));
    rmSync(join(d, 'log/tile/0/000.p/101')); // an older partial: readers fall back to tile/0/000
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(problems(r.out, 'missing').map((f) => f.object)).toEqual(['tile/0/002.p/188']);
    expect(r.out.firstBad).toBe('tile/0/002.p/188');
  });

  it('names an older partial tile that is not a prefix of its verified full tile', async () => {
    const d = fresh();
    flipByte(join(d, 'log/tile/0/000.p/101'), 64);
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(r.out.audit.tree.ok).toBe(true); // the audit reads the full tile, not this one
    expect(problems(r.out, 'stale-partial').map((f) => f.object)).toEqual(['tile/0/000.p/101']);
  });

  it('reports a .tmp- leftover of a crashed write', async () => {
    const d = fresh();
    writeFileSync(join(d, 'log/tile/0/001.tmp-4242-abcdef'), 'half a tile');
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(problems(r.out, 'tmp').map((f) => f.object)).toEqual(['tile/0/001.tmp-4242-abcdef']);
    expect(r.out.audit.tree.ok).toBe(true);
  });

  it('reports bundles and tiles beyond the tree', async () => {
    const d = fresh();
    copyFileSync(join(d, 'log/tile/entries/002.p/188'), join(d, 'log/tile/entries/002.p/200')); // wider than size 700 allows
    mkdirSync(join(d, 'log/tile/records/x001'), { recursive: true });
    writeFileSync(join(d, 'log/tile/records/x001/000'), ''); // further
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(
      problems(r.out, 'beyond')
        .map((f) => f.object)
        .sort(),
    ).toEqual(['tile/entries/002.p/200', 'tile/records/x001/000']);
  });

  it('reports a lock record older than the published checkpoint (a restored backup)', async () => {
    const d = fresh();
    copyFileSync(join(root, backups.lock101), join(d, 'private/lock.json'));
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(r.out.lock).toMatchObject({ relation: 'older', size: 101 });
    expect(problems(r.out, 'lock')[0]?.message).toMatch(/older than the published checkpoint/);
    expect(r.out.audit.tree.ok).toBe(true);
  });

  it('notes a lock record newer than the published checkpoint, and the committed objects beyond it, without failing', async () => {
    const d = fresh();
    copyFileSync(join(root, backups.checkpoint401), join(d, 'log/checkpoint'));
    copyFileSync(join(root, backups.checkpointJson401), join(d, 'log/checkpoint.json'));
    const r = await fsck(d);
    expect(r.code).toBe(0);
    expect(r.out.checkpoint.size).toBe(401);
    expect(r.out.lock).toMatchObject({ relation: 'newer', size: 700 });
    expect((r.out.findings as Json[]).some((f) => f.kind === 'unpublished' && f.object === 'tile/0/002.p/188')).toBe(
      true,
    );
  });

  it('checks the tree against the newer of checkpoint and checkpoint.json, noting the one a crash left behind', async () => {
    const d = fresh();
    copyFileSync(join(root, backups.checkpoint401), join(d, 'log/checkpoint'));
    const r = await fsck(d);
    expect(r.code).toBe(0);
    expect(r.out.checkpoint).toMatchObject({ size: 700, from: 'checkpoint.json' });
    expect(r.out.audit.entriesChecked).toBe(700);
    expect(
      (r.out.findings as Json[]).filter((f) => f.kind === 'checkpoint').map((f) => [f.severity, f.object]),
    ).toEqual([['notice', 'checkpoint']]);
  });

  it('reports a checkpoint whose signature does not verify; recover rewrites it from checkpoint.json', async () => {
    const d = fresh();
    const file = join(d, 'log/checkpoint');
    writeFileSync(file, readFileSync(file, 'utf8').replace('\n700\n', '\n701\n'));
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(problems(r.out, 'checkpoint').map((f) => f.object)).toEqual(['checkpoint']);
    expect(problems(r.out, 'checkpoint')[0]?.message).toMatch(/does not verify under the log key/);
    // recover rewrites it from its verified twin, checkpoint.json (a start would serve it as it is).
    const rewritten = await recover(d);
    expect(rewritten.code).toBe(0);
    expect(rewritten.out).toMatchObject({ result: 'recovered', republished: ['checkpoint'], size: 700 });
    expect(readFileSync(file, 'utf8')).toBe(
      (JSON.parse(readFileSync(join(d, 'log/checkpoint.json'), 'utf8')) as { note: string }).note,
    );
    expect((await fsck(d)).code).toBe(0);
  });

  it('reports a symlink in the log directory', async () => {
    const d = fresh();
    mkdirSync(join(d, 'log/tile/0/x999'), { recursive: true });
    symlinkSync(join(d, 'private/log.key'), join(d, 'log/tile/0/x999/999'));
    const r = await fsck(d);
    expect(r.code).toBe(1);
    expect(problems(r.out, 'not-regular').map((f) => f.object)).toEqual(['tile/0/x999/999']);
    expect(problems(r.out, 'not-regular')[0]?.message).toContain('symbolic link');
  });

  it('exits 2 on a directory that holds no log', async () => {
    const r = await sb.run(['log', 'fsck', '--data-dir', join(root, 'nothing-here')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^stele: .* holds no log/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('stele log recover', () => {
  const key = () => {
    const s = parsePrivateKey(readFileSync(join(pristine, 'private/log.key'), 'utf8'));
    return makeVerifier(s.name, SIG_ED25519, s.publicKey);
  };

  it('rebuilds a deleted lock record equal to the published checkpoint; the log then resumes with every entry', async () => {
    const d = fresh();
    const before = lockOf(d);
    rmSync(join(d, 'private/lock.json'));
    const r = await recover(d);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatchObject({
      result: 'recovered',
      size: 700,
      root: before.root,
      previous: { relation: 'missing' },
      entriesChecked: 700,
    });
    const lock = lockOf(d);
    expect(lock).toMatchObject({ size: 700, root: before.root });
    expect(lock.staged).toBeUndefined();
    const opened = openCheckpoint(lock.note as string, key());
    expect([opened.size, toHex(opened.root)]).toEqual([700, before.root]);
    const published = JSON.parse(readFileSync(join(d, 'log/checkpoint.json'), 'utf8')) as Json;
    expect(lock.timestamp).toBe(published.timestamp);

    // Idempotent: a second run writes nothing and says so.
    const again = await recover(d);
    expect(again.code).toBe(0);
    expect(again.out.result).toBe('up-to-date');

    // The sequencer resumes at 700 on the same tree and appends 701.
    const log = await openLocalLog({ dataDir: d, origin: ORIGIN, fsync: false });
    expect(log.sequencer.checkpoint.size).toBe(700);
    expect(toHex(log.sequencer.checkpoint.root)).toBe(before.root);
    const receipt = await log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf('after', 0)));
    expect(receipt.seq).toBe(700);
    await log.sequencer.close();
    const after = await fsck(d);
    expect(after.code).toBe(0);
    expect(after.out.audit.entriesChecked).toBe(701);
  });

  it('restores the published size over an older lock record', async () => {
    const d = fresh();
    copyFileSync(join(root, backups.lock101), join(d, 'private/lock.json'));
    expect(lockOf(d).staged).toBeDefined(); // the backup names the batch it committed
    const r = await recover(d);
    expect(r.code).toBe(0);
    expect(r.out).toMatchObject({ result: 'recovered', size: 700, previous: { relation: 'older', size: 101 } });
    expect(lockOf(d).size).toBe(700);
    expect(lockOf(d).staged).toBeUndefined(); // that batch is long written: nothing to re-apply
    expect((await fsck(d)).code).toBe(0);
  });

  it('refuses, writing nothing, when a tile does not verify', async () => {
    const d = fresh();
    rmSync(join(d, 'private/lock.json'));
    flipByte(join(d, 'log/tile/0/000'), 7);
    const r = await recover(d);
    expect(r.code).toBe(1);
    expect(r.out).toMatchObject({ result: 'refused', reason: 'unverified', firstBad: 'tile/0/000' });
    expect(r.stderr).toMatch(/^stele: recover refused: the published log does not verify.*tile\/0\/000/);
    expect(existsSync(join(d, 'private/lock.json'))).toBe(false);
  });

  it('refuses when objects lie beyond the published tree', async () => {
    const d = fresh();
    const lock = readFileSync(join(d, 'private/lock.json'));
    copyFileSync(join(root, backups.lock101), join(d, 'private/lock.json'));
    copyFileSync(join(d, 'log/tile/0/002.p/188'), join(d, 'log/tile/0/002.p/190'));
    const r = await recover(d);
    expect(r.code).toBe(1);
    expect(r.out.reason).toBe('beyond');
    expect(r.stderr).toContain('tile/0/002.p/190');
    expect(lockOf(d).size).toBe(101);
    expect(lock.length).toBeGreaterThan(0);
  });

  it('refuses when the lock record is newer than the published checkpoint: nothing to recover', async () => {
    const d = fresh();
    copyFileSync(join(root, backups.checkpoint401), join(d, 'log/checkpoint'));
    copyFileSync(join(root, backups.checkpointJson401), join(d, 'log/checkpoint.json'));
    const lock = readFileSync(join(d, 'private/lock.json'));
    const r = await recover(d);
    expect(r.code).toBe(1);
    expect(r.out.reason).toBe('lock-newer');
    expect(r.stderr).toMatch(/^stele: recover refused: nothing to recover: the lock record \(size 700\) is newer/);
    expect(readFileSync(join(d, 'private/lock.json')).equals(lock)).toBe(true);
  });

  it('refuses while a server holds the data directory', async () => {
    const d = fresh();
    rmSync(join(d, 'private/lock.json'));
    const held = await lockDataDir(d);
    try {
      const r = await sb.run(['log', 'recover', '--data-dir', d]);
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(new RegExp(`^stele: data directory .* is in use by pid ${process.pid}`));
      expect(existsSync(join(d, 'private/lock.json'))).toBe(false);
    } finally {
      await held.release();
    }
  });
});
