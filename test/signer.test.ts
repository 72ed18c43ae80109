// The local log key: created once with mode 0600, refused when exposed or for another origin;
// private keys and vkeys round-trip even when their base64 contains '+'.
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier, parseVkey } from '../src/note.js';
import { KeyFileError, formatPrivateKey, loadOrCreateKey, parsePrivateKey } from '../src/signer.js';
import { scratchDir } from './helpers/tmp.js';

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
    expect(JSON.stringify(first.signer)).not.toContain(readFileSync(path, 'utf8').split('+').pop()!.trim());
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
