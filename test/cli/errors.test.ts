// Bad input gets one clear line on stderr and the documented exit code (never a stack
// trace): 2 for usage and configuration errors, 3 for network and I/O errors. And every
// command answers --help. The cases are independent and run concurrently.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerLedgerCommands } from '../../cli/commands/ledger.js';
import { registerVerify } from '../../cli/commands/verify.js';
import { configToToml } from '../../src/client/config.js';
import { EMPTY_ROOT, toHex } from '../../src/core/hash.js';
import { SIG_ED25519, SeedSigner, formatVkey, keyIdOf, makeVerifier } from '../../src/core/note.js';
import { type CliRun, Sandbox, ensureBuilt } from '../helpers/cli.js';

const key = new SeedSigner('errors.test/log', new Uint8Array(32).fill(7));
const vkey = formatVkey(makeVerifier(key.name, SIG_ED25519, key.publicKey));
const keyId = keyIdOf(key.publicKey);

/** A loopback port with nothing listening. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

function oneLineError(r: CliRun, code: number, pattern: RegExp): void {
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(code);
  const lines = r.stderr.split('\n').filter((l) => l.length > 0);
  expect(lines.filter((l) => !l.startsWith('(run with --help'))).toHaveLength(1);
  expect(r.stderr).not.toMatch(/^\s+at /m);
  expect(lines[0]).toMatch(pattern);
}

let sb: Sandbox;
let down: string;
/** A loopback port a server of this process holds. */
const holder = createServer();
let taken: number;
const at = (name: string) => join(sb.root, name);

beforeAll(async () => {
  await ensureBuilt();
  sb = new Sandbox('stele-errors-');
  down = `http://127.0.0.1:${await closedPort()}`;
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
  taken = (holder.address() as { port: number }).port;
  mkdirSync(join(sb.configHome, 'stele'), { recursive: true });
  writeFileSync(
    sb.configFile,
    configToToml({
      endpoint: down,
      tenant: 'acme',
      scope: 'releases',
      trust: {
        keyId,
        origin: key.name,
        vkey,
        treeSize: 0,
        rootHash: toHex(EMPTY_ROOT),
        policy: { logs: [], witnesses: [], groups: [], quorum: 'none' },
      },
    }),
  );
  sb.file('present.txt', 'present\n');
  mkdirSync(at('a-directory'));
  mkdirSync(at('private-is-a-file'));
  writeFileSync(join(at('private-is-a-file'), 'private'), '');
  writeFileSync(at('bad.toml'), '[ledger\nendpoint = 3\n');
  writeFileSync(
    at('wrong-key.toml'),
    `[ledger]\nendpoint = "${down}"\n[ledger.trust]\nkey_id = "${'ab'.repeat(32)}"\nvkey = "${vkey}"\n`,
  );
  writeFileSync(at('no-trust.toml'), `[ledger]\nendpoint = "${down}"\n`);
}, 120_000);

afterAll(() => {
  holder.close();
  sb?.cleanup();
});

type Case = [title: string, args: () => string[], code: number, pattern: RegExp];

/** The long-running commands, with the options each requires. */
const SERVER_COMMANDS = [
  ['serve'],
  ['control', 'serve'],
  ['witness', 'serve', '--name', 'w.test', '--log', vkey],
  ['mirror', 'serve', '--name', 'm.test', '--log', vkey],
];

