// The local log key: created once with mode 0600, refused when exposed or for another origin;
// private keys and vkeys round-trip even when their base64 contains '+'. Creating it is
// atomic: a crash leaves no key or a whole one, concurrent first starts agree on one key.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier, parseVkey } from '../../src/core/note.js';
import { KeyFileError, formatPrivateKey, loadOrCreateKey, parsePrivateKey } from '../../src/keys/local-signer.js';
import { scratchDir } from '../helpers/tmp.js';

const CHILD = join(import.meta.dirname, '..', 'helpers', 'key-child.ts');
const child = (mode: string, target: string) =>
  spawn(process.execPath, ['--import', 'tsx', CHILD, mode, target], { stdio: ['ignore', 'pipe', 'inherit'] });
const deadPid = () =>
  spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();

describe('local key file', () => {
  it('is created with mode 0600 and reloaded unchanged', async () => {
    const dir = scratchDir('stele-key-');
    const path = join(dir, 'private', 'log.key');
    const first = await loadOrCreateKey(path, 'key.test/log');
    expect(first.created).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const again = await loadOrCreateKey(path, 'key.test/log');
    expect(again.created).toBe(false);
    expect(Buffer.from(again.signer.publicKey)).toEqual(Buffer.from(first.signer.publicKey));
    // The secret is everything after the fourth '+' (its base64 may itself contain '+').
    const secret = readFileSync(path, 'utf8').trim().split('+').slice(4).join('+');
    expect(secret.length).toBe(44);
    expect(JSON.stringify(first.signer)).not.toContain(secret);
  });

  it('refuses a key readable by others, or made for another origin', async () => {
    const dir = scratchDir('stele-key-');
    const path = join(dir, 'log.key');
    await loadOrCreateKey(path, 'key.test/log');
    await expect(loadOrCreateKey(path, 'other.test/log')).rejects.toThrow(KeyFileError);
    chmodSync(path, 0o644);
    await expect(loadOrCreateKey(path, 'key.test/log')).rejects.toThrow(/group or others/);
  });

  it('refuses a corrupted key file', async () => {
    const dir = scratchDir('stele-key-');
    const path = join(dir, 'log.key');
    const text = formatPrivateKey('key.test/log', new Uint8Array(32).fill(7));
    writeFileSync(path, text.replace(/\+[0-9a-f]{8}\+/, '+00000000+'), { mode: 0o600 });
    await expect(loadOrCreateKey(path, 'key.test/log')).rejects.toThrow(/hash does not match/);
  });

  it("refuses an empty key file (an older release's crash) with a message naming it, and never replaces it", async () => {
    const path = join(scratchDir('stele-key-'), 'log.key');
    writeFileSync(path, '', { mode: 0o600 });
    await expect(loadOrCreateKey(path, 'key.test/log')).rejects.toThrow(
      new RegExp(`^${path} is empty .*delete the file.*restore the key from a backup`),
    );
    expect(readFileSync(path, 'utf8')).toBe('');
    // A cut-short key is named too.
    writeFileSync(path, formatPrivateKey('key.test/log', new Uint8Array(32).fill(7)).slice(0, 30));
    await expect(loadOrCreateKey(path, 'key.test/log')).rejects.toThrow(`${path}: not a PRIVATE+KEY string`);
  });

  it('does not take a temporary key left by a crash for a key, and removes it', async () => {
    const dir = scratchDir('stele-key-');
    const path = join(dir, 'log.key');
    const half = formatPrivateKey('key.test/log', new Uint8Array(32).fill(7)).slice(0, 40);
    writeFileSync(`${path}.tmp-${deadPid()}-0123456789ab`, half, { mode: 0o600 });
    const { signer, created } = await loadOrCreateKey(path, 'key.test/log');
    expect(created).toBe(true);
    expect(parsePrivateKey(readFileSync(path, 'utf8')).publicKey).toEqual(signer.publicKey);
    expect(readdirSync(dir)).toEqual(['log.key']);
  });

  it('ends with one key when several processes create it at once', async () => {
    const path = join(scratchDir('stele-key-'), 'private', 'log.key');
    const procs = Array.from({ length: 4 }, () => child('once', path));
    const keys = await Promise.all(
      procs.map(async (p) => {
        let out = '';
        p.stdout!.on('data', (d) => (out += d));
        await once(p, 'exit');
        return out.trim();
      }),
    );
    const onDisk = Buffer.from(parsePrivateKey(readFileSync(path, 'utf8')).publicKey).toString('hex');
    expect(keys).toEqual([onDisk, onDisk, onDisk, onDisk]);
    expect(readdirSync(join(path, '..'))).toEqual(['log.key']);
  });

  it('leaves no key or a whole key when the creating process is killed at any moment', async () => {
    const dir = scratchDir('stele-key-');
    for (let round = 0; round < 6; round++) {
      const p = child('loop', join(dir, String(round)));
      await once(p.stdout!, 'data');
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 80));
      p.kill('SIGKILL');
      await once(p, 'exit');
    }
    let whole = 0;
    for (const round of readdirSync(dir)) {
      for (const n of readdirSync(join(dir, round))) {
        const path = join(dir, round, n, 'log.key');
        if (!existsSync(path)) continue;
        expect(() => parsePrivateKey(readFileSync(path, 'utf8')), path).not.toThrow();
        whole++;
      }
    }
    expect(whole).toBeGreaterThan(6);
  });

  it("round-trips private keys and vkeys whose base64 contains '+'", () => {
    let withPlus = 0;
    for (let i = 0; i < 64; i++) {
      const seed = new Uint8Array(32).fill(i);
      const text = formatPrivateKey('key.test/log', seed);
      const signer = parsePrivateKey(text);
      expect(Buffer.from(signer.publicKey)).toEqual(Buffer.from(new SeedSigner('key.test/log', seed).publicKey));
      const vkey = formatVkey(makeVerifier('key.test/log', SIG_ED25519, signer.publicKey));
      expect(Buffer.from(parseVkey(vkey).publicKey)).toEqual(Buffer.from(signer.publicKey));
      if (text.split('+').length > 5 || vkey.split('+').length > 3) withPlus++;
    }
    expect(withPlus).toBeGreaterThan(0);
  });
});
