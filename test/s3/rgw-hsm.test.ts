// A self-hosted log on S3-compatible storage (Ceph RGW, test/helpers/rgw.ts) whose checkpoint
// key is in an HSM (SoftHSM2 through PKCS#11, test/pkcs11/softhsm.ts): `stele key generate`
// makes the key in the token, `stele serve` on the S3 backend signs with it (`--signer
// pkcs11:…`, the PIN from pin-source), the CLI verifies an anchor from the gateway's tiles
// with the token's key id, and the checkpoint in the bucket opens with the token's vkey and
// no other. An API replica given that vkey serves the log without ever opening the token
// (its environment names one it could not open) and follows a restarted sequencer; `stele
// log fsck --aws` reads the key from the token. A replica with only the token URI, a wrong
// PIN and a second signing key are refused with one line and exit 2, the PIN never shown.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIG_ED25519, makeVerifier, openNote, parseVkey } from '../../src/core/note.js';
import { getJson } from '../api/server.js';
import { type RunningServe, Sandbox, postAnchor, startServe } from '../helpers/cli.js';
import { type RgwServer, allowAnonymousLogReads, rgwLogEnv, startRgwWithCli } from '../helpers/rgw.js';
import { scratchDir } from '../helpers/tmp.js';
import { type TestToken, softHsm } from '../pkcs11/softhsm.js';

const ORIGIN = 'rgw.hsm.test/log';
const PREFIX = 'hsm/';

let rgw: RgwServer;
let token: TestToken;
let sb: Sandbox;
let logKey: { keyId: string; vkey: string };
let sequencer: RunningServe | undefined;
const running: RunningServe[] = [];

/** The S3 settings every process of this log shares, as in the README's stele.env. */
const s3Env = (prefix = PREFIX, role: 'sequencer' | 'api' = 'sequencer') => ({
  ...rgwLogEnv(rgw, ORIGIN, prefix),
  STELE_ROLE: role,
  STELE_MIN_BATCH_SPACING_MS: '0',
  STELE_HEARTBEAT_MS: '0',
});
const tiles = (prefix = PREFIX) => `${rgw.endpoint}/${rgw.bucket}/${prefix}log`;

beforeAll(async () => {
  const hsm = softHsm(); // sets SOFTHSM2_CONF for this process and its children
  token = hsm.token('s3log');
  rgw = await startRgwWithCli();
  await allowAnonymousLogReads(rgw);
  sb = new Sandbox('stele-rgw-hsm-');
  const gen = await sb.json(['key', 'generate', '--signer', token.uri('log'), '--name', ORIGIN]);
  expect(gen.code, gen.stderr).toBe(0);
  logKey = gen.out as typeof logKey;
}, 720_000); // may wait for another file's cluster (one per machine)

afterAll(async () => {
  for (const s of running) await s.stop();
  sb?.cleanup();
  await rgw?.close();
});

async function serve(env: Record<string, string>, args: string[] = []): Promise<RunningServe> {
  const s = await startServe({ dataDir: scratchDir('stele-rgw-hsm-data-'), origin: ORIGIN, args, env });
  running.push(s);
  return s;
}

/** `stele serve` on this log that must refuse to start (logging everything): its exit code and output. */
function refusedServe(env: Record<string, string | undefined>, args: string[]) {
  const dataDir = join(sb.root, `refused-${randomBytes(3).toString('hex')}`);
  return sb.run(['serve', '--data-dir', dataDir, '--port', '0', '--log-level', 'debug', ...args], env);
}

/** Refused with one `stele:` line that matches `message`, last, and no stack trace. */
function expectOneLine(r: { code: number; stderr: string }, message: RegExp): void {
  expect(r.code, r.stderr).toBe(2);
  const lines = r.stderr.trim().split('\n');
  expect(
    lines.filter((l) => l.startsWith('stele:')),
    r.stderr,
  ).toHaveLength(1);
  expect(lines.at(-1)).toMatch(message);
  expect(r.stderr).not.toMatch(/\n\s+at /);
}

const until = async (what: string, check: () => Promise<boolean>, ms = 60_000) => {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
};

