// A full disk under a running log, on a real filesystem that fills up: a small tmpfs
// mounted for the test (CI runs as root). Anchors must get a JSON 503 within the bound,
// never hang; readiness must say why; once space returns the log carries on by itself and
// every acknowledged anchor is still there.
import { execFileSync } from 'node:child_process';
import { mkdirSync, openSync, rmSync, writeSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { digestOf, getJson, postAnchor } from '../api/server.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'full-disk.test/log';
const ANCHOR_TIMEOUT_MS = 2000;

/** Writes zeros to `file` until the filesystem is full. */
function fill(file: string): void {
  const fd = openSync(file, 'a');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    closeSync(fd);
  }
}

async function until(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a full disk', () => {
  const mount = scratchDir('stele-full-');
  beforeAll(async () => {
    await ensureBuilt();
    // 24 MiB: room for the key, the LMDB index's first pages and a few batches.
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mount]);
  }, 180_000);
  afterAll(() => {
    execFileSync('umount', ['-l', mount]);
  });

  it('anchors get 503 within the bound, readiness fails, and the log recovers with nothing lost once space returns', async () => {
    const dataDir = join(mount, 'data');
    mkdirSync(dataDir);
    const s = await startServe({ dataDir, origin: ORIGIN, args: ['--anchor-timeout', String(ANCHOR_TIMEOUT_MS)] });
    const acked: string[] = [];
    const anchor = async (i: number) => {
      const started = Date.now();
      const r = await postAnchor(s.url, { digest: digestOf(i) });
      if (r.status === 201) acked.push(digestOf(i));
      return { ...r, ms: Date.now() - started };
    };
    try {
      for (let i = 0; i < 20; i++) expect((await anchor(i)).status).toBe(201);
      const filler = join(mount, 'filler');
      fill(filler);

      // Every answer comes within the bound (plus a margin for a batch in flight) as a 201 or
      // a JSON 503 that says whether the anchor may still be recorded.
      const answers = [];
      for (let round = 0; round < 4; round++)
        answers.push(...(await Promise.all(Array.from({ length: 10 }, (_, k) => anchor(100 + round * 10 + k)))));
      for (const a of answers) {
        expect(a.ms).toBeLessThan(ANCHOR_TIMEOUT_MS + 1500);
        if (a.status !== 201) {
          expect(a.status).toBe(503);
          expect(['storage_unavailable', 'anchor_timeout']).toContain(a.body.error.code);
          expect(a.headers.get('retry-after')).toMatch(/^\d+$/);
        }
      }
      expect(answers.some((a) => a.status === 503)).toBe(true);
      await until('readiness to fail', async () => (await getJson(`${s.url}/readyz`)).status === 503);
      const ready = await getJson(`${s.url}/readyz`);
      expect(ready.body).toMatchObject({ ok: true, ready: false });
      expect(ready.body.reason).toMatch(/no space left|ENOSPC/i);
      expect((await getJson(`${s.url}/healthz`)).status).toBe(200);
      expect(await (await fetch(`${s.url}/metrics`)).text()).toMatch(/stele_ready 0/);

      rmSync(filler);
      await until('readiness to return', async () => (await getJson(`${s.url}/readyz`)).status === 200);
      for (let i = 200; i < 205; i++) expect((await anchor(i)).status).toBe(201);
      // Every acknowledged anchor is in the log, with its own digest.
      for (const digest of acked) {
        const r = await getJson(`${s.url}/api/ledger/entry?hash=${digest}`);
        expect(r.status).toBe(200);
        expect(r.body.entry.digest).toBe(digest);
      }
      expect((await getJson(`${s.url}/api/ledger/checkpoint`)).body.treeSize).toBeGreaterThanOrEqual(acked.length);
    } finally {
      await s.stop();
    }
  });

  it('a start that cannot write says which filesystem is full and what to do, in one line', async () => {
    const dataDir = join(mount, 'fresh');
    mkdirSync(dataDir);
    const filler = join(mount, 'filler2');
    fill(filler);
    const sandbox = new Sandbox('stele-full-');
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
      ]);
      expect(r.code).toBe(3);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain(`the filesystem holding ${dataDir} is full`);
    } finally {
      sandbox.cleanup();
      rmSync(filler);
    }
  });
});
