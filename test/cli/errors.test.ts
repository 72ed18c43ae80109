// Bad input gets one clear line on stderr and the documented exit code (never a stack
// trace): 2 for usage and configuration errors, 3 for network and I/O errors. And every
// command answers --help.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configToToml } from '../../src/client/config.js';
import { EMPTY_ROOT, toHex } from '../../src/hash.js';
import { SIG_ED25519, SeedSigner, formatVkey, keyIdOf, makeVerifier } from '../../src/note.js';
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

describe('bad input and exit codes', () => {
  let sb: Sandbox;
  let down: string;

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-errors-');
    down = `http://127.0.0.1:${await closedPort()}`;
    mkdirSync(join(sb.configHome, 'stele'), { recursive: true });
    writeFileSync(
      sb.configFile,
      configToToml({
        endpoint: down,
        tenant: 'acme',
        scope: 'releases',
        trust: { keyId, origin: key.name, vkey, treeSize: 0, rootHash: toHex(EMPTY_ROOT), witnessThreshold: 0, witnesses: [] },
      }),
    );
    sb.file('present.txt', 'present\n');
  }, 120_000);

  afterAll(() => sb?.cleanup());

  it('a missing file: exit 3', async () => {
    oneLineError(await sb.run(['ledger', 'anchor', 'missing.bin']), 3, /^stele: cannot read missing\.bin: no such file$/);
    oneLineError(await sb.run(['ledger', 'verify', 'missing.bin']), 3, /^stele: cannot read missing\.bin: no such file$/);
    oneLineError(await sb.run(['verify', 'missing.bin', '--anchor']), 3, /^stele: cannot read missing\.bin/);
  });

  it('an unreadable or invalid configuration: exit 2', async () => {
    const dir = join(sb.root, 'a-directory');
    mkdirSync(dir);
    oneLineError(await sb.run(['ledger', 'checkpoint', '--config', dir]), 2, /^stele: cannot read configuration .*a-directory: it is a directory$/);
    const bad = join(sb.root, 'bad.toml');
    writeFileSync(bad, '[ledger\nendpoint = 3\n');
    oneLineError(await sb.run(['ledger', 'checkpoint', '--config', bad]), 2, /^stele: .*bad\.toml is not valid TOML \(line 1/);
    const wrongKey = join(sb.root, 'wrong-key.toml');
    writeFileSync(wrongKey, `[ledger]\nendpoint = "${down}"\n[ledger.trust]\nkey_id = "${'ab'.repeat(32)}"\nvkey = "${vkey}"\n`);
    oneLineError(await sb.run(['ledger', 'verify', 'present.txt', '--config', wrongKey]), 2, /vkey does not hash to the pinned key_id/);
    const noTrust = join(sb.root, 'no-trust.toml');
    writeFileSync(noTrust, `[ledger]\nendpoint = "${down}"\n`);
    oneLineError(await sb.run(['ledger', 'checkpoint', '--config', noTrust]), 2, /no \[ledger\.trust\] table/);
    oneLineError(await sb.run(['ledger', 'checkpoint', '--config', join(sb.root, 'nope.toml')]), 2, /^stele: no configuration at .*nope\.toml; run `stele ledger init` first/);
    // a fresh user with no configuration at all
    const fresh = new Sandbox('stele-errors-fresh-');
    oneLineError(await fresh.run(['ledger', 'verify', 'x']), 2, /^stele: no configuration at .*xdg-config\/stele\/ledger\.toml/);
    fresh.cleanup();
  });

  it('a malformed key id or entry id: exit 2', async () => {
    oneLineError(await sb.run(['ledger', 'init', '--endpoint', down, '--trust-key', 'not-a-key', '--config', join(sb.root, 'n.toml')]), 2, /^stele: malformed key id "not-a-key": expected 64 hex characters/);
    oneLineError(await sb.run(['ledger', 'init', '--endpoint', down, '--trust-key', 'ab'.repeat(31), '--config', join(sb.root, 'n.toml')]), 2, /malformed key id/);
    oneLineError(await sb.run(['ledger', 'proof', 'led_12']), 2, /^stele: malformed entry id "led_12"/);
    oneLineError(await sb.run(['ledger', 'trust-config', '--add-witness', 'nonsense']), 2, /^stele: --add-witness: a vkey has the form/);
    oneLineError(await sb.run(['ledger', 'trust-config', '--witness-threshold', '1']), 2, /witness threshold 1 exceeds the 0 pinned witness/);
    oneLineError(await sb.run(['ledger', 'init', '--endpoint', 'ftp://x', '--trust-key', keyId, '--config', join(sb.root, 'n.toml')]), 2, /must be an http:\/\/ or https:\/\/ URL/);
  });

  it('an unreachable endpoint: exit 3', async () => {
    oneLineError(await sb.run(['ledger', 'init', '--endpoint', down, '--trust-key', keyId, '--config', join(sb.root, 'n.toml')]), 3, /^stele: cannot reach http:\/\/127\.0\.0\.1:\d+\/api\/ledger\/key: connection refused$/);
    oneLineError(await sb.run(['ledger', 'verify', 'present.txt']), 3, /connection refused/);
    oneLineError(await sb.run(['ledger', 'anchor', 'present.txt']), 3, /connection refused/);
    oneLineError(await sb.run(['ledger', 'checkpoint']), 3, /connection refused/);
    oneLineError(await sb.run(['ledger', 'mirror', join(sb.root, 'm')]), 3, /connection refused/);
    oneLineError(await sb.run(['ledger', 'audit', join(sb.root, 'no-such-dir')]), 3, /no such directory/);
  });

  it('usage errors from the parser: exit 2', async () => {
    oneLineError(await sb.run(['ledger', 'anchor']), 2, /missing required argument 'package_file'/);
    oneLineError(await sb.run(['ledger', 'verify', 'present.txt', '--bogus']), 2, /unknown option '--bogus'/);
    oneLineError(await sb.run(['ledger', 'consistency', '--from', '0']), 2, /--from must be an integer ≥ 1/);
    oneLineError(await sb.run(['ledger', 'init', '--endpoint', down]), 2, /required option '--trust-key <key_id>' not specified/);
  });

  it('--help everywhere, documenting the exit codes', async () => {
    const commands = [[], ['ledger'], ['verify'], ...['init', 'trust-config', 'anchor', 'proof', 'verify', 'consistency', 'checkpoint', 'mirror', 'audit'].map((c) => ['ledger', c])];
    const runs = await Promise.all(commands.map((c) => sb.run([...c, '--help'])));
    runs.forEach((r, i) => {
      expect(r.code, commands[i]!.join(' ')).toBe(0);
      expect(r.stdout).toMatch(/Usage: stele/);
      expect(r.stdout).toMatch(/2 +usage or configuration error/);
    });
    expect(runs[0]!.stdout).toMatch(/ledger/);
    expect(runs[2]!.stdout).toMatch(/--anchor/);
    expect(runs[3]!.stdout).toMatch(/--trust-key <key_id>/);
  });
});
