// What `stele` runs is the bundle packages/bin/bundle.ts builds (issue 33): the `stele` bin
// loads dist/cli/main.js and a handful of its chunks, never a module of the sources or of a
// tsc build, and what locates files by module path still finds them from a bundled chunk:
// each worker thread (the audit's, the index rebuild's, the sequencer's and the local store's
// writer) and the built explorer. A module hook (in NODE_OPTIONS, so in worker threads too)
// lists every file each process loads.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinsAsObjects, bundleCli, workerEntries } from '../../packages/bin/bundle.js';
import { Sandbox, ensureBuilt, postAnchor, startServe } from '../helpers/cli.js';
import { digestOf, makeLog } from '../helpers/logs.js';
import { writeModuleHook } from '../helpers/module-hook.js';
import { repoRoot } from '../helpers/vectors.js';

const ORIGIN = 'bundle.test/log';
// More than 32 record bundles: the audit checks them on worker threads (src/read/audit.ts).
const ENTRIES = 8500;
const BUNDLE = pathToFileURL(join(repoRoot, 'dist', 'cli', '/')).href;
const REPO = pathToFileURL(join(repoRoot, '/')).href;

let sb: Sandbox;
let hook: string;
let dataDir: string;
let runs = 0;

beforeAll(async () => {
  await ensureBuilt();
  sb = new Sandbox('stele-bundle-');
  hook = writeModuleHook(sb.root);
  dataDir = join(sb.root, 'data');
  await makeLog(dataDir, ORIGIN, [ENTRIES]);
}, 180_000);
afterAll(() => sb?.cleanup());

/** Environment that lists what a process and its workers load into a new file; that file. */
function hooked(): {
  env: Record<string, string>;
  loaded: () => { urls: string[]; bundle: string[]; repo: string[] };
} {
  const file = join(sb.root, `loaded-${++runs}.txt`);
  writeFileSync(file, '');
  const loaded = () => {
    const urls = readFileSync(file, 'utf8').split('\n');
    const ours = urls.filter((u) => u.startsWith(REPO) && !u.includes('/node_modules/'));
    return {
      urls,
      bundle: [...new Set(ours.filter((u) => u.startsWith(BUNDLE)).map((u) => u.slice(BUNDLE.length)))].sort(),
      repo: ours.map((u) => relative(repoRoot, new URL(u).pathname)),
    };
  };
  return { env: { NODE_OPTIONS: `--import ${hook}`, LOADED: file }, loaded };
}

