// `stele/verify` as a user gets it: `npm pack` of this repository, installed offline (from the
// npm cache `npm ci` filled) into a scratch project that knows nothing else of Stele, which
// then verifies a tlog-proof served by a real log with nothing but `import … from 'stele/verify'`.
// A tampered proof must fail there too, so the check cannot pass by not checking.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/serve.js';
import { digestOf, getJson, postAnchor, startTestServer } from './api/server.js';
import { repoRoot } from './helpers/vectors.js';
import { scratchDir } from './helpers/tmp.js';

const exec = promisify(execFile);
const npm = (args: string[], cwd: string) =>
  exec('npm', args, { cwd, maxBuffer: 64 << 20, env: { ...process.env, npm_config_update_notifier: 'false' } });

/** The scratch project's lock: the repository's production dependencies, resolved as `npm ci` resolved them. */
function scratchLock(tarball: string): object {
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, Record<string, unknown>>;
  };
  const root = lock.packages['']!;
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
  const packages: Record<string, unknown> = {
    '': { name: 'scratch', dependencies: { stele: 'file:stele.tgz' } },
    'node_modules/stele': {
      version: root.version,
      license: root.license,
      dependencies: root.dependencies,
      bin: root.bin,
      engines: root.engines,
      resolved: 'file:stele.tgz',
      integrity,
    },
  };
  for (const [path, entry] of Object.entries(lock.packages))
    if (path !== '' && !entry.dev && !entry.link) packages[path] = entry;
  return { name: 'scratch', lockfileVersion: 3, requires: true, packages };
}

// Only what a user of the package would write: the module specifier is the package's subpath.
const VERIFY_SCRIPT = `
import { readFileSync } from 'node:fs';
import { fromHex, parseTlogProof, parseVkey, verifyTlogProof } from 'stele/verify';
const [proofFile, vkey, digest] = process.argv.slice(2);
const result = verifyTlogProof(parseTlogProof(readFileSync(proofFile, 'utf8')), parseVkey(vkey), [], fromHex(digest));
console.log(JSON.stringify({ ok: result.ok, checks: Object.keys(result.checks), failed: result.failed ?? null }));
`;

describe('the stele/verify package', () => {
  let srv: RunningServer;
  let project = '';
  let vkey = '';
  let proof = '';

  beforeAll(async () => {
    const dir = scratchDir('stele-package-');
    project = join(dir, 'project');
    // The build `npm pack` ships: the core's JavaScript and declarations.
    await exec(
      process.execPath,
      [join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(repoRoot, 'tsconfig.verify.json')],
      { cwd: repoRoot },
    );
    const packed = JSON.parse(
      (await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dir], repoRoot)).stdout,
    ) as { filename: string; files: { path: string }[] }[];
    const files = packed[0]!.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining([
        'LICENSE',
        'README.md',
        'package.json',
        'dist/src/core/index.js',
        'dist/src/core/index.d.ts',
      ]),
    );
    expect(files.filter((f) => !/^(dist\/|LICENSE$|README\.md$|package\.json$)/.test(f))).toEqual([]);

    mkdirSync(project);
    copyFileSync(join(dir, packed[0]!.filename), join(project, 'stele.tgz'));
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'scratch', private: true, type: 'module', dependencies: { stele: 'file:stele.tgz' } }),
    );
    writeFileSync(join(project, 'package-lock.json'), JSON.stringify(scratchLock(join(project, 'stele.tgz'))));
    await npm(['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], project);
    writeFileSync(join(project, 'verify.mjs'), VERIFY_SCRIPT);

    srv = await startTestServer();
    for (let i = 0; i < 3; i++)
      expect((await postAnchor(srv.url, { digest: digestOf(i), artifact: `pkg-${i}.tgz` })).status).toBe(201);
    vkey = (await getJson(`${srv.url}/api/ledger/key`)).body.vkey as string;
    proof = await (await fetch(`${srv.url}/api/ledger/entry?leaf=1&format=tlog-proof`)).text();
  }, 600_000);

  afterAll(() => srv?.close());

  const verifyIn = async (text: string, digest: string) => {
    writeFileSync(join(project, 'entry.tlog-proof'), text);
    const { stdout } = await exec(process.execPath, ['verify.mjs', 'entry.tlog-proof', vkey, digest], { cwd: project });
    return JSON.parse(stdout) as { ok: boolean; checks: string[]; failed: string | null };
  };

  it('verifies a served proof with the file digest, importing only stele/verify', async () => {
    expect(await verifyIn(proof, digestOf(1))).toEqual({
      ok: true,
      checks: ['signature', 'entry', 'inclusion', 'digest'],
      failed: null,
    });
  }, 60_000);

  it('fails a proof whose inclusion hash is flipped, and a digest of another file', async () => {
    const lines = proof.split('\n');
    const flipped = Buffer.from(lines[3]!, 'base64');
    flipped[0]! ^= 1;
    lines[3] = flipped.toString('base64');
    expect(await verifyIn(lines.join('\n'), digestOf(1))).toMatchObject({ ok: false, failed: 'inclusion' });
    expect(await verifyIn(proof, digestOf(2))).toMatchObject({ ok: false, failed: 'digest' });
  }, 60_000);

  it('resolves only the documented subpath: the package root and deep paths are closed', async () => {
    const tryImport = (spec: string) =>
      exec(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(spec)})`], { cwd: project });
    await expect(tryImport('stele/verify')).resolves.toBeDefined();
    await expect(tryImport('stele/dist/src/core/hash.js')).rejects.toThrow(/ERR_PACKAGE_PATH_NOT_EXPORTED/);
  }, 60_000);
});

describe('installing the repository', () => {
  // npm 11.16+ lists unreviewed install scripts after every install; npm 12 skips them.
  it('has every dependency install script reviewed in package.json allowScripts', async () => {
    const { stdout } = await npm(['install-scripts', 'ls', '--json'], repoRoot);
    expect((JSON.parse(stdout) as { allowScripts: unknown[] }).allowScripts).toEqual([]);
  }, 60_000);
});