describe('a log on RGW signed with a key in SoftHSM2', () => {
  it('the sequencer signs with the token key: its vkey is the token’s, and anchors verify from the gateway’s tiles', async () => {
    sequencer = await serve(s3Env(), ['--signer', token.uri('log')]);
    expect(sequencer.keyId).toBe(logKey.keyId);
    expect(sequencer.vkey).toBe(logKey.vkey);

    sb.file('release.tgz', 'release bytes\n');
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      sequencer.url,
      '--tenant',
      'acme',
      '--scope',
      'rel',
      '--trust-key',
      logKey.keyId,
    ]);
    expect(init.code, init.stderr).toBe(0);
    const a = await sb.json(['ledger', 'anchor', 'release.tgz']);
    expect(a.code, a.stderr).toBe(0);
    for (let i = 0; i < 20; i++) await postAnchor(sequencer.url, randomBytes(32).toString('hex'));
    const v = await sb.json(['ledger', 'verify', 'release.tgz', '--tiles', tiles()]);
    expect(v.code, v.stderr).toBe(0);
    expect(v.out).toMatchObject({ result: 'PASS', mode: 'tiles' });

    // The checkpoint in the bucket opens with the token's vkey, and not with another key of the same name.
    const note = await (await fetch(`${tiles()}/checkpoint`)).text();
    expect(openNote(note, parseVkey(logKey.vkey)).body).toMatch(new RegExp(`^${ORIGIN}\n21\n`));
    const other = makeVerifier(ORIGIN, SIG_ED25519, new Uint8Array(32).fill(7));
    expect(() => openNote(note, other)).toThrow();
    // The vkey published beside the tiles for the explorer is the token's too.
    expect(((await (await fetch(`${tiles()}/explorer.json`)).json()) as { vkey: string }).vkey).toBe(logKey.vkey);
  }, 180_000);

  it('an API replica given only the vkey serves the log and never opens the token', async () => {
    expect(sequencer).toBeDefined();
    const size = (await getJson(`${sequencer!.url}/api/ledger/checkpoint`)).body.treeSize as number;
    // The shared environment names the sequencer's token, here one no process could open.
    const unopenable = token.uri('log', { 'module-path': '/nonexistent/libpkcs11.so' });
    const replica = await serve({ ...s3Env(PREFIX, 'api'), STELE_VKEY: logKey.vkey, STELE_SIGNER: unopenable });
    expect(replica.vkey).toBe(logKey.vkey);
    await until(
      'the replica to serve the published size',
      async () => (await getJson(`${replica.url}/api/ledger/checkpoint`)).body.treeSize === size,
    );
    expect((await getJson(`${replica.url}/api/ledger/key`)).body.vkey).toBe(logKey.vkey);
    const v = await sb.json(['ledger', 'verify', 'release.tgz'], { STELE_LEDGER_ENDPOINT: replica.url });
    expect(v.code, v.stderr).toBe(0);
    expect(v.out.result).toBe('PASS');

    // The sequencer itself cannot start on that URI: the replica above never tried it.
    const seq = await refusedServe(s3Env(`other-${randomBytes(3).toString('hex')}/`), ['--signer', unopenable]);
    expectOneLine(seq, /^stele: HSM: PKCS#11 module \/nonexistent\/libpkcs11\.so does not exist/);

    // A replica given the token URI and no vkey is told to use the vkey.
    const noVkey = await refusedServe({ ...s3Env(PREFIX, 'api'), STELE_SIGNER: token.uri('log') }, []);
    expectOneLine(noVkey, /^stele: an API replica .* never opens the HSM: set STELE_VKEY/);

    // On the sequencer's host, the operator's checks take the public key from the token too.
    await sequencer!.stop();
    const fsck = await sb.json(['log', 'fsck', '--aws'], { ...s3Env(), STELE_SIGNER: token.uri('log') });
    expect(fsck.code, fsck.stderr).toBe(0);
    expect(fsck.out.checkpoint.size).toBe(size);

    // A restarted sequencer resumes with the token key, and the replica follows its checkpoints.
    const again = await serve(s3Env(), ['--signer', token.uri('log')]);
    expect(again.vkey).toBe(logKey.vkey);
    await postAnchor(again.url, randomBytes(32).toString('hex'));
    await until(
      'the replica to follow the restarted sequencer',
      async () => (await getJson(`${replica.url}/api/ledger/checkpoint`)).body.treeSize === size + 1,
    );
    const note = await (await fetch(`${tiles()}/checkpoint`)).text();
    expect(openNote(note, parseVkey(logKey.vkey)).body).toMatch(new RegExp(`^${ORIGIN}\n${size + 1}\n`));
  }, 180_000);

  describe('a key that cannot be used: one line, exit 2, the PIN never shown', () => {
    const wrongPin = '55190-wrong';
    const expectRefused = (r: { code: number; stdout: string; stderr: string }, message: RegExp) => {
      expectOneLine(r, message);
      for (const secret of [token.pin, wrongPin]) {
        expect(r.stderr).not.toContain(secret);
        expect(r.stdout).not.toContain(secret);
      }
    };

    it('a wrong PIN from pin-source or STELE_PKCS11_PIN; nothing is published', async () => {
      const prefix = `wrong-${randomBytes(3).toString('hex')}/`;
      const pinFile = sb.file('wrong.pin', `${wrongPin}\n`);
      const fromFile = await refusedServe(s3Env(prefix), [
        '--signer',
        token.uri('log', { 'pin-source': `file:${pinFile}` }),
      ]);
      expectRefused(fromFile, /^stele: HSM: wrong PIN for token "s3log"$/);
      // The env form of both: STELE_SIGNER, and the PIN in STELE_PKCS11_PIN.
      const noSource = token.uri('log').replace(/&pin-source=[^&]*/, '');
      const fromEnv = await refusedServe({ ...s3Env(prefix), STELE_SIGNER: noSource, STELE_PKCS11_PIN: wrongPin }, []);
      expectRefused(fromEnv, /^stele: HSM: wrong PIN for token "s3log"$/);
      expect((await fetch(`${tiles(prefix)}/checkpoint`)).status).not.toBe(200);
      // The operator's check on the same host refuses the same way (exit 2, not an I/O error).
      const fsck = await sb.run(['log', 'fsck', '--aws'], {
        ...s3Env(prefix),
        STELE_SIGNER: noSource,
        STELE_PKCS11_PIN: wrongPin,
      });
      expect(fsck.code, fsck.stderr).toBe(2);
      expectRefused(fsck, /^stele: HSM: wrong PIN for token "s3log"$/);
      // …and the right PIN there starts it: the env form works.
      const ok = await serve({ ...s3Env(prefix), STELE_SIGNER: noSource, STELE_PKCS11_PIN: token.pin });
      expect(ok.vkey).toBe(logKey.vkey);
      await ok.stop();
    }, 120_000);

    it('a token key beside another signing key (STELE_KEY_FILE) is refused', async () => {
      const r = await refusedServe(
        { ...s3Env(`both-${randomBytes(3).toString('hex')}/`), STELE_KEY_FILE: join(sb.root, 'log.key') },
        ['--signer', token.uri('log')],
      );
      expectRefused(r, /^stele: the log has one signing key: give STELE_KEY_FILE or --signer pkcs11:/);
    });
  });
});