describe('the bundle is what `stele` runs', () => {
  it('the `stele` bin loads main.js and a handful of chunks of dist/cli, nothing of the sources or dist/src', () => {
    const { env, loaded } = hooked();
    const bin = join(repoRoot, 'node_modules', '.bin', 'stele');
    const r = spawnSync(bin, ['ledger', 'verify', '--help'], { cwd: sb.work, env: sb.env(env), encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Usage: stele ledger verify/);
    const { bundle, repo } = loaded();
    expect(repo.filter((p) => !p.startsWith('dist/cli/') && p !== 'packages/bin/stele.js')).toEqual([]);
    expect(bundle).toContain('main.js');
    // tsc's build of the same command loaded about 80 modules of the repository.
    expect(bundle.length).toBeLessThanOrEqual(12);
  });

  it('has a file of its own for the worker of every startModuleWorker call in the sources', () => {
    const workers = Object.keys(workerEntries()).sort();
    expect(workers).toEqual(['bundle-check-worker', 'fs-writer-thread', 'rebuild-worker', 'sequencing-worker']);
    for (const name of workers) expect(existsSync(join(repoRoot, 'dist', 'cli', `${name}.js`)), name).toBe(true);
  });
});

describe("Node's built-ins in the bundle", () => {
  it('are taken as their CommonJS objects, with the names the imports gave; fs.promises read at first use', async () => {
    const code = [
      'import { join, resolve as resolve$1 } from "node:path";',
      'import diagnostics from "node:diagnostics_channel";',
      'import { promises, statSync } from "node:fs";',
      'import { foo } from "./chunk.js";',
      '',
    ].join('\n');
    const out = builtinsAsObjects(code)!.toString();
    expect(out.split('\n')).toEqual([
      'const { join, resolve: resolve$1 } = process.getBuiltinModule("node:path");',
      'const diagnostics = process.getBuiltinModule("node:diagnostics_channel");',
      'const promises = new Proxy({}, { get: (_, k) => process.getBuiltinModule("node:fs").promises[k] }), { statSync } = process.getBuiltinModule("node:fs");',
      'import { foo } from "./chunk.js";',
      '',
    ]);
    // What the lines declare is what Node's modules hold.
    const run = new Function(
      `${out.split('\n').slice(0, 3).join('\n')}; return { join, resolve$1, diagnostics, promises, statSync };`,
    );
    const got = run() as Record<string, { name?: string; readFile?: unknown }>;
    expect(got.resolve$1).toBe((await import('node:path')).resolve);
    expect(got.statSync).toBe((await import('node:fs')).statSync);
    expect(got.promises!.readFile).toBe((await import('node:fs/promises')).readFile);
    expect(builtinsAsObjects('import { foo } from "./chunk.js";\n')).toBeNull();
  });
});

describe('the kept --help (cli/help-cache.ts)', () => {
  it('is rendered anew by a rebuilt bundle, and the older build’s copy removed', async () => {
    // A bundle of its own: `--help` loads nothing outside it, and dist/cli stays as other tests use it.
    const out = join(sb.root, 'own', 'cli');
    const cache = join(sb.root, 'help-cache');
    const help = () => {
      const { env, loaded } = hooked();
      const r = spawnSync(process.execPath, [join(out, 'main.js'), '--help'], {
        env: sb.env({ ...env, XDG_CACHE_HOME: cache }),
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      // Rendered: commander's chunk was loaded; replayed: main.js and help-cache's file alone.
      const ownFiles = loaded().urls.filter((u) => u.startsWith(pathToFileURL(join(out, '/')).href));
      const rendered = ownFiles.some((u) => /\/cli-[\w-]+\.js$/.test(u));
      return { stdout: r.stdout, rendered, kept: readdirSync(join(cache, 'stele')) };
    };
    await bundleCli(out);
    const first = help();
    const replayed = help();
    expect([first.rendered, replayed.rendered]).toEqual([true, false]);
    await bundleCli(out);
    const rebuilt = help();
    expect(rebuilt.rendered).toBe(true);
    expect(rebuilt.stdout).toBe(first.stdout);
    expect(rebuilt.kept).toHaveLength(1);
    expect(rebuilt.kept).not.toEqual(first.kept);
  }, 60_000);
});

describe('worker threads and the explorer, started from the bundle', () => {
  it('`log fsck` checks the record bundles on the audit worker threads', async () => {
    const { env, loaded } = hooked();
    const r = await sb.json(['log', 'fsck', '--data-dir', dataDir], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.out.result).toBe('PASS');
    expect((r.out.audit as { entriesChecked: number }).entriesChecked).toBe(ENTRIES);
    expect(loaded().bundle).toContain('bundle-check-worker.js');
  });

  it('`index rebuild` indexes on its worker threads', async () => {
    rmSync(join(dataDir, 'private', 'index'), { recursive: true, force: true });
    const { env, loaded } = hooked();
    const r = await sb.json(['index', 'rebuild', '--data-dir', dataDir, '--origin', ORIGIN], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.out.indexed).toBe(ENTRIES);
    expect(loaded().bundle).toContain('rebuild-worker.js');
  });

  it('`serve` sequences on its worker, writes through the store writer thread, and serves the explorer', async () => {
    const { env, loaded } = hooked();
    const serve = await startServe({ dataDir, origin: ORIGIN, env });
    try {
      const anchored = await postAnchor(serve.url, digestOf('bundle.test/new', 0));
      expect(anchored.leafIndex).toBe(ENTRIES);
      const page = await fetch(`${serve.url}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toBe(readFileSync(join(repoRoot, 'dist', 'explorer', 'index.html'), 'utf8'));
    } finally {
      await serve.stop();
    }
    expect(loaded().bundle).toEqual(expect.arrayContaining(['sequencing-worker.js', 'fs-writer-thread.js']));
  });
});
