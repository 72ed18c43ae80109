// A fast CLI (issue 33): `stele --version` and `stele --help` load commander and nothing of
// the libraries the commands use, and a command loads only its own group, never the AWS SDK,
// Koa, pino, LMDB, PKCS#11, the OIDC provider, Cedar or prom-client unless it uses them; nor
// the pure-JS hashes and Ed25519 (@noble/*), bundled for where Node's crypto is absent.
// Checked on the built CLI (the bundle of packages/bin/bundle.ts, where commander and a few
// small libraries are bundled and every other package stays in node_modules) as a
// subprocess, with a module hook that lists every module it loads. Also: the top-level help built from cli/commands/groups.ts is the help the groups'
// own definitions give, so the two cannot drift apart.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram, invokedCommand, VERSION } from '../../cli/program.js';
import { anchorRequest } from '../../src/core/anchor.js';
import { SIG_ED25519, formatVkey, keyIdOf, makeVerifier } from '../../src/core/note.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { CLI, Sandbox, ensureBuilt } from '../helpers/cli.js';
import { writeModuleHook } from '../helpers/module-hook.js';
import { repoRoot } from '../helpers/vectors.js';

const HEAVY = [
  '@aws-sdk',
  'koa',
  '@koa',
  'pino',
  'lmdb',
  'pkcs11js',
  'oidc-provider',
  '@cedar-policy',
  'prom-client',
  'jose',
];

let sb: Sandbox;
let hook: string;

beforeAll(async () => {
  await ensureBuilt();
  sb = new Sandbox('stele-startup-');
  // Registered with --import: appends the URL of every module the CLI loads to $LOADED.
  hook = writeModuleHook(sb.root);
}, 180_000);
afterAll(() => sb?.cleanup());

