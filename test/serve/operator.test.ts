// The log survives its operator: a deleted or restored lock, a second process on the same
// data directory, a lock changed under a running server, a taken port. Each is done to a
// real `stele serve` process over real files, and the log must refuse (exit 4, one line,
// nothing written) rather than fork, roll back or sit answering 503.
import { createServer } from 'node:net';
import { once } from 'node:events';
import { copyFile, cp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { pino } from 'pino';
import { parseVkey } from '../../src/core/note.js';
import { startWitness } from '../../src/witness/host.js';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { digestOf, getJson, postAnchor } from '../api/server.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'operator.test/log';

/** Every file under `dir` with its bytes, to show a refused start wrote nothing. */
async function snapshot(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    out.set(p.slice(dir.length), (await readFile(p)).toString('base64'));
  }
  return out;
}

async function anchorMany(s: RunningServe, from: number, n: number): Promise<void> {
  const rs = await Promise.all(Array.from({ length: n }, (_, i) => postAnchor(s.url, { digest: digestOf(from + i) })));
  expect(rs.map((r) => r.status)).toEqual(rs.map(() => 201));
}

/** `stele serve` on `dataDir` expected to refuse: its exit code and stderr. */
async function refusedServe(dataDir: string, extra: string[] = []): Promise<{ code: number; stderr: string }> {
  const sandbox = new Sandbox('stele-operator-');
  try {
    const r = await sandbox.run([
      'serve',
      '--data-dir',
      dataDir,
      '--origin',
      ORIGIN,
      '--port',
      '0',
      '--log-level',
      'warn',
      ...extra,
    ]);
    return { code: r.code, stderr: r.stderr };
  } finally {
    sandbox.cleanup();
  }
}

/** A log with `n` anchors, stopped cleanly. */
async function logWith(n: number): Promise<{ dataDir: string; lock: string }> {
  const dataDir = scratchDir('stele-operator-');
  const s = await startServe({ dataDir, origin: ORIGIN });
  await anchorMany(s, 0, n);
  await s.stop();
  return { dataDir, lock: join(dataDir, 'private', 'lock.json') };
}

