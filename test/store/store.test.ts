// The local-directory object store: atomic immutable creates, compare-and-swap, key
// validation, a swap mutex that survives a crashed holder, and no symlink followed or
// temporary file read.
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsObjectStore, contentVersion } from '../../src/store/fs.js';
import { LockFormatError, StoreLock, parseLockState } from '../../src/store/lock.js';
import { ImmutableConflictError, InvalidKeyError, VersionConflictError } from '../../src/store/store.js';
import { scratchDir } from '../helpers/tmp.js';

const bytes = (s: string) => new Uint8Array(Buffer.from(s));
const fresh = () => new FsObjectStore(scratchDir('stele-store-'));

describe('FsObjectStore', () => {
  it('creates immutable objects once: identical bytes succeed, different bytes fail', async () => {
    const s = fresh();
    await s.createAll([{ key: 'tile/0/000.p/1', data: bytes('a') }]);
    await s.createAll([{ key: 'tile/0/000.p/1', data: bytes('a') }]);
    await expect(s.createAll([{ key: 'tile/0/000.p/1', data: bytes('b') }])).rejects.toThrow(ImmutableConflictError);
    expect(Buffer.from((await s.get('tile/0/000.p/1'))!).toString()).toBe('a');
    // No temporary files are left behind, even after the conflict.
    expect(readdirSync(join(s.root, 'tile/0'))).toEqual(['000.p']);
    expect(readdirSync(join(s.root, 'tile/0/000.p'))).toEqual(['1']);
  });

  it('links nothing of a batch in which an object cannot be written, and leaves no temporary files', async () => {
    const s = fresh();
    const ok = Array.from({ length: 5 }, (_, i) => ({ key: `tile/0/00${i}`, data: bytes(`t${i}`) }));
    // A file where an object's directory should be: that object cannot be written.
    mkdirSync(join(s.root, 'tile/entries'), { recursive: true });
    writeFileSync(join(s.root, 'tile/entries/000.p'), 'x');
    const blocked = { key: 'tile/entries/000.p/1', data: bytes('no') };
    await expect(
      s.createAll([...ok.slice(0, 3), { key: '../escape', data: bytes('x') }, ...ok.slice(3)]),
    ).rejects.toThrow(InvalidKeyError);
    // The file system's error code comes back from the writer thread.
    await expect(s.createAll([...ok, blocked].reverse())).rejects.toMatchObject({
      code: expect.stringMatching(/^(ENOTDIR|EEXIST)$/),
    });
    for (const o of ok) expect(await s.get(o.key)).toBeNull();
    expect(existsSync(join(s.root, 'tile/0')) ? readdirSync(join(s.root, 'tile/0')) : []).toEqual([]);
    await s.createAll(ok);
    expect(readdirSync(join(s.root, 'tile/0')).sort()).toEqual(['000', '001', '002', '003', '004']);
  });

  it('writes objects that are views of a larger buffer as exactly their bytes, and counts each as a put', async () => {
    const s = fresh();
    const big = new Uint8Array(1 << 20).map((_, i) => i % 251);
    const objects = [0, 1, 2].map((i) => ({
      key: `tile/records/000.p/${i + 1}`,
      data: big.subarray(1000 * i + 7, 1000 * i + 7 + 300 * (i + 1)),
    }));
    await s.createAll(objects, { durable: false });
    for (const o of objects) expect(Buffer.from((await s.get(o.key))!).equals(Buffer.from(o.data))).toBe(true);
    expect(s.stats.puts).toBe(3);
    await s.swap('checkpoint', big.subarray(5, 9), null);
    expect([...(await s.get('checkpoint'))!]).toEqual([5, 6, 7, 8]);
    expect(s.stats.puts).toBe(4);
  });

  it('durable:false objects are readable at once and persist() syncs them; torn copies are repaired only when asked', async () => {
    const s = fresh();
    const tile = { key: 'tile/0/001.p/3', data: bytes('0123456789abcdef') };
    await s.createAll([tile], { durable: false });
    expect(Buffer.from((await s.get(tile.key))!).toString()).toBe('0123456789abcdef');
    await s.persist([tile.key]);
    await expect(s.persist(['tile/0/404'])).rejects.toThrow(/ENOENT/);

    // What a power loss can leave of a write never synced: nothing, a prefix, zeros.
    const file = join(s.root, tile.key);
    for (const torn of ['', '0123', '0123\0\0\0\0\0\0\0\0\0\0\0\0', '\0\0\0\0']) {
      writeFileSync(file, torn);
      await expect(s.createAll([tile])).rejects.toThrow(ImmutableConflictError);
      await s.createAll([tile], { repairTorn: true });
      expect(Buffer.from((await s.get(tile.key))!).toString()).toBe('0123456789abcdef');
    }
    // Anything else is another object, and repairTorn refuses it like any create.
    for (const other of ['0124', '0123456789abcdefX', '0123456789abcdeF']) {
      writeFileSync(file, other);
      await expect(s.createAll([tile], { repairTorn: true })).rejects.toThrow(ImmutableConflictError);
      expect(Buffer.from((await s.get(tile.key))!).toString()).toBe(other);
    }
    expect(readdirSync(join(s.root, 'tile/0/001.p'))).toEqual(['3']);
  });

  it('writes many objects in one batch', async () => {
    const s = fresh();
    const objects = Array.from({ length: 300 }, (_, i) => ({
      key: `tile/entries/x001/${String(i).padStart(3, '0')}`,
      data: bytes(`e${i}`),
    }));
    await s.createAll(objects.slice(0, 1000));
    for (const o of objects) expect(Buffer.from((await s.get(o.key))!).toString()).toBe(Buffer.from(o.data).toString());
  });

  it('swaps only from the expected version', async () => {
    const s = fresh();
    const v1 = await s.swap('checkpoint', bytes('one'), null);
    await expect(s.swap('checkpoint', bytes('x'), null)).rejects.toThrow(VersionConflictError);
    const v2 = await s.swap('checkpoint', bytes('two'), v1);
    await expect(s.swap('checkpoint', bytes('three'), v1)).rejects.toThrow(VersionConflictError);
    expect(await s.getVersioned('checkpoint')).toEqual({ data: bytes('two'), version: v2 });
  });

  it('lets exactly one of many concurrent swaps from the same version win', async () => {
    const s = fresh();
    const v = await s.swap('lock.json', bytes('0'), null);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => s.swap('lock.json', bytes(`n${i}`), v)),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected' && r.reason instanceof VersionConflictError)).toHaveLength(19);
  });

  it('breaks a swap mutex left by a dead process', async () => {
    const s = fresh();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    writeFileSync(join(s.root, 'checkpoint.lock'), dead);
    const started = Date.now();
    await s.swap('checkpoint', bytes('after crash'), null);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(existsSync(join(s.root, 'checkpoint.lock'))).toBe(false);
    // A lock directory left by an earlier release is broken the same way.
    mkdirSync(join(s.root, 'checkpoint.lock'));
    writeFileSync(join(s.root, 'checkpoint.lock', 'owner'), dead);
    await s.swap(
      'checkpoint',
      bytes('after an older crash'),
      await s.getVersioned('checkpoint').then((o) => o!.version),
    );
    expect(existsSync(join(s.root, 'checkpoint.lock'))).toBe(false);
  });

  it('waits for a swap mutex held by a live process, and leaves no lock files behind', async () => {
    const s = fresh();
    writeFileSync(join(s.root, 'checkpoint.lock'), `${process.pid} someone-else`);
    const swapping = s.swap('checkpoint', bytes('later'), null);
    await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(join(s.root, 'checkpoint'))).toBe(false);
    unlinkSync(join(s.root, 'checkpoint.lock'));
    await swapping;
    // Besides the object, only this process's mutex badge stays (removed at exit).
    expect(readdirSync(s.root).sort()).toEqual([
      expect.stringMatching(new RegExp(`^\\.mutex-owner-${process.pid}-[0-9a-f]{16}$`)),
      'checkpoint',
    ]);
  });

  it('takes swap mutexes with one badge file per process and directory; badges of dead processes are removed', async () => {
    const s = fresh();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    writeFileSync(join(s.root, `.mutex-owner-${dead}-0123456789abcdef`), `${dead} 0123456789abcdef`);
    let version: string | null = null;
    for (let i = 0; i < 5; i++) version = await s.swap('checkpoint', bytes(`v${i}`), version);
    await s.swap('checkpoint.json', bytes('{}'), null);
    const left = readdirSync(s.root).sort();
    expect(left).toEqual([
      expect.stringMatching(new RegExp(`^\\.mutex-owner-${process.pid}-[0-9a-f]{16}$`)),
      'checkpoint',
      'checkpoint.json',
    ]);
    expect(readFileSync(join(s.root, left[0]!), 'utf8')).toMatch(new RegExp(`^${process.pid} [0-9a-f]{16}$`));
  });

  it('reads a lock record whose staged batch is a staging object or inline records; malformed ones are refused', () => {
    const root = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
    const base = { size: 9, root, timestamp: '2026-01-01T00:00:00.000Z', note: 'n' };
    const parse = (staged: unknown) => parseLockState(bytes(JSON.stringify({ ...base, staged })));
    const keyed = { key: 'staging/0-ab', fromSize: 0, fromRoot: root };
    const inline = { records: 'AAE=', fromSize: 4, fromRoot: root };
    expect(parse(keyed).staged).toEqual(keyed);
    expect(parse(inline).staged).toEqual(inline);
    expect(parseLockState(bytes(JSON.stringify(base))).staged).toBeUndefined();
    for (const bad of [
      { ...keyed, records: 'AAE=' },
      { fromSize: 0, fromRoot: root },
      { ...inline, fromRoot: 'zz' },
      { ...inline, fromSize: -4 },
      { ...inline, fromSize: 0.5 },
      null,
      'staging/0-ab',
    ]) {
      expect(() => parse(bad), JSON.stringify(bad)).toThrow(LockFormatError);
    }
  });

  it('rejects keys that could escape the store', async () => {
    const s = fresh();
    for (const key of ['../x', '/etc/passwd', 'a//b', 'tile/./0', 'tile/../..', '', 'a b']) {
      await expect(s.get(key)).rejects.toThrow(InvalidKeyError);
      await expect(s.createAll([{ key, data: bytes('x') }])).rejects.toThrow(InvalidKeyError);
    }
  });

  it('reads only regular files inside the root: symlinks, symlinked directories, FIFOs and directories are absent', async () => {
    const s = fresh();
    const outside = scratchDir('stele-outside-');
    writeFileSync(join(outside, 'secret'), 'SECRET');
    mkdirSync(join(outside, 'x001'));
    writeFileSync(join(outside, 'x001', '001'), 'SECRET');
    await s.createAll([{ key: 'tile/0/000', data: bytes('tile') }]);
    symlinkSync(join(outside, 'secret'), join(s.root, 'tile/0/001'));
    symlinkSync(outside, join(s.root, 'tile/1'));
    symlinkSync(join(outside, 'x001'), join(s.root, 'tile/0/x001'));
    spawnSync('mkfifo', [join(s.root, 'tile/0/002')]);
    mkdirSync(join(s.root, 'tile/0/003'));
    expect(Buffer.from((await s.get('tile/0/000'))!).toString()).toBe('tile');
    for (const key of ['tile/0/001', 'tile/1/secret', 'tile/0/x001/001', 'tile/0/002', 'tile/0/003']) {
      expect(await s.get(key), key).toBeNull();
      expect(await s.getVersioned(key), key).toBeNull();
    }
  });

  it('never writes through a symlink: a symlinked directory is refused, a symlink at an object name is replaced, its target untouched', async () => {
    const s = fresh();
    const outside = scratchDir('stele-outside-');
    writeFileSync(join(outside, 'target'), 'KEEP');
    // A directory on the way is a symlink: creates, swaps and deletes under it are refused.
    mkdirSync(join(s.root, 'tile'));
    symlinkSync(outside, join(s.root, 'tile/entries'));
    await expect(s.createAll([{ key: 'tile/entries/000', data: bytes('e') }])).rejects.toThrow(/symlink/);
    await expect(s.swap('tile/entries/target', bytes('x'), null)).rejects.toThrow(/symlink/);
    await expect(s.delete('tile/entries/target')).rejects.toThrow(/symlink/);
    expect(readdirSync(outside)).toEqual(['target']);
    // A symlink where an immutable object belongs reads as absent and is replaced by the object.
    mkdirSync(join(s.root, 'tile/0'));
    symlinkSync(join(outside, 'target'), join(s.root, 'tile/0/000'));
    await s.createAll([{ key: 'tile/0/000', data: bytes('KEEP') }]);
    expect(lstatSync(join(s.root, 'tile/0/000')).isSymbolicLink()).toBe(false);
    symlinkSync(join(outside, 'target'), join(s.root, 'tile/0/001'));
    await s.createAll([{ key: 'tile/0/001', data: bytes('tile') }]);
    expect(Buffer.from((await s.get('tile/0/001'))!).toString()).toBe('tile');
    // The same for a swapped object: the link is absent (expected null) and replaced.
    symlinkSync(join(outside, 'target'), join(s.root, 'checkpoint'));
    await expect(s.swap('checkpoint', bytes('cp'), contentVersion(bytes('KEEP')))).rejects.toThrow(
      VersionConflictError,
    );
    await s.swap('checkpoint', bytes('cp'), null);
    expect(lstatSync(join(s.root, 'checkpoint')).isFile()).toBe(true);
    expect(readFileSync(join(outside, 'target'), 'utf8')).toBe('KEEP');
    expect(readdirSync(outside)).toEqual(['target']);
  });

  it('never reads a temporary file as an object, and removes those of dead writers', async () => {
    const s = fresh();
    await s.createAll([{ key: 'tile/0/000.p/1', data: bytes('t') }]);
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    const abandoned = [
      `tile/0/000.p/2.tmp-${dead}-0123456789ab`,
      `checkpoint.tmp-${dead}-0123456789ab`,
      'tile/0/001.tmp-x',
    ];
    const live = `tile/0/000.p/3.tmp-${process.pid}-0123456789ab`;
    for (const k of [...abandoned, live]) writeFileSync(join(s.root, k), 'partial');
    for (const k of [...abandoned, live]) await expect(s.get(k)).rejects.toThrow(InvalidKeyError);
    expect((await s.removeTempFiles()).sort()).toEqual([...abandoned].sort());
    for (const k of abandoned) expect(existsSync(join(s.root, k)), k).toBe(false);
    expect(existsSync(join(s.root, live))).toBe(true);
    expect(await s.get('tile/0/000.p/1')).not.toBeNull();
  });

  it('keeps the sequencer lock record behind compare-and-swap', async () => {
    const lock = new StoreLock(fresh());
    expect(await lock.read()).toBeNull();
    const state = {
      size: 0,
      root: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      timestamp: '2026-01-01T00:00:00.000Z',
      note: 'n',
    };
    const v = await lock.swap(null, state);
    expect(await lock.read()).toEqual({ state, version: v });
    await expect(lock.swap(null, { ...state, size: 1 })).rejects.toThrow(VersionConflictError);
  });
});
