// `npx stele` in a fresh clone runs the clone's built CLI at once (issue 33): `npm ci` links
// `stele` into node_modules/.bin from the workspace packages/bin, and npx runs a local bin
// without installing anything. (Were `stele` the root package's own bin, npx would copy the
// clone into its cache as a `file:` dependency and build it there: minutes, silently.)
// A `git clone` of the repository (its committed state), an empty npm cache, and of `npm ci`
// the part that links the bin (`-w @stele/bin`); the rest of `npm ci` installs the
// dependencies and builds dist/, which the clone borrows from this checkout.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt } from '../helpers/cli.js';
import { repoRoot } from '../helpers/vectors.js';

let root: string;
let clone: string;
let cache: string;

/** The environment of a user with an empty npm cache (nothing of the npm running this test). */
function userEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^npm_/i.test(k) && !k.startsWith('STELE_') && !k.startsWith('XDG_')) env[k] = v;
  return { ...env, npm_config_cache: cache, XDG_CONFIG_HOME: join(root, 'config'), NO_COLOR: '1' };
}

function sh(cmd: string, args: string[], cwd: string) {
  return spawnSync(cmd, args, { cwd, env: userEnv(), encoding: 'utf8', timeout: 120_000 });
}

beforeAll(async () => {
  await ensureBuilt();
  root = mkdtempSync(join(tmpdir(), 'stele-npx-'));
  clone = join(root, 'clone');
  cache = join(root, 'npm-cache');
  mkdirSync(cache);
  const git = sh('git', ['clone', '--quiet', repoRoot, clone], root);
  expect(git.status, git.stderr).toBe(0);
  const ci = sh('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '-w', '@stele/bin'], clone);
  expect(ci.status, ci.stderr).toBe(0);
  symlinkSync(join(repoRoot, 'dist'), join(clone, 'dist'));
}, 180_000);
afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('npx stele in a fresh clone', () => {
  it('runs the built CLI from node_modules/.bin, installing nothing into the npm cache', () => {
    const r = sh('npx', ['stele', '--version'], clone);
    expect(r.status, r.stderr).toBe(0);
    const pkg = JSON.parse(readFileSync(join(clone, 'package.json'), 'utf8')) as { version: string };
    expect(r.stdout).toBe(`${pkg.version}\n`);
    // npx installs what it runs under <cache>/_npx; a local bin needs nothing there.
    expect(existsSync(join(cache, '_npx'))).toBe(false);
  });

  it('prints its hints as the user ran it: `npx stele …`', () => {
    const r = sh('npx', ['stele', 'ledger', 'status'], clone);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^stele: no configuration at .*; run `npx stele ledger init` first/m);
  });

  it('`node dist/cli/main.js` in the clone (as `npm start` runs it) hints `npx stele` too', () => {
    const r = sh(process.execPath, ['dist/cli/main.js', 'ledger', 'status'], clone);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/run `npx stele ledger init` first/);
  });

  it('the root package names no `stele` bin (npx would install the clone for it); packages/bin does', () => {
    const rootPkg = JSON.parse(readFileSync(join(clone, 'package.json'), 'utf8')) as { bin?: unknown };
    expect(rootPkg.bin).toBeUndefined();
    const binPkg = JSON.parse(readFileSync(join(clone, 'packages', 'bin', 'package.json'), 'utf8')) as {
      bin: Record<string, string>;
    };
    expect(binPkg.bin).toEqual({ stele: 'stele.js' });
  });
});
