// A log whose checkpoints are signed inside an HSM (SoftHSM2 through PKCS#11), end to end:
// `stele key generate` makes the log's and a witness's Ed25519 keys in the token, `stele
// witness serve --signer pkcs11:…` cosigns with its token key, `stele serve --signer
// pkcs11:…` signs checkpoints with the log's; the CLI anchors and verifies every §4.3 rule
// (witness cosignatures included), and tlogcheck (Go's note and tlog) accepts the log with
// the vkey read from the token. Then what an operator gets wrong: wrong PIN, missing token,
// missing key, a module that is not there, a PIN in the URI — one line, exit 2, no PIN.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatPrivateKey, parsePrivateKey } from '../../src/keys/local-signer.js';
import { SIG_ED25519, formatVkey, keyIdOf, makeVerifier, openNote, parseVkey } from '../../src/core/note.js';
import { CLI, type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { runTlogcheck, tlogcheckBinary } from '../helpers/tlogcheck.js';
import type { JsonObject } from '../helpers/json.js';
import { type TestToken, softHsm } from './softhsm.js';

const ORIGIN = 'hsm.test/log';
const WITNESS = 'witness.hsm.test';

type Json = JsonObject;

describe('a log signed in SoftHSM2, end to end', () => {
  let sb: Sandbox;
  let token: TestToken;
  let logKey: { keyId: string; vkey: string };
  let witnessKey: { keyId: string; vkey: string };
  let witness: { proc: ChildProcess; url: string; vkey: string; stderr: () => string };
  let serve: RunningServe;
  const dataDir = () => join(sb.root, 'data');

  beforeAll(async () => {
    await Promise.all([ensureBuilt(), tlogcheckBinary()]);
    const hsm = softHsm();
    token = hsm.token('stele');
    sb = new Sandbox('stele-hsm-');
    const gen = await sb.json(['key', 'generate', '--signer', token.uri('log'), '--name', ORIGIN]);
    expect(gen.code, gen.stderr).toBe(0);
    logKey = gen.out as typeof logKey;
    const wgen = await sb.json(['key', 'generate', '--signer', token.uri('witness'), '--name', WITNESS, '--witness']);
    expect(wgen.code, wgen.stderr).toBe(0);
    witnessKey = wgen.out as typeof witnessKey;
    witness = await startWitnessCli(token.uri('witness'), logKey.vkey, join(sb.root, 'witness'));
    serve = await startServe({
      dataDir: dataDir(),
      origin: ORIGIN,
      args: ['--signer', token.uri('log'), '--witness', `${witnessKey.vkey}=${witness.url}`],
    });
    sb.file('release.tgz', 'release bytes\n');
  }, 240_000);

  afterAll(async () => {
    await serve?.stop();
    witness?.proc.kill('SIGTERM');
    sb?.cleanup();
  });

  it('serves with the token key: key id and vkey are those `stele key` printed, and no key file is made', async () => {
    expect(serve.keyId).toBe(logKey.keyId);
    expect(serve.vkey).toBe(logKey.vkey);
    expect(parseVkey(logKey.vkey).type).toBe(SIG_ED25519);
    expect(existsSync(join(dataDir(), 'private', 'log.key'))).toBe(false);
    // The witness serving from the token prints the vkey `stele key generate --witness` did.
    expect(witness.vkey).toBe(witnessKey.vkey);
    const show = await sb.json(['key', 'show', '--signer', token.uri('log'), '--name', ORIGIN]);
    expect(show.out).toEqual({ name: ORIGIN, ...logKey });
  });

  it('anchors, and the CLI verifies every rule with the token-signed, token-cosigned checkpoint', async () => {
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      serve.url,
      '--tenant',
      'acme',
      '--scope',
      'releases',
      '--trust-key',
      logKey.keyId,
    ]);
    expect(init.code, init.stderr).toBe(0);
    const pin = await sb.json(['ledger', 'trust-config', '--add-witness', witnessKey.vkey, '--witness-threshold', '1']);
    expect(pin.code, pin.stderr).toBe(0);
    const a = await sb.json(['ledger', 'anchor', 'release.tgz']);
    expect(a.code, a.stderr).toBe(0);
    expect(a.out.result).toBe('PASS');
    const v = await sb.json(['ledger', 'verify', 'release.tgz']);
    expect(v.out.result).toBe('PASS');
    expect((v.out.checks as Json[]).map((c) => [c.rule, c.status])).toEqual([1, 2, 3, 4, 5, 6].map((n) => [n, 'PASS']));
    expect((v.out.checks as Json[]).find((c) => c.rule === 5)!.detail).toMatch(/^1 valid cosignature/);

    // The published checkpoint opens with the ordinary note verifier, under the token's keys.
    const note = await (await fetch(`${serve.url}/checkpoint`)).text();
    const opened = openNote(note, parseVkey(logKey.vkey), [parseVkey(witnessKey.vkey)]);
    expect(opened.cosignatures.map((c) => c.verifier.name)).toEqual([WITNESS]);
    // …and not under another key of the same name (the check is live).
    const other = makeVerifier(ORIGIN, SIG_ED25519, new Uint8Array(32).fill(9));
    expect(() => openNote(note, other)).toThrow();
  });

  it('tlogcheck passes with the vkey read from the token', async () => {
    for (let i = 0; i < 5; i++) {
      sb.file(`more-${i}.bin`, `more ${i}\n`);
      expect((await sb.run(['ledger', 'anchor', `more-${i}.bin`])).code).toBe(0);
    }
    await serve.stop();
    const r = await runTlogcheck([
      '-src',
      join(dataDir(), 'log'),
      '-vkey',
      logKey.vkey,
      '-origin',
      ORIGIN,
      '-samples',
      '20',
      '-full=true',
    ]);
    const detail = `${r.stdout}\n${r.stderr}`;
    expect(r.failures, detail).toEqual([]);
    expect(r.code, detail).toBe(0);
    expect(r.stdout).toContain('PASS checkpoint signature');
    // A vkey that is not the token's fails the same check.
    const wrong = formatVkey(makeVerifier(ORIGIN, SIG_ED25519, new Uint8Array(32).fill(3)));
    const bad = await runTlogcheck([
      '-src',
      join(dataDir(), 'log'),
      '-vkey',
      wrong,
      '-origin',
      ORIGIN,
      '-samples',
      '1',
    ]);
    expect(bad.code).not.toBe(0);
  });

  it('import puts a key file into the token: same key id and vkey as the file', async () => {
    const name = 'imported.hsm.test/log';
    const file = sb.file('imported.key', `${formatPrivateKey(name, new Uint8Array(32).fill(42))}\n`);
    const local = parsePrivateKey(formatPrivateKey(name, new Uint8Array(32).fill(42)));
    const r = await sb.json(['key', 'import', '--signer', token.uri('imported'), '--name', name, '--key-file', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.out.keyId).toBe(keyIdOf(local.publicKey));
    expect(r.out.vkey).toBe(formatVkey(makeVerifier(name, SIG_ED25519, local.publicKey)));
    const check = await sb.run(['key', 'check', '--signer', token.uri('imported'), '--name', name]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain('signs and verifies');
    // A second key under the same label is refused (a label names one key).
    const again = await sb.run(['key', 'generate', '--signer', token.uri('imported'), '--name', name]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/already has an object labelled "imported"/);
  });

  describe('a key that cannot be used: one line, exit 2, the PIN never shown', () => {
    const wrongPin = '77731-wrong';
    const cases: [string, () => string, RegExp][] = [
      [
        'wrong PIN',
        () => token.uri('log', { 'pin-source': `file:${sb.file('wrong.pin', `${wrongPin}\n`)}` }),
        /wrong PIN for token "stele"/,
      ],
      [
        'missing token',
        () => token.uri('log').replace('token=stele', 'token=absent'),
        /no token matches pkcs11:token=absent; tokens present: "stele"/,
      ],
      ['missing object', () => token.uri('no-such-key'), /token "stele" has no Ed25519 public key "no-such-key"/],
      [
        'missing module',
        () => token.uri('log', { 'module-path': '/nonexistent/libpkcs11.so' }),
        /PKCS#11 module \/nonexistent\/libpkcs11\.so does not exist/,
      ],
      ['PIN in the URI', () => `${token.uri('log')}&pin-value=${token.pin}`, /pin-value is refused/],
      [
        'no PIN at all',
        () => token.uri('log').replace(/&pin-source=[^&]*/, ''),
        /needs a PIN: give pin-source=file:<path> in the URI or set STELE_PKCS11_PIN/,
      ],
    ];
    for (const [what, uri, message] of cases) {
      it(`${what}: stele serve refuses to start`, async () => {
        const r = await sb.run([
          'serve',
          '--data-dir',
          join(sb.root, `refused-${what.replace(/\W/g, '')}`),
          '--port',
          '0',
          '--origin',
          ORIGIN,
          '--log-level',
          'debug',
          '--signer',
          uri(),
        ]);
        expect(r.code, r.stderr).toBe(2);
        const lines = r.stderr.trim().split('\n');
        expect(lines.at(-1)).toMatch(new RegExp(`^stele: HSM: .*${message.source}`));
        expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
        for (const secret of [token.pin, wrongPin]) {
          expect(r.stderr).not.toContain(secret);
          expect(r.stdout).not.toContain(secret);
        }
      });
    }

    it('the PIN from STELE_PKCS11_PIN works, and a wrong one there is refused the same way', async () => {
      const noSource = token.uri('log').replace(/&pin-source=[^&]*/, '');
      const ok = await sb.run(['key', 'check', '--signer', noSource, '--name', ORIGIN], {
        STELE_PKCS11_PIN: token.pin,
      });
      expect(ok.code, ok.stderr).toBe(0);
      const bad = await sb.run(['key', 'check', '--signer', noSource, '--name', ORIGIN], {
        STELE_PKCS11_PIN: wrongPin,
      });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toBe('stele: HSM: wrong PIN for token "stele"\n');
    });

    it('stele witness serve refuses a wrong PIN the same way', async () => {
      const pinFile = join(sb.root, 'w-wrong.pin');
      writeFileSync(pinFile, wrongPin);
      const r = await sb.run([
        'witness',
        'serve',
        '--data-dir',
        join(sb.root, 'w2'),
        '--name',
        WITNESS,
        '--log',
        logKey.vkey,
        '--port',
        '0',
        '--signer',
        token.uri('witness', { 'pin-source': `file:${pinFile}` }),
      ]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('stele: HSM: wrong PIN for token "stele"\n');
    });
  });
});

/** `stele witness serve --signer <uri> --json` on a free port; resolves once it prints its ready line. */
async function startWitnessCli(uri: string, logVkey: string, dir: string) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('STELE_')) delete env[k];
  const proc = spawn(
    process.execPath,
    [
      CLI,
      'witness',
      'serve',
      '--data-dir',
      dir,
      '--name',
      WITNESS,
      '--log',
      logVkey,
      '--port',
      '0',
      '--log-level',
      'warn',
      '--signer',
      uri,
      '--json',
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr += d));
  const info = await new Promise<{ url: string; vkey: string }>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`witness did not start: ${stderr}`)), 30_000);
    proc.stdout!.on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) {
        clearTimeout(timer);
        resolve(JSON.parse(buf.slice(0, buf.indexOf('\n'))) as { url: string; vkey: string });
      }
    });
    proc.once('exit', (code) => reject(new Error(`witness exited with ${code}: ${stderr}`)));
  });
  return { proc, ...info, stderr: () => stderr };
}
