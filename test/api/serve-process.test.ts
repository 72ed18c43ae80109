// `stele serve` as a real process: the JSON banner, tlogcheck over HTTP (tiles and JSON
// proofs against Go's reference packages), graceful shutdown, and `stele index rebuild`.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runTlogcheck } from '../helpers/tlogcheck.js';
import { digestOf, getJson, postAnchor } from './server.js';
import { scratchDir } from '../helpers/tmp.js';

interface Banner {
  url: string;
  origin: string;
  keyId: string;
  vkey: string;
  dataDir: string;
}

function build(): void {
  const r = spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: repoRoot, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`build failed: ${r.stdout}${r.stderr}`);
}

async function serve(args: string[]): Promise<{ child: ChildProcess; banner: Banner; stderr: () => string }> {
  const child = spawn(
    process.execPath,
    ['dist/cli/main.js', 'serve', '--port', '0', '--json', '--log-level', 'warn', ...args],
    {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const [line] = (await Promise.race([
    once(child.stdout!, 'data'),
    once(child, 'exit').then(() => [Buffer.from('')]),
  ])) as [Buffer];
  if (!line.length) throw new Error(`serve exited: ${err}`);
  return { child, banner: JSON.parse(line.toString()) as Banner, stderr: () => err };
}

describe('stele serve (process)', () => {
  let dataDir: string;
  beforeAll(() => {
    build();
    dataDir = mkdtempSync(join(tmpdir(), 'stele-serve-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('passes tlogcheck over HTTP, tiles and JSON API, with three demo witnesses', async () => {
    const { child, banner } = await serve(['--data-dir', dataDir, '--batch-interval', '25', '--demo-witnesses', '3']);
    try {
      expect(banner.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(banner.keyId).toMatch(/^[0-9a-f]{64}$/);
      // Sizes that cross tile boundaries, in batches of varying size.
      for (const n of [1, 254, 1, 300, 1, 212]) {
        const base = (await getJson(`${banner.url}/api/ledger/checkpoint`)).body.treeSize as number;
        const rs = await Promise.all(
          Array.from({ length: n }, (_, i) =>
            postAnchor(banner.url, { digest: digestOf(base + i), artifact: `f${base + i}` }),
          ),
        );
        expect(rs.every((r) => r.status === 201)).toBe(true);
      }
      const key = (await getJson(`${banner.url}/api/ledger/key`)).body;
      const cp = (await getJson(`${banner.url}/api/ledger/checkpoint`)).body;
      expect(cp.treeSize).toBe(769);
      const old = join(dataDir, 'old.checkpoint');
      writeFileSync(old, (await getJson(`${banner.url}/api/ledger/entry?leaf=300`)).body.checkpoint.note);
      const result = await runTlogcheck([
        '-src',
        banner.url,
        '-vkey',
        banner.vkey,
        ...key.witnesses.flatMap((w: { vkey: string }) => ['-witness', w.vkey]),
        '-api',
        banner.url,
        '-entry-url-template',
        '/api/ledger/entry?leaf=%d',
        '-samples',
        '120',
        '-old-size',
        '1,255,256,257,300,511,512,768',
        '-old-checkpoint',
        old,
      ]);
      expect(result.failures).toEqual([]);
      expect(result.failed).toBe(0);
      expect(result.passed).toBeGreaterThan(100);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });

  it('finishes the batch in flight on SIGTERM: every accepted anchor is answered and kept', async () => {
    const { child, banner } = await serve(['--data-dir', dataDir, '--batch-interval', '1000']);
    const before = (await getJson(`${banner.url}/api/ledger/checkpoint`)).body.treeSize as number;
    const sent = Array.from({ length: 50 }, (_, i) =>
      postAnchor(banner.url, { digest: digestOf(10_000 + i) }).catch(() => null),
    );
    // Wait until the server has accepted all 50 (a fixed pause lost some on a loaded machine):
    // they wait for the 1 s batch when the signal comes.
    for (let i = 0; i < 100; i++) {
      if ((await getJson(`${banner.url}/api/ledger/summary`)).body.lifetimeEntries >= before + 50) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    const answered = (await Promise.all(sent)).filter((r) => r !== null);
    expect(answered).toHaveLength(50);
    expect(answered.every((r) => r!.status === 201)).toBe(true);

    const again = await serve(['--data-dir', dataDir]);
    try {
      const cp = (await getJson(`${again.banner.url}/api/ledger/checkpoint`)).body;
      expect(cp.treeSize).toBe(before + 50);
      for (const r of answered) {
        const e = await getJson(`${again.banner.url}/api/ledger/entry?id=${r!.body.entry.id}`);
        expect(e.status).toBe(200);
      }
    } finally {
      again.child.kill('SIGTERM');
      await once(again.child, 'exit');
    }
  });

  it('rebuilds the lookup index from the record bundles alone', async () => {
    rmSync(join(dataDir, 'private', 'index'), { recursive: true, force: true });
    const r = spawnSync(process.execPath, ['dist/cli/main.js', 'index', 'rebuild', '--data-dir', dataDir, '--json'], {
      cwd: repoRoot,
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).indexed).toBe(819);
    const { child, banner } = await serve(['--data-dir', dataDir]);
    try {
      expect((await getJson(`${banner.url}/api/ledger/entry?hash=${digestOf(700)}`)).body.leafIndex).toBe(700);
      expect((await getJson(`${banner.url}/api/ledger/summary`)).body.entriesByType).toEqual({ ledger_anchor: 819 });
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });

  it('refuses bad configuration with a one-line error and exit code 2', () => {
    const cases: [string[], RegExp][] = [
      [['--port', 'abc'], /port must be a non-negative integer/],
      [['--mode', 'chaos'], /mode must be demo or production/],
      [['--mode', 'production'], /anchor tokens/],
      [['--config', '/nonexistent.toml'], /cannot read config file/],
      [['--origin', 'has space'], /origin/],
    ];
    for (const [args, message] of cases) {
      const r = spawnSync(
        process.execPath,
        ['dist/cli/main.js', 'serve', '--data-dir', scratchDir('stele-bad-'), ...args],
        { cwd: repoRoot, encoding: 'utf8', timeout: 20_000 },
      );
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  });
});