/** The packages under node_modules that `stele <args>` loads, the bundle's files it loads, and its stdout. */
function packagesLoaded(args: string[]): { packages: string[]; files: string[]; stdout: string } {
  const loaded = join(sb.root, `loaded-${args.join('_').replace(/\W/g, '')}.txt`);
  writeFileSync(loaded, '');
  const r = spawnSync(process.execPath, ['--import', hook, CLI, ...args], {
    cwd: sb.work,
    env: sb.env({ LOADED: loaded }),
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  const packages = new Set<string>();
  const files = new Set<string>();
  for (const url of readFileSync(loaded, 'utf8').split('\n')) {
    const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (m) packages.add(m[1]!);
    else if (url.startsWith(BUNDLE)) files.add(url.slice(BUNDLE.length));
  }
  return { packages: [...packages].sort(), files: [...files].sort(), stdout: r.stdout };
}

const BUNDLE = pathToFileURL(join(repoRoot, 'dist', 'cli', '/')).href;
/** The bundle's chunk of what every command loads: commander, the program, the command tables. */
const commanderChunk = (files: string[]) => files.filter((f) => /^cli-[\w-]+\.js$/.test(f));

/** The @noble/hashes SHA-2 and @noble/ed25519 modules bundled into `files` (of dist/cli), from their source maps. */
function nobleIn(files: string[]): string[] {
  const found = new Set<string>();
  for (const f of files) {
    const mapFile = join(repoRoot, 'dist', 'cli', `${f}.map`);
    if (!existsSync(mapFile)) continue; // a file of re-exports only: no code of its own
    const map = JSON.parse(readFileSync(mapFile, 'utf8')) as { sources: string[] };
    for (const src of map.sources) {
      const m = /node_modules\/(@noble\/(?:hashes\/sha2|ed25519\/index)\.js)$/.exec(src);
      if (m) found.add(m[1]!);
    }
  }
  return [...found].sort();
}

const heavyIn = (packages: string[]) =>
  packages.filter((p) => HEAVY.some((h) => p === h || p.startsWith(`${h}/`) || p.startsWith(`${h}-`)));

describe('what the CLI loads at start', () => {
  it('--version loads no package at all, and prints the version commander and package.json have', () => {
    const r = packagesLoaded(['--version']);
    expect(r.packages).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    expect(r.stdout).toBe(`${pkg.version}\n`);
    expect(VERSION).toBe(pkg.version);
  });

  it('--help loads commander (bundled) and no package, and lists every command', () => {
    const r = packagesLoaded(['--help']); // the first: rendered, not replayed
    expect(r.packages).toEqual([]);
    expect(commanderChunk(r.files)).toHaveLength(1);
    for (const c of ['serve', 'index', 'ledger', 'verify', 'log', 'witness', 'mirror', 'control', 'key', 'completion'])
      expect(r.stdout).toMatch(new RegExp(`^  ${c}\\b`, 'm'));
  });

  it('a second --help replays the help the first one printed, loading neither commander nor any package', () => {
    const first = packagesLoaded(['--help']);
    const second = packagesLoaded(['--help']);
    expect(second.packages).toEqual([]);
    expect(commanderChunk(second.files)).toEqual([]);
    expect(second.stdout).toBe(first.stdout);
    expect(second.stdout).toMatch(/^Usage: stele \[options\] \[command\]/);
  });

  it.each([
    [['ledger', 'verify', '--help']],
    [['ledger', 'anchor', '--help']],
    [['verify', '--help']],
    [['serve', '--help']],
    [['control', 'evaluate', '--help']],
    [['witness', 'serve', '--help']],
    [['key', 'show', '--help']],
  ])('stele %j loads none of the heavy libraries', (args) => {
    expect(heavyIn(packagesLoaded(args).packages)).toEqual([]);
  });

  it('`ledger verify <file>` loads neither ML-DSA (no type 0x06 key pinned) nor cli-progress (no terminal)', () => {
    const r = packagesLoaded(['ledger', 'verify', '--help']);
    expect(r.packages).not.toContain('@noble/post-quantum');
    expect(r.packages).not.toContain('cli-progress');
  });

  it('`ledger verify <file>` against a local copy of a log loads neither @noble/hashes nor @noble/ed25519: Node hashes and verifies', async () => {
    const body = 'a release\n';
    const file = join(sb.work, 'release.tgz');
    writeFileSync(file, body);
    const digest = createHash('sha256').update(body).digest('hex');
    const origin = 'startup.test/log';
    const dataDir = join(sb.root, 'log');
    const log = await openLocalLog({ dataDir, origin, fsync: false, batchInterval: 1, maxBatch: 8 });
    const anchors = ['0', '1', '2'].map((d) => createHash('sha256').update(d).digest('hex'));
    anchors.splice(1, 0, digest);
    await Promise.all(anchors.map((d) => log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', d, {}))));
    await log.sequencer.close();
    const key = log.signer.publicKey;
    const vkey = formatVkey(makeVerifier(origin, SIG_ED25519, key));
    packagesLoaded(['ledger', 'init', '--vkey', vkey, '--trust-key', keyIdOf(key), '--tiles', join(dataDir, 'log')]);

    const r = packagesLoaded(['ledger', 'verify', file]);
    expect(r.stdout).toMatch(/^ {2}PASS {2}4\. Inclusion: leaf index 1, tree size 4/m);
    expect(r.files.length).toBeGreaterThan(1);
    expect(nobleIn(r.files)).toEqual([]);
    // The test would see them: the bundle holds both, in files of their own that this run did not load.
    const bundled = readdirSync(join(repoRoot, 'dist', 'cli')).filter((f) => f.endsWith('.js'));
    expect(nobleIn(bundled)).toEqual(['@noble/ed25519/index.js', '@noble/hashes/sha2.js']);
  });

  it('the test would see them: `completion bash` loads every group, and with it jose (dev-idp)', () => {
    expect(heavyIn(packagesLoaded(['completion', 'bash']).packages)).toContain('jose');
  });
});

describe('the command list from cli/commands/groups.ts', () => {
  it('is the help the groups give when every group is loaded', async () => {
    const listed = await buildProgram(['--help']);
    const loaded = await buildProgram([], true);
    expect(listed.helpInformation()).toBe(loaded.helpInformation());
  });

  it('each command loads its own group: its subcommands are there, the other groups are listed only', async () => {
    const p = await buildProgram(['-q', 'ledger', 'verify', 'x']);
    const ledger = p.commands.find((c) => c.name() === 'ledger')!;
    expect(ledger.commands.map((c) => c.name())).toContain('verify');
    expect(p.commands.find((c) => c.name() === 'control')!.commands).toEqual([]);
  });

  it('`stele ledger --help` lists from cli/commands/ledger.ts the help the subcommands give when loaded', async () => {
    const ledgerOf = (p: Awaited<ReturnType<typeof buildProgram>>) => p.commands.find((c) => c.name() === 'ledger')!;
    const listed = ledgerOf(await buildProgram(['ledger', '--help']));
    const loaded = ledgerOf(await buildProgram([], true));
    expect(listed.helpInformation()).toBe(loaded.helpInformation());
    // `ledger verify` loads its own subcommand only: the others are listed, with no options.
    const run = ledgerOf(await buildProgram(['ledger', 'verify', 'x']));
    expect(run.commands.find((c) => c.name() === 'verify')!.options.length).toBeGreaterThan(0);
    expect(run.commands.find((c) => c.name() === 'mirror')!.options).toEqual([]);
  });

  it('finds the invoked command past global options and in `help <command>`', () => {
    expect(invokedCommand(['-v', 'serve', '--port', '0'])).toBe('serve');
    expect(invokedCommand(['help', 'ledger'])).toBe('ledger');
    expect(invokedCommand(['--help'])).toBeUndefined();
    expect(invokedCommand(['--', 'ledger'])).toBeUndefined();
  });
});