describe('the log refuses what would fork it', () => {
  beforeAll(ensureBuilt, 180_000);

  it('a deleted lock: serve refuses (exit 4, one line naming the published checkpoint) and writes nothing', async () => {
    const { dataDir, lock } = await logWith(30);
    await rm(lock);
    const before = await snapshot(dataDir);
    const r = await refusedServe(dataDir);
    expect(r.code).toBe(4);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(
      /published objects \(a signed checkpoint of size 30\) but no lock record.*(stele|main\.js) log recover/,
    );
    // LMDB's lock.mdb is its table of readers, rewritten by any open; the data is untouched.
    const changed = [...(await snapshot(dataDir))].filter(([k, v]) => before.get(k) !== v).map(([k]) => k);
    expect(changed.filter((k) => !k.endsWith('/index/lock.mdb'))).toEqual([]);
  });

  it('a deleted lock and checkpoint: the tiles alone make it refuse', async () => {
    const { dataDir, lock } = await logWith(30);
    await Promise.all(
      [lock, join(dataDir, 'log', 'checkpoint'), join(dataDir, 'log', 'checkpoint.json')].map((f) => rm(f)),
    );
    const r = await refusedServe(dataDir);
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/published objects \(tile\/.*\) but no lock record/);
  });

  it('a lock restored from an older copy: refuses, and the public checkpoint stays where it was', async () => {
    const { dataDir, lock } = await logWith(30);
    await copyFile(lock, `${lock}.old`);
    const s = await startServe({ dataDir, origin: ORIGIN });
    await anchorMany(s, 30, 45);
    await s.stop();
    await copyFile(`${lock}.old`, lock);
    const checkpoint = await readFile(join(dataDir, 'log', 'checkpoint'));
    const r = await refusedServe(dataDir);
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/lock record \(size 30\) is older than the published checkpoint \(size 75\)/);
    expect(await readFile(join(dataDir, 'log', 'checkpoint'))).toEqual(checkpoint);
  });

  it('a lock and checkpoint both rolled back: the tiles beyond the lock make it refuse', async () => {
    const { dataDir, lock } = await logWith(30);
    const saved = [lock, join(dataDir, 'log', 'checkpoint'), join(dataDir, 'log', 'checkpoint.json')];
    await Promise.all(saved.map((f) => copyFile(f, `${f}.old`)));
    const s = await startServe({ dataDir, origin: ORIGIN });
    await anchorMany(s, 30, 10);
    await s.stop();
    await Promise.all(saved.map((f) => copyFile(`${f}.old`, f)));
    const r = await refusedServe(dataDir);
    expect(r.code).toBe(4);
    expect(r.stderr).toMatch(/tile\/\S+ lies beyond the lock record's tree size 30/);
  });

  it('`stele log recover` after a deleted or an older lock: serve resumes at the published size, every acknowledged anchor answered exactly as before', async () => {
    const { dataDir, lock } = await logWith(30);
    await copyFile(lock, `${lock}.old`);
    let s = await startServe({ dataDir, origin: ORIGIN });
    await anchorMany(s, 30, 45);
    const before = await Promise.all(
      Array.from({ length: 75 }, (_, i) => getJson(`${s.url}/api/ledger/entry?hash=${digestOf(i)}`)),
    );
    await s.stop();
    const sandbox = new Sandbox('stele-operator-');
    try {
      for (const lose of [() => rm(lock), () => copyFile(`${lock}.old`, lock)]) {
        await lose();
        expect((await refusedServe(dataDir)).code).toBe(4);
        const r = await sandbox.json(['log', 'recover', '--data-dir', dataDir]);
        expect(r.code).toBe(0);
        expect(r.out).toMatchObject({ size: 75 });
        s = await startServe({ dataDir, origin: ORIGIN });
        const after = await Promise.all(
          Array.from({ length: 75 }, (_, i) => getJson(`${s.url}/api/ledger/entry?hash=${digestOf(i)}`)),
        );
        expect(after.map((a) => a.body)).toEqual(before.map((b) => b.body));
        await s.stop();
      }
      s = await startServe({ dataDir, origin: ORIGIN });
      expect((await postAnchor(s.url, { digest: digestOf(75) })).body.leafIndex).toBe(75);
      await s.stop();
    } finally {
      sandbox.cleanup();
    }
  });

  it('a whole data directory restored from a backup: a witness that cosigned the larger tree makes serve refuse (exit 4)', async () => {
    const dataDir = scratchDir('stele-operator-');
    let s = await startServe({ dataDir, origin: ORIGIN });
    const logVkey = s.vkey;
    await s.stop();
    const witness = await startWitness({
      dataDir: scratchDir('stele-witness-'),
      name: 'witness.operator.test',
      logs: [parseVkey(logVkey)],
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
    const withWitness = ['--witness', `${witness.vkey}=${witness.url}`];
    try {
      // The first start only made the key: adding a witness to its stored settings is on purpose.
      s = await startServe({ dataDir, origin: ORIGIN, args: [...withWitness, '--reconfigure'] });
      await anchorMany(s, 0, 10);
      await s.stop();
      const backup = `${dataDir}-backup`;
      await cp(dataDir, backup, { recursive: true });
      s = await startServe({ dataDir, origin: ORIGIN, args: withWitness });
      await anchorMany(s, 10, 10);
      await s.stop();
      // Lock, checkpoint and tiles all agree at size 10: only the witness remembers 20.
      await rm(dataDir, { recursive: true });
      await cp(backup, dataDir, { recursive: true });
      const r = await refusedServe(dataDir, withWitness);
      expect(r.stderr).toMatch(
        /witness witness\.operator\.test has cosigned size 20 of this log, more than the checkpoint of size 10/,
      );
      expect(r.code).toBe(4);
    } finally {
      await witness.close();
    }
  });

  it('witnesses below the threshold: an anchor gets 503 anchor_timeout within the bound, /readyz says why, and both recover when the witness returns', async () => {
    const dataDir = scratchDir('stele-operator-');
    let s = await startServe({ dataDir, origin: ORIGIN });
    const logVkey = s.vkey;
    await s.stop();
    const opts = {
      dataDir: scratchDir('stele-witness-'),
      name: 'witness.health.test',
      logs: [parseVkey(logVkey)],
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    };
    let witness = await startWitness(opts);
    s = await startServe({
      dataDir,
      origin: ORIGIN,
      args: ['--witness', `${witness.vkey}=${witness.url}`, '--anchor-timeout', '1500', '--reconfigure'],
    });
    try {
      await anchorMany(s, 0, 3);
      await witness.close();
      const started = Date.now();
      const r = await postAnchor(s.url, { digest: digestOf(3) });
      expect(Date.now() - started).toBeLessThan(4000);
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('anchor_timeout');
      expect(r.body.error.message).toMatch(/witness policy not met/);
      expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
      const ready = await getJson(`${s.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.body.reason).toMatch(/witness policy not met/);
      witness = await startWitness({ ...opts, port: Number(new URL(witness.url).port) });
      for (let i = 0; i < 100 && (await getJson(`${s.url}/readyz`)).status !== 200; i++)
        await new Promise((res) => setTimeout(res, 100));
      expect((await getJson(`${s.url}/readyz`)).status).toBe(200);
      // The anchor that timed out was committed, as its answer said it may be: it is published now.
      expect((await getJson(`${s.url}/api/ledger/entry?hash=${digestOf(3)}`)).status).toBe(200);
    } finally {
      await s.stop();
      await witness.close();
    }
  });

  it('a second serve on the same data directory exits 3 naming the pid, touches nothing, and the first keeps anchoring', async () => {
    const dataDir = scratchDir('stele-operator-');
    const first = await startServe({ dataDir, origin: ORIGIN });
    try {
      await anchorMany(first, 0, 5);
      const lock = await readFile(join(dataDir, 'private', 'lock.json'));
      const r = await refusedServe(dataDir);
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(`is in use by pid ${first.proc.pid}`);
      expect((await readFile(join(dataDir, 'private', 'lock.json'))).equals(lock)).toBe(true);
      await anchorMany(first, 5, 5);
      expect((await getJson(`${first.url}/readyz`)).body).toMatchObject({ ready: true, treeSize: 10 });
    } finally {
      await first.stop();
    }
  });

  it('a taken port: serve exits 3 before it creates or recovers anything', async () => {
    const blocker = createServer();
    blocker.listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const port = (blocker.address() as { port: number }).port;
    const dataDir = join(scratchDir('stele-operator-'), 'fresh');
    try {
      const r = await refusedServe(dataDir, ['--port', String(port)]);
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(/already in use/);
      expect(await readdir(dataDir)).toEqual([]);
    } finally {
      blocker.close();
    }
  });

  it('a lock changed under a running server: its sequencer stops and the process exits 4 instead of answering 503', async () => {
    const { dataDir, lock } = await logWith(10);
    const old = await readFile(lock);
    const s = await startServe({ dataDir, origin: ORIGIN });
    await anchorMany(s, 10, 5);
    await writeFile(lock, old); // an operator restores a backup under the running server
    const exited = new Promise<number | null>((r) => s.proc.once('exit', (code) => r(code)));
    let stderr = '';
    s.proc.stderr!.on('data', (d) => (stderr += d));
    const answer = await postAnchor(s.url, { digest: digestOf(99) }).catch(() => ({ status: 0, body: null }));
    expect(answer.status).not.toBe(201);
    expect(await exited).toBe(4);
    expect(stderr).toMatch(/stele: the log stopped: .*another writer/);
  });
});
