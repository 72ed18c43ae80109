// Which key an AWS or self-hosted process is given (src/serve/aws-log.ts): the sequencer signs (KMS
// or a key file); an API replica verifies with the log's public key alone (STELE_VKEY or
// STELE_VKEY_FILE, or KMS GetPublicKey) and refuses a private key file.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AwsConfigError, awsLogConfigFromEnv } from '../../src/serve/aws-config.js';
import { openAwsLog, openAwsReader } from '../../src/serve/aws-log.js';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'replica-key.test/log';
const base = { STELE_ORIGIN: ORIGIN, STELE_S3_BUCKET: 'b', STELE_LOCK: 'bucket' };
const seed = new SeedSigner(ORIGIN, new Uint8Array(32).fill(3));
const vkey = formatVkey(makeVerifier(ORIGIN, SIG_ED25519, seed.publicKey));

describe('the key of an API replica', () => {
  it('is the public key: STELE_VKEY, STELE_VKEY_FILE or KMS; never the private key file', () => {
    const api = { role: 'api' as const };
    expect(awsLogConfigFromEnv({ ...base, STELE_VKEY: vkey }, api).signer).toEqual({ kind: 'vkey', vkey });
    // The vkey wins over a key file a shared environment also names: the file is never read.
    expect(awsLogConfigFromEnv({ ...base, STELE_VKEY: vkey, STELE_KEY_FILE: '/nowhere' }, api).signer.kind).toBe(
      'vkey',
    );
    const file = join(scratchDir('stele-vkey-'), 'log.vkey');
    writeFileSync(file, `${vkey}\n`);
    expect(awsLogConfigFromEnv({ ...base, STELE_VKEY_FILE: file }, api).signer).toEqual({ kind: 'vkey', vkey });
    expect(() => awsLogConfigFromEnv({ ...base, STELE_VKEY_FILE: `${file}.missing` }, api)).toThrow(
      /cannot read STELE_VKEY_FILE .*: no such file/,
    );
    expect(awsLogConfigFromEnv({ ...base, STELE_KMS_KEY_ID: 'alias/log' }, api).signer.kind).toBe('kms');
    expect(() => awsLogConfigFromEnv({ ...base, STELE_KEY_FILE: '/keys/log.key' }, api)).toThrow(
      /API replica verifies with the log's public key only.*STELE_VKEY/,
    );
    expect(() => awsLogConfigFromEnv(base, api)).toThrow(/needs the log's public key: STELE_VKEY/);
    // The sequencer's signing key is unchanged, and a vkey alone cannot sign.
    expect(awsLogConfigFromEnv({ ...base, STELE_KEY_FILE: '/k' }).signer).toEqual({ kind: 'key-file', path: '/k' });
    expect(() => awsLogConfigFromEnv(base)).toThrow(/STELE_KMS_KEY_ID/);
    // The operator's checks (log fsck|recover --aws) verify with the vkey alone; a sequencer refuses it when it opens (below).
    expect(awsLogConfigFromEnv({ ...base, STELE_VKEY: vkey }).signer).toEqual({ kind: 'vkey', vkey });
  });

  it("is checked before anything is read: a malformed vkey or another log's is refused", async () => {
    const s3 = { bucket: 'b', endpoint: 'http://127.0.0.1:9', forcePathStyle: true };
    const reader = (v: string) =>
      openAwsReader({ origin: ORIGIN, s3, lock: 'bucket', signer: { kind: 'vkey', vkey: v } });
    await expect(reader('not a vkey')).rejects.toThrow(/STELE_VKEY: a vkey has the form/);
    const other = formatVkey(makeVerifier('other.test/log', SIG_ED25519, new Uint8Array(32).fill(1)));
    await expect(reader(other)).rejects.toThrow(/STELE_VKEY is the key of other\.test\/log, not of replica-key/);
    const r = await reader(vkey);
    expect(Buffer.from(r.publicKey)).toEqual(Buffer.from(seed.publicKey));
    await r.close();
    // A sequencer given only the public key refuses to start, naming what it needs.
    const sequencer = openAwsLog({
      origin: ORIGIN,
      s3: { ...s3, requireConditionalWrites: false },
      dynamo: { table: 't', endpoint: 'http://127.0.0.1:9' },
      lock: 'dynamodb',
      index: false,
      signer: { kind: 'vkey', vkey },
    });
    await expect(sequencer).rejects.toBeInstanceOf(AwsConfigError);
    await expect(sequencer).rejects.toThrow(/the sequencer signs checkpoints.*STELE_VKEY is for API replicas/);
  });
});
