// Access leases (docs/interface.md §2.7): a fresh 256-bit data-encryption key (DEK) wrapped under the
// current KEK epoch. The DEK itself is never stored, logged or returned in the clear.
//
// wrapped_dek = base64url of the envelope
//   byte 0       0x01 envelope version
//   byte 1       KEK provider: 0x01 local AES-256-GCM (iv ‖ ciphertext ‖ tag), 0x02 AWS KMS (CiphertextBlob)
//   bytes 2-5    epoch, unsigned 32-bit big-endian
//   bytes 6-13   lease expiry, unix seconds, unsigned 64-bit big-endian
//   bytes 14-    the provider's ciphertext
// The lease id, epoch and expiry are bound into the ciphertext (GCM associated data / KMS
// encryption context), so an envelope unwraps only for its own lease, as issued.
import { randomBytes } from 'node:crypto';
import { newUlid as ulid } from '../store/ids.js';
import type { KeyEpochs } from './epochs.js';
import { KekError, type KekKind, type WrapBinding } from '../keys/kek.js';

export const DEK_BYTES = 32;
const ENVELOPE_V1 = 0x01;
const PROVIDER_CODE = { local: 0x01, 'aws-kms': 0x02, pkcs11: 0x03 } as const;
const HEADER_BYTES = 14;

export const LEASE_ID = /^lse_[0-9A-HJKMNP-TV-Z]{26}$/;

export const newLeaseId = (): string => `lse_${ulid()}`;

export interface Envelope {
  readonly provider: KekKind;
  readonly epoch: number;
  readonly expires: number;
  readonly ciphertext: Uint8Array;
}

export function encodeEnvelope(e: Envelope): string {
  const b = Buffer.alloc(HEADER_BYTES + e.ciphertext.length);
  b[0] = ENVELOPE_V1;
  b[1] = PROVIDER_CODE[e.provider];
  b.writeUInt32BE(e.epoch, 2);
  b.writeBigUInt64BE(BigInt(e.expires), 6);
  Buffer.from(e.ciphertext).copy(b, HEADER_BYTES);
  return b.toString('base64url');
}

export function decodeEnvelope(s: string): Envelope {
  if (typeof s !== 'string' || !/^[A-Za-z0-9_-]+$/.test(s))
    throw new KekError('unwrap_failed', 'wrapped_dek must be base64url');
  const b = Buffer.from(s, 'base64url');
  if (b.length <= HEADER_BYTES || b[0] !== ENVELOPE_V1)
    throw new KekError('unwrap_failed', 'wrapped_dek is not a Stele v1 envelope');
  const provider = (Object.keys(PROVIDER_CODE) as KekKind[]).find((k) => PROVIDER_CODE[k] === b[1]);
  if (!provider) throw new KekError('unwrap_failed', 'wrapped_dek names an unknown KEK provider');
  return {
    provider,
    epoch: b.readUInt32BE(2),
    expires: Number(b.readBigUInt64BE(6)),
    ciphertext: new Uint8Array(b.subarray(HEADER_BYTES)),
  };
}

export interface IssuedLease {
  readonly leaseId: string;
  readonly wrappedDek: string;
  readonly expires: Date;
  readonly epoch: number;
  readonly kekId: string;
}

/** Generates a DEK and wraps it under the current epoch. `dek` is injectable for tests only. */
export async function issueLease(
  epochs: KeyEpochs,
  leaseId: string,
  expires: Date,
  dek: Uint8Array = new Uint8Array(randomBytes(DEK_BYTES)),
): Promise<IssuedLease> {
  if (dek.length !== DEK_BYTES) throw new RangeError('a DEK is 32 bytes');
  const current = epochs.current();
  const expiresS = Math.floor(expires.getTime() / 1000);
  const binding: WrapBinding = { leaseId, epoch: current.epoch, expires: expiresS };
  try {
    const ciphertext = await epochs.kek.wrap(current.kek_id, dek, binding);
    return {
      leaseId,
      wrappedDek: encodeEnvelope({ provider: epochs.kek.kind, epoch: current.epoch, expires: expiresS, ciphertext }),
      expires: new Date(expiresS * 1000),
      epoch: current.epoch,
      kekId: current.kek_id,
    };
  } finally {
    dek.fill(0);
  }
}

/**
 * Unwraps a lease's DEK with its epoch's KEK (the demo path, and what a key-release service
 * would do). Refuses an expired lease unless `allowExpired`, and a retired epoch always.
 */
export async function unwrapLease(
  epochs: KeyEpochs,
  leaseId: string,
  wrappedDek: string,
  o: { now?: number; allowExpired?: boolean } = {},
): Promise<{ dek: Uint8Array; epoch: number; expires: Date }> {
  if (!LEASE_ID.test(leaseId)) throw new KekError('unwrap_failed', 'lease id must look like lse_<26 ULID characters>');
  const env = decodeEnvelope(wrappedDek);
  if (env.provider !== epochs.kek.kind)
    throw new KekError(
      'unwrap_failed',
      `the lease was wrapped by KEK provider ${env.provider}, not ${epochs.kek.kind}`,
    );
  const kekId = epochs.usableKek(env.epoch);
  if (!o.allowExpired && env.expires * 1000 <= (o.now ?? Date.now()))
    throw new KekError('unwrap_failed', `the lease expired at ${new Date(env.expires * 1000).toISOString()}`);
  const dek = await epochs.kek.unwrap(kekId, env.ciphertext, { leaseId, epoch: env.epoch, expires: env.expires });
  if (dek.length !== DEK_BYTES) throw new KekError('unwrap_failed', 'the unwrapped key is not 256 bits');
  return { dek, epoch: env.epoch, expires: new Date(env.expires * 1000) };
}
