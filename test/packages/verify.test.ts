// `@stele/verify` as a user gets it: `npm pack` of packages/verify, installed offline (from
// the npm cache `npm ci` filled) into a scratch project that knows nothing else of Stele, which
// then verifies a tlog-proof served by a real log with nothing but `import … from '@stele/verify'`.
// A tampered proof must fail there too, so the check cannot pass by not checking; and the
// install must hold the package's four runtime dependencies, none of the log's.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/serve/log-server.js';
import { digestOf, getJson, postAnchor, startTestServer } from '../api/server.js';
import { repoRoot } from '../helpers/vectors.js';
import { scratchDir } from '../helpers/tmp.js';

const exec = promisify(execFile);
const npm = (args: string[], cwd: string) =>
  exec('npm', args, { cwd, maxBuffer: 64 << 20, env: { ...process.env, npm_config_update_notifier: 'false' } });
const pkgDir = join(repoRoot, 'packages', 'verify');

type LockEntry = Record<string, unknown> & { dependencies?: Record<string, string> };

/** The scratch project's lock: the package and the closure of its dependencies, as `npm ci` resolved them here. */
function scratchLock(tarball: string): object {
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const manifest = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as LockEntry & { version: string };
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
  const packages: Record<string, unknown> = {
    '': { name: 'scratch', dependencies: { '@stele/verify': 'file:stele-verify.tgz' } },
    'node_modules/@stele/verify': {
      version: manifest.version,
      license: manifest.license,
      dependencies: manifest.dependencies,
      resolved: 'file:stele-verify.tgz',
      integrity,
    },
  };
  const queue = Object.keys(manifest.dependencies ?? {});
  while (queue.length > 0) {
    const name = queue.shift()!;
    const path = `node_modules/${name}`;
    if (packages[path]) continue;
    const entry = lock.packages[path];
    if (!entry) throw new Error(`${name} is not in the repository's lock`);
    packages[path] = { ...entry, dev: undefined };
    queue.push(...Object.keys(entry.dependencies ?? {}));
  }
  return { name: 'scratch', lockfileVersion: 3, requires: true, packages };
}

// Only what a user of the package writes (the README's example, with the policy inline).
const VERIFY_SCRIPT = `
import { readFileSync } from 'node:fs';
import { trustFromPolicy, verifyTlogProof } from '@stele/verify';
const [proofFile, vkey, digest] = process.argv.slice(2);
const trust = trustFromPolicy(\`log \${vkey}\\nquorum none\\n\`);
const { report } = await verifyTlogProof(readFileSync(proofFile, 'utf8'), trust, { digest });
const failed = report.checks.filter((c) => c.status === 'FAIL' && c.rule !== 6).map((c) => c.rule);
console.log(JSON.stringify({ result: report.result, verdict: report.verdict, failed }));
`;

