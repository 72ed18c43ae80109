// The AWS log's configuration: its shape (AwsLogConfig) and how `stele serve` reads it from
// the environment the CDK stack sets (awsLogConfigFromEnv), with one-line errors naming the
// variable (AwsConfigError).
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { NoteSigner } from '../core/note.js';
import type { BatchListener, CheckpointWitnessing } from '../sequencer/contract.js';
import type { S3StoreOptions } from '../store/s3.js';
import type { DigestHintOptions } from '../index/lmdb.js';
import type { ObjectReader } from '../store/store.js';
import type { NoteVerifier } from '../core/note.js';
import { fsReason } from '../store/files.js';
import { type LogKeySpec, isPkcs11Signer } from './log-signer.js';

/**
 * Default shortest time between batch starts on AWS, in ms: a batch costs a KMS signature, a
 * few S3 PUTs and two DynamoDB writes whatever its size, so a trickle of anchors costs at most
 * one batch a second instead of one per anchor (README: "What a batch costs").
 */
export const AWS_MIN_BATCH_SPACING_MS = 1000;

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export type AwsSignerConfig =
  /** AWS KMS key of spec ECC_NIST_EDWARDS25519 (id, ARN or alias). */
  | {
      readonly kind: 'kms';
      readonly keyId: string;
      readonly endpoint?: string;
      readonly timeoutMs?: number;
      readonly expectKeyId?: string;
    }
  /** A local Ed25519 key file (created 0600 if absent), or a key in an HSM: as the local log opens them. */
  | LogKeySpec
  | { readonly kind: 'signer'; readonly signer: NoteSigner }
  /**
   * The log's public key only, as a note vkey (`<origin>+<hash>+<key>`): what an API replica
   * needs to verify the published checkpoints. It cannot sign, so a sequencer refuses it.
   */
  | { readonly kind: 'vkey'; readonly vkey: string };

/** Where the sequencer's lock record lives: a DynamoDB item, or an object in the bucket. */
export type LockKind = 'dynamodb' | 'bucket';

/** The bucket lock's key under the staging prefix (never served). */
export const BUCKET_LOCK_KEY = 'lock.json';

export interface AwsLogConfig {
  /** Log origin: the checkpoint's first line and the signing key's name. */
  readonly origin: string;
  readonly region?: string;
  /** Static credentials (tests, S3-compatible stores); default: the SDK's provider chain (task role). */
  readonly credentials?: AwsCredentials;
  readonly s3: {
    readonly bucket: string;
    /** Prefix of the public objects (default "log/"); '' puts them at the bucket root. */
    readonly publicPrefix?: string;
    /** Prefix of staged batches (default "private/"); must not overlap the public prefix. */
    readonly stagingPrefix?: string;
    /** An S3-compatible endpoint (--s3-endpoint). */
    readonly endpoint?: string;
    /** Path-style addressing, for most S3-compatible servers. */
    readonly forcePathStyle?: boolean;
    /** Parallel PUTs per batch (default 32). */
    readonly concurrency?: number;
    /**
     * Refuse to start unless the endpoint enforces If-None-Match / If-Match on PUT
     * (default true). Only a test server that lacks them should turn this off; the lock
     * alone still prevents forks, but tiles are then not protected against overwrites.
     */
    readonly requireConditionalWrites?: boolean;
    /** Delete partial tiles once their full tile is published (default true). */
    readonly sweepPartials?: boolean;
    readonly clientConfig?: S3StoreOptions['clientConfig'];
  };
  /** The table of the lock (lock 'dynamodb'), the lookup index and the sweep mark; optional with the bucket lock. */
  readonly dynamo?: { readonly table: string; readonly endpoint?: string };
  /** Where the lock record lives (default 'dynamodb'). */
  readonly lock?: LockKind;
  /** Without DynamoDB: the directory of the sequencer's embedded LMDB lookup index. */
  readonly indexDir?: string;
  /** That index's digest hints (src/index/digest-hints.ts). */
  readonly indexHints?: DigestHintOptions;
  readonly signer: AwsSignerConfig;
  /** Maintain the lookup index as batches publish (default true). */
  readonly index?: boolean;
  readonly batchInterval?: number;
  readonly maxBatch?: number;
  /** Shortest time between batch starts in ms (default AWS_MIN_BATCH_SPACING_MS: each batch is a KMS sign, S3 PUTs and two DynamoDB writes). */
  readonly minBatchSpacing?: number;
  readonly maxPending?: number;
  readonly listeners?: readonly BatchListener[];
  /**
   * The witnesses (and required mirrors) a checkpoint waits for before it is published, made
   * once the log's key and public objects are known (`stele serve`: src/serve/witnessing.ts).
   * Without it the log publishes on its own signature, and a split view goes unseen.
   */
  readonly witnessing?: (log: {
    readonly verifier: NoteVerifier;
    readonly store: ObjectReader;
  }) => Promise<CheckpointWitnessing | undefined>;
  readonly logger?: Logger;
  /** Heartbeat log period in ms (default 10,000; 0 turns it off). */
  readonly heartbeatMs?: number;
}