const cases: Case[] = [
  // a missing file: I/O error
  [
    'anchor of a missing file',
    () => ['ledger', 'anchor', 'missing.bin'],
    3,
    /^stele: cannot read missing\.bin: no such file$/,
  ],
  [
    'verify --anchor of a missing file',
    () => ['verify', 'missing.bin', '--anchor'],
    3,
    /^stele: cannot read missing\.bin: no such file$/,
  ],
  // an unreadable or invalid configuration: configuration error
  [
    'a configuration that is a directory',
    () => ['ledger', 'checkpoint', '--config', at('a-directory')],
    2,
    /^stele: cannot read configuration .*a-directory: it is a directory$/,
  ],
  [
    'a configuration that is not TOML',
    () => ['ledger', 'checkpoint', '--config', at('bad.toml')],
    2,
    /^stele: .*bad\.toml is not valid TOML \(line 1/,
  ],
  [
    'a vkey that is not the pinned key id',
    () => ['ledger', 'verify', 'present.txt', '--config', at('wrong-key.toml')],
    2,
    /vkey does not hash to the pinned key_id/,
  ],
  [
    'a configuration without trust',
    () => ['ledger', 'checkpoint', '--config', at('no-trust.toml')],
    2,
    /no \[ledger\.trust\] table/,
  ],
  [
    'a missing --config file',
    () => ['ledger', 'checkpoint', '--config', at('nope.toml')],
    2,
    /^stele: no configuration at .*nope\.toml; run `node \S+main\.js ledger init` first/,
  ],
  // malformed key ids, entry ids, witness keys, thresholds, URLs: usage error
  [
    'a malformed key id',
    () => ['ledger', 'init', '--endpoint', down, '--trust-key', 'not-a-key', '--config', at('n.toml')],
    2,
    /^stele: malformed key id "not-a-key": expected 64 hex characters/,
  ],
  ['a malformed entry id', () => ['ledger', 'proof', 'led_12'], 2, /^stele: malformed entry id "led_12"/],
  [
    'a malformed witness vkey',
    () => ['ledger', 'trust-config', '--add-witness', 'nonsense'],
    2,
    /^stele: --add-witness: a vkey has the form/,
  ],
  [
    'a threshold above the pinned witnesses',
    () => ['ledger', 'trust-config', '--witness-threshold', '1'],
    2,
    /witness threshold 1 exceeds the 0 pinned witness/,
  ],
  [
    'an endpoint that is not http(s)',
    () => ['ledger', 'init', '--endpoint', 'ftp://x', '--trust-key', keyId, '--config', at('n.toml')],
    2,
    /must be an http:\/\/ or https:\/\/ URL/,
  ],
  // an unreachable endpoint: network error
  [
    'init against an unreachable endpoint',
    () => ['ledger', 'init', '--endpoint', down, '--trust-key', keyId, '--config', at('n.toml')],
    3,
    /^stele: cannot reach http:\/\/127\.0\.0\.1:\d+\/api\/ledger\/key: connection refused \(the log's API is down\? verify from a copy of its tiles with --tiles <dir\|url>\)$/,
  ],
  [
    'verify against an unreachable endpoint',
    () => ['ledger', 'verify', 'present.txt'],
    3,
    /connection refused \(the log's API is down\? verify from a copy of its tiles with --tiles <dir\|url>\)$/,
  ],
  ['anchor against an unreachable endpoint', () => ['ledger', 'anchor', 'present.txt'], 3, /connection refused/],
  ['mirror from an unreachable endpoint', () => ['ledger', 'mirror', at('m')], 3, /connection refused/],
  [
    'mirror into a file',
    () => ['ledger', 'mirror', at('bad.toml')],
    3,
    /^stele: cannot use \S+bad\.toml as the mirror directory: it is a file, not a directory$/,
  ],
  [
    'a trust policy file that is not there',
    () => ['ledger', 'trust-config', '--policy', at('nope.policy')],
    2,
    /^stele: cannot read the policy \S+nope\.policy: no such file$/,
  ],
  ['audit of a missing directory', () => ['ledger', 'audit', at('no-such-dir')], 3, /no such directory/],
  // parser errors: usage
  ['a missing argument', () => ['ledger', 'anchor'], 2, /missing required argument 'files'/],
  ['an unknown option', () => ['ledger', 'verify', 'present.txt', '--bogus'], 2, /unknown option '--bogus'/],
  ['a size below 1', () => ['ledger', 'consistency', '--from', '0'], 2, /--from must be an integer ≥ 1/],
  // every server command: the same log levels (cli/logger.ts), the same words for an address
  // it cannot listen on and for a data directory it cannot use
  ...SERVER_COMMANDS.flatMap((command): Case[] => {
    const name = command.slice(0, 2).join(' ');
    return [
      [
        `${name} with an unknown log level`,
        () => [...command, '--data-dir', at('server'), '--log-level', 'verbose'],
        2,
        /^error: option '--log-level <level>' argument 'verbose' is invalid\. Allowed choices are fatal, error, warn, info/,
      ],
      [
        `${name} on a port in use`,
        () => [...command, '--data-dir', at(`taken-${command[0]}`), '--port', String(taken)],
        3,
        /^stele: cannot listen on 127\.0\.0\.1:\d+: the address is already in use \(another server on that port\?\); choose another with --port$/,
      ],
      [
        `${name} with a file as its data directory`,
        () => [...command, '--data-dir', at('bad.toml'), '--port', '0'],
        3,
        /^stele: cannot use \S+bad\.toml as a data directory: it is a file, not a directory$/,
      ],
    ];
  }),
  [
    'serve on a data directory whose private/ is a file (a file-system error in words)',
    () => ['serve', '--data-dir', at('private-is-a-file'), '--port', '0'],
    3,
    /^stele: cannot create the directory \S+private-is-a-file\/private: it is a file, not a directory$/,
  ],
  [
    'serve on a host that does not resolve',
    () => ['serve', '--data-dir', at('nohost'), '--host', 'no-such-host.invalid', '--port', '0'],
    3,
    /^stele: cannot listen on no-such-host\.invalid:0: no such host$/,
  ],
  [
    'no key to trust',
    () => ['ledger', 'init', '--endpoint', down],
    2,
    /say which log key to trust: --trust-key <key_id> .*or --vkey <vkey>/,
  ],
];

describe.concurrent('bad input and exit codes', () => {
  it.each(cases)('%s', async (_title, args, code, pattern) => {
    oneLineError(await sb.run(args()), code, pattern);
  });

  it('a user with no configuration at all', async () => {
    const fresh = new Sandbox('stele-errors-fresh-');
    try {
      oneLineError(
        await fresh.run(['ledger', 'verify', 'x']),
        2,
        /^stele: no configuration at .*xdg-config\/stele\/ledger\.toml/,
      );
    } finally {
      fresh.cleanup();
    }
  });

  it('--help through the binary', async () => {
    const [top, verify] = await Promise.all([sb.run(['--help']), sb.run(['ledger', 'verify', '--help'])]);
    for (const r of [top, verify]) {
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/Usage: stele/);
      expect(r.stdout).toMatch(/2 +usage or configuration error/);
    }
    expect(verify.stdout).toMatch(/3  leaf hash: the entry records the file's SHA-256/);
  });

  // Every command's help, rendered in-process from the same command definitions.
  const commands = [
    ['ledger'],
    ['verify'],
    ...['init', 'trust-config', 'anchor', 'proof', 'verify', 'consistency', 'checkpoint', 'mirror', 'audit'].map(
      (c) => ['ledger', c],
    ),
  ];
  it.each(commands.map((c) => [c.join(' '), c] as const))(
    '--help for %s documents the exit codes',
    async (_name, c) => {
      let text = '';
      const program = new Command('stele')
        .exitOverride()
        .configureOutput({ writeOut: (t) => (text += t), writeErr: (t) => (text += t) });
      await registerLedgerCommands(program);
      registerVerify(program);
      await expect(program.parseAsync([...c, '--help'], { from: 'user' })).rejects.toMatchObject({
        code: 'commander.helpDisplayed',
        exitCode: 0,
      });
      expect(text).toMatch(/^Usage: stele /);
      expect(text).toMatch(/2 +usage or configuration error/);
      if (c[0] === 'verify') expect(text).toMatch(/--anchor/);
      if (c[1] === 'init') expect(text).toMatch(/--trust-key <key_id>/);
      if (c.length === 2) expect(text).toMatch(/--json/);
    },
  );
});