describe('the @stele/verify package', () => {
  let srv: RunningServer;
  let project = '';
  let vkey = '';
  let proof = '';
  let packedBytes = 0;

  beforeAll(async () => {
    const dir = scratchDir('stele-package-');
    project = join(dir, 'project');
    await npm(['run', '-s', 'build', '-w', '@stele/verify'], repoRoot);
    const packed = JSON.parse(
      (await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dir], pkgDir)).stdout,
    ) as { filename: string; size: number; files: { path: string }[] }[];
    packedBytes = packed[0]!.size;
    const files = packed[0]!.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining([
        'LICENSE',
        'README.md',
        'package.json',
        'dist/index.js',
        'dist/types/packages/verify/src/index.d.ts',
      ]),
    );
    expect(files.filter((f) => !/^(dist\/|LICENSE$|README\.md$|package\.json$)/.test(f))).toEqual([]);
    // Writers' code stays in the log: no signer, no proof planning, no bundle packing.
    const js = readFileSync(join(pkgDir, 'dist', 'index.js'), 'utf8');
    for (const writer of [
      'class SeedSigner',
      'function planInclusion',
      'class RightEdgeMemo',
      'function packCanonicals',
    ])
      expect(js).not.toContain(writer);

    mkdirSync(project);
    copyFileSync(join(dir, packed[0]!.filename), join(project, 'stele-verify.tgz'));
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({
        name: 'scratch',
        private: true,
        type: 'module',
        dependencies: { '@stele/verify': 'file:stele-verify.tgz' },
      }),
    );
    writeFileSync(join(project, 'package-lock.json'), JSON.stringify(scratchLock(join(project, 'stele-verify.tgz'))));
    await npm(['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], project);
    writeFileSync(join(project, 'verify.mjs'), VERIFY_SCRIPT);

    srv = await startTestServer();
    for (let i = 0; i < 3; i++)
      expect((await postAnchor(srv.url, { digest: digestOf(i), artifact: `pkg-${i}.tgz` })).status).toBe(201);
    vkey = (await getJson(`${srv.url}/api/ledger/key`)).body.vkey as string;
    proof = await (await fetch(`${srv.url}/api/ledger/entry?leaf=1&format=tlog-proof`)).text();
  }, 600_000);

  afterAll(() => srv?.close());

  const verifyIn = async (text: string, digest: string, nodeArgs: string[] = []) => {
    writeFileSync(join(project, 'entry.tlog-proof'), text);
    const { stdout, stderr } = await exec(
      process.execPath,
      [...nodeArgs, 'verify.mjs', 'entry.tlog-proof', vkey, digest],
      { cwd: project },
    );
    return { ...(JSON.parse(stdout) as { result: string; verdict: string; failed: number[] }), stderr };
  };

  /** The served proof with its first inclusion hash flipped. */
  const flippedProof = () => {
    const lines = proof.split('\n');
    const flipped = Buffer.from(lines[3]!, 'base64');
    flipped[0]! ^= 1;
    lines[3] = flipped.toString('base64');
    return lines.join('\n');
  };

  it("installs with only its own dependencies: none of the log's", () => {
    const installed = readdirSync(join(project, 'node_modules')).flatMap((d) =>
      d.startsWith('@') ? readdirSync(join(project, 'node_modules', d)).map((n) => `${d}/${n}`) : [d],
    );
    expect(installed.filter((n) => !n.startsWith('.'))).toEqual(
      expect.arrayContaining(['@stele/verify', '@noble/ed25519', '@noble/hashes', 'canonicalize']),
    );
    for (const heavy of ['lmdb', 'pkcs11js', '@aws-sdk', 'koa', 'pino', 'commander'])
      expect(existsSync(join(project, 'node_modules', heavy)), heavy).toBe(false);
    expect(packedBytes).toBeGreaterThan(0);
  });

  it('verifies a served proof with the file digest, importing only @stele/verify', async () => {
    expect(await verifyIn(proof, digestOf(1))).toEqual({
      result: 'PASS',
      verdict: 'PASS (rule 2 not checked: offline; not witnessed)',
      failed: [],
      stderr: '',
    });
  }, 60_000);

  it("verifies where node:crypto is absent (a browser's case) with @noble/*, and still fails a tampered proof", async () => {
    // Preloaded: the host answers that it has no node:crypto, as a browser has none.
    writeFileSync(
      join(project, 'no-node-crypto.mjs'),
      `const real = process.getBuiltinModule.bind(process);
let asked = false;
process.getBuiltinModule = (id) => (id === 'node:crypto' ? ((asked = true), undefined) : real(id));
process.on('exit', () => asked && process.stderr.write('node:crypto hidden\\n'));
`,
    );
    const hidden = ['--import', './no-node-crypto.mjs'];
    expect(await verifyIn(proof, digestOf(1), hidden)).toEqual({
      result: 'PASS',
      verdict: 'PASS (rule 2 not checked: offline; not witnessed)',
      failed: [],
      stderr: 'node:crypto hidden\n',
    });
    expect(await verifyIn(flippedProof(), digestOf(1), hidden)).toMatchObject({ result: 'FAIL', failed: [4] });
  }, 60_000);

  it('fails a proof whose inclusion hash is flipped, and a digest of another file', async () => {
    expect(await verifyIn(flippedProof(), digestOf(1))).toMatchObject({ result: 'FAIL', failed: [4] });
    expect(await verifyIn(proof, digestOf(2))).toMatchObject({ result: 'FAIL', failed: [3] });
  }, 60_000);

  it('resolves only the package root: deep paths are closed', async () => {
    const tryImport = (spec: string) =>
      exec(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(spec)})`], { cwd: project });
    await expect(tryImport('@stele/verify')).resolves.toBeDefined();
    await expect(tryImport('@stele/verify/dist/index.js')).rejects.toThrow(/ERR_PACKAGE_PATH_NOT_EXPORTED/);
  }, 60_000);
});

describe('installing the repository', () => {
  // npm 11.16+ lists unreviewed install scripts after every install; npm 12 skips them.
  it('has every dependency install script reviewed in package.json allowScripts', async () => {
    const { stdout } = await npm(['install-scripts', 'ls', '--json'], repoRoot);
    expect((JSON.parse(stdout) as { allowScripts: unknown[] }).allowScripts).toEqual([]);
  }, 60_000);
});