export class AwsConfigError extends Error {
  override name = 'AwsConfigError';
}

/**
 * The sequencer's signing key: KMS, a key in an HSM (`signer`, a pkcs11: URI from --signer or
 * STELE_SIGNER), or a key file (created 0600 on first start); two of them is a mistake, not a
 * choice. The public key alone (STELE_VKEY) is taken too, for the operator's checks (`stele
 * log fsck|recover --aws`), which only verify; a sequencer refuses it when it opens (openSigner).
 */
function signingKeyFromEnv(env: NodeJS.ProcessEnv, signer: string | undefined): AwsSignerConfig {
  if (isPkcs11Signer(signer)) {
    const other = env.STELE_KMS_KEY_ID ? 'STELE_KMS_KEY_ID' : env.STELE_KEY_FILE ? 'STELE_KEY_FILE' : undefined;
    if (other)
      throw new AwsConfigError(
        `the log has one signing key: give ${other} or --signer pkcs11:… (STELE_SIGNER), not both`,
      );
    return { kind: 'pkcs11', uri: signer, env };
  }
  if (env.STELE_KMS_KEY_ID) {
    return {
      kind: 'kms',
      keyId: env.STELE_KMS_KEY_ID,
      endpoint: env.STELE_KMS_ENDPOINT || undefined,
      expectKeyId: env.STELE_KMS_EXPECT_KEY_ID || undefined,
    };
  }
  if (env.STELE_KEY_FILE) return { kind: 'key-file', path: env.STELE_KEY_FILE };
  if (env.STELE_VKEY || env.STELE_VKEY_FILE) return publicKeyFromEnv(env);
  throw new AwsConfigError(
    'STELE_KMS_KEY_ID (or STELE_KEY_FILE, or --signer pkcs11:… for a key in an HSM) is required for the AWS backend',
  );
}

/** The log's public key from STELE_VKEY, or the file STELE_VKEY_FILE names. */
function publicKeyFromEnv(env: NodeJS.ProcessEnv): AwsSignerConfig {
  if (env.STELE_VKEY) return { kind: 'vkey', vkey: env.STELE_VKEY };
  try {
    return { kind: 'vkey', vkey: readFileSync(env.STELE_VKEY_FILE!, 'utf8').trim() };
  } catch (e) {
    throw new AwsConfigError(`cannot read STELE_VKEY_FILE ${env.STELE_VKEY_FILE}: ${fsReason(e)}`);
  }
}

/**
 * An API replica's key: the log's public key only (STELE_VKEY, or STELE_VKEY_FILE holding
 * it), or KMS, whose GetPublicKey is all a replica calls. A replica never reads a private key
 * file nor opens a token: given only STELE_KEY_FILE or a pkcs11: signer it refuses, so
 * neither the private key nor the token's PIN need be on its host.
 */
function replicaKeyFromEnv(env: NodeJS.ProcessEnv, signer: string | undefined): AwsSignerConfig {
  if (env.STELE_VKEY || env.STELE_VKEY_FILE) return publicKeyFromEnv(env);
  if (env.STELE_KMS_KEY_ID) return signingKeyFromEnv(env, undefined);
  if (isPkcs11Signer(signer))
    throw new AwsConfigError(
      "an API replica verifies with the log's public key only and never opens the HSM: set STELE_VKEY to the vkey the sequencer printed (or `stele key show`) instead of --signer pkcs11:…",
    );
  if (env.STELE_KEY_FILE)
    throw new AwsConfigError(
      "an API replica verifies with the log's public key only and never reads its private key: set STELE_VKEY to the vkey the sequencer printed instead of STELE_KEY_FILE",
    );
  throw new AwsConfigError(
    "an API replica needs the log's public key: STELE_VKEY (or STELE_VKEY_FILE, or STELE_KMS_KEY_ID)",
  );
}

/**
 * The AWS configuration from the environment, as the CDK stack sets it on both services:
 *   STELE_ORIGIN, AWS_REGION, STELE_S3_BUCKET, STELE_S3_PREFIX (default log/),
 *   STELE_S3_STAGING_PREFIX (default private/), STELE_S3_ENDPOINT, STELE_S3_FORCE_PATH_STYLE,
 *   STELE_LOCK (dynamodb, the default, or bucket), STELE_DYNAMO_TABLE (required for the
 *   DynamoDB lock), STELE_DYNAMO_ENDPOINT, STELE_KMS_KEY_ID, STELE_KMS_ENDPOINT,
 *   STELE_KMS_EXPECT_KEY_ID, STELE_KEY_FILE (instead of KMS), STELE_SIGNER (a pkcs11: URI, instead of
 *   both; its PIN from pin-source or STELE_PKCS11_PIN), STELE_BATCH_INTERVAL_MS, STELE_MAX_BATCH,
 *   STELE_MIN_BATCH_SPACING_MS; for an API replica (`role: 'api'`) STELE_VKEY or STELE_VKEY_FILE,
 *   the log's public key, instead of a signing key.
 * `lock` and `signer` (from `stele serve --lock`, `--signer` or its config file) override
 * STELE_LOCK and STELE_SIGNER.
 */
export function awsLogConfigFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  over: { lock?: LockKind; role?: 'sequencer' | 'api'; signer?: string } = {},
): AwsLogConfig {
  const need = (name: string): string => {
    const v = env[name];
    if (!v) throw new AwsConfigError(`${name} is required for the AWS backend`);
    return v;
  };
  const int = (name: string): number | undefined => {
    const v = env[name];
    if (v === undefined || v === '') return undefined;
    if (!/^[0-9]+$/.test(v)) throw new AwsConfigError(`${name} must be a non-negative integer`);
    return Number(v);
  };
  const flag = (name: string): boolean | undefined => {
    const v = env[name];
    if (v === undefined || v === '') return undefined;
    if (!/^(1|0|true|false)$/i.test(v)) throw new AwsConfigError(`${name} must be true or false`);
    return /^(1|true)$/i.test(v);
  };
  const lock = over.lock ?? (env.STELE_LOCK || 'dynamodb');
  if (lock !== 'dynamodb' && lock !== 'bucket') throw new AwsConfigError('STELE_LOCK must be dynamodb or bucket');
  const table = lock === 'dynamodb' ? need('STELE_DYNAMO_TABLE') : env.STELE_DYNAMO_TABLE || undefined;
  const signerSpec = over.signer ?? (env.STELE_SIGNER || undefined);
  const signer = over.role === 'api' ? replicaKeyFromEnv(env, signerSpec) : signingKeyFromEnv(env, signerSpec);
  return {
    origin: need('STELE_ORIGIN'),
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined,
    s3: {
      bucket: need('STELE_S3_BUCKET'),
      publicPrefix: env.STELE_S3_PREFIX ?? undefined,
      stagingPrefix: env.STELE_S3_STAGING_PREFIX || undefined,
      endpoint: env.STELE_S3_ENDPOINT || undefined,
      forcePathStyle: flag('STELE_S3_FORCE_PATH_STYLE'),
      // Only for a test server that ignores conditional PUTs (the lock still prevents forks).
      requireConditionalWrites: flag('STELE_S3_REQUIRE_CONDITIONAL_WRITES'),
    },
    ...(table ? { dynamo: { table, endpoint: env.STELE_DYNAMO_ENDPOINT || undefined } } : {}),
    lock,
    signer,
    batchInterval: int('STELE_BATCH_INTERVAL_MS'),
    maxBatch: int('STELE_MAX_BATCH'),
    minBatchSpacing: int('STELE_MIN_BATCH_SPACING_MS'),
    heartbeatMs: int('STELE_HEARTBEAT_MS'),
  };
}
