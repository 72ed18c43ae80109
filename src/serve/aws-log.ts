// The AWS log: the same Sequencer as the local log, composed from production backends.
//   public objects   S3, under `publicPrefix` (default "log/"): tiles, bundles, checkpoint —
//                    what CloudFront serves (its origin path is that prefix)
//   staging          S3, under `stagingPrefix` (default "private/"): staged batches, never served;
//                    also the settings the log was started with (`<staging>log-settings.json`,
//                    src/serve/log-settings.ts), which only the sequencer reads
//   lock             DynamoDB conditional writes (DynamoLock), or `lock: 'bucket'`: an object
//                    beside the staged batches (`<staging>lock.json`), replaced by
//                    compare-and-swap on its ETag — then the log needs the bucket and nothing
//                    else (any S3-compatible store that honours If-Match: Ceph RGW, MinIO, R2)
//   lookup index     DynamoDB (DynamoIndex), shared with every API replica; without DynamoDB,
//                    an embedded LMDB index in `indexDir`, rebuilt from the bundles if lost
//   signer           AWS KMS Ed25519 (KmsSigner), a key in an HSM (PKCS#11) or a local key file,
//                    both opened as the local log opens them (src/serve/log-signer.ts), or any NoteSigner
// Besides the sequencer it runs two background chores: the partial-tile sweeper (its
// progress kept in the table) and a heartbeat log line that the CDK stack turns into the
// stalled-checkpoint alarm.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { bytesEqual } from '../core/hash.js';
import { indexFeeder, reconcileIndex } from '../index/catchup.js';
import { type NoteSigner, type NoteVerifier, SIG_ED25519, makeVerifier, parseVkey } from '../core/note.js';
import { LogReader, logCorruptObjects } from '../read/reader.js';
import {
  type BatchListener,
  type CheckpointWitnessing,
  type PublishedCheckpoint,
  decodePublishedCheckpoint,
} from '../sequencer/contract.js';
import { Sequencer } from '../sequencer/sequencer.js';
import { CHECKPOINT_JSON_KEY } from '../store/layout.js';
import { parsePrivateKey } from '../keys/local-signer.js';
import { type LogKeySpec, type LogSigner, isPkcs11Signer, openLogSigner } from './log-signer.js';
import { LmdbIndex } from '../index/lmdb.js';
import type { LookupIndex } from '../index/types.js';
import { type SequencerLock, StoreLock } from '../store/lock.js';
import { StoreMark } from '../store/mark.js';
import type { ObjectReader } from '../store/store.js';
import { DynamoIndex } from '../aws/dynamo-index.js';
import { DynamoLock, DynamoMark, createDynamoClient } from '../aws/dynamo-lock.js';
import { KmsSigner } from '../aws/kms.js';
import { PartialSweeper, S3ObjectStore, type S3StoreOptions, createS3Client } from '../store/s3.js';
import { fsReason } from '../store/files.js';

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

export interface AwsLog {
  readonly sequencer: Sequencer;
  readonly store: S3ObjectStore;
  readonly staging: S3ObjectStore;
  readonly lock: SequencerLock;
  readonly index: LookupIndex | undefined;
  readonly signer: NoteSigner;
  readonly reader: LogReader;
  /** Settles when the index has caught up with the log as it was at open. */
  readonly indexReady: Promise<void>;
  readonly sweeper: PartialSweeper | undefined;
  /** Settles when the sweeper is idle (tests, shutdown). */
  sweepIdle(): Promise<void>;
  /** Integrates accepted anchors, stops the chores, closes the clients. */
  close(): Promise<void>;
}

function prefixesOf(config: AwsLogConfig): { publicPrefix: string; stagingPrefix: string } {
  const publicPrefix = config.s3.publicPrefix ?? 'log/';
  const stagingPrefix = config.s3.stagingPrefix ?? 'private/';
  if (publicPrefix.startsWith(stagingPrefix) || stagingPrefix.startsWith(publicPrefix)) {
    throw new Error(
      `S3 prefixes overlap (public ${JSON.stringify(publicPrefix)}, staging ${JSON.stringify(stagingPrefix)}): staged batches must never be served`,
    );
  }
  return { publicPrefix, stagingPrefix };
}

/** The log's signing key; close() lets go of what this opened (a given NoteSigner stays its owner's). */
async function openSigner(config: AwsLogConfig): Promise<Omit<LogSigner, 'created'>> {
  const s = config.signer;
  if (s.kind === 'vkey')
    throw new AwsConfigError(
      'the sequencer signs checkpoints: it needs STELE_KMS_KEY_ID, STELE_KEY_FILE or --signer pkcs11:… (STELE_VKEY is for API replicas)',
    );
  if (s.kind === 'signer') return { signer: s.signer, close: () => undefined };
  if (s.kind === 'key-file' || s.kind === 'pkcs11') return openLogSigner(s, config.origin);
  const kms = await KmsSigner.create({
    keyId: s.keyId,
    name: config.origin,
    expectKeyId: s.expectKeyId,
    region: config.region,
    endpoint: s.endpoint,
    credentials: config.credentials,
    timeoutMs: s.timeoutMs,
  });
  return { signer: kms, close: () => kms.close() };
}

/** The S3 stores and DynamoDB client (if configured) of a config (shared by the sequencer and API replicas). */
export function awsBackends(config: AwsLogConfig) {
  const { publicPrefix, stagingPrefix } = prefixesOf(config);
  const s3 = s3ClientOf(config);
  const common = { client: s3, bucket: config.s3.bucket, concurrency: config.s3.concurrency };
  const store = new S3ObjectStore({ ...common, prefix: publicPrefix });
  const staging = new S3ObjectStore({ ...common, prefix: stagingPrefix });
  const ddb = config.dynamo
    ? createDynamoClient({ region: config.region, endpoint: config.dynamo.endpoint, credentials: config.credentials })
    : undefined;
  return { s3, store, staging, ddb };
}

function s3ClientOf(config: AwsLogConfig) {
  return createS3Client({
    region: config.region,
    endpoint: config.s3.endpoint,
    forcePathStyle: config.s3.forcePathStyle,
    credentials: config.credentials,
    clientConfig: config.s3.clientConfig,
  });
}

/**
 * The log's private prefix alone (staged batches, the lock, the stored settings), with a client
 * of its own: what `stele serve` reads before it opens the log. Call close() when done.
 */
export function awsPrivateStore(config: AwsLogConfig): { readonly store: S3ObjectStore; close(): void } {
  const { stagingPrefix } = prefixesOf(config);
  const client = s3ClientOf(config);
  return {
    store: new S3ObjectStore({ client, bucket: config.s3.bucket, prefix: stagingPrefix }),
    close: () => client.destroy(),
  };
}

/** Opens (or creates) the log on S3 + DynamoDB + KMS and starts its sequencer. */
export async function openAwsLog(config: AwsLogConfig): Promise<AwsLog> {
  const log = config.logger;
  const lockKind = config.lock ?? 'dynamodb';
  if (lockKind === 'dynamodb' && !config.dynamo)
    throw new AwsConfigError(
      'the DynamoDB lock needs a table (STELE_DYNAMO_TABLE), or use the bucket lock (--lock bucket)',
    );
  if (lockKind === 'bucket' && config.s3.requireConditionalWrites === false) {
    throw new AwsConfigError(
      'the bucket lock is a compare-and-swap on an object: it cannot run on an endpoint whose conditional writes are not verified',
    );
  }
  if (config.index !== false && !config.dynamo && !config.indexDir)
    throw new AwsConfigError('the lookup index needs DynamoDB (STELE_DYNAMO_TABLE) or a local index directory');
  const { s3, store, staging, ddb } = awsBackends(config);
  let key: Omit<LogSigner, 'created'> | undefined;
  let index: LookupIndex | undefined;
  const destroy = () => {
    key?.close();
    s3.destroy();
    ddb?.destroy();
  };
  try {
    if (config.s3.requireConditionalWrites !== false) {
      const support = await staging.probeConditionalWrites();
      if (support.ifMatchForm) store.ifMatchForm = support.ifMatchForm;
      if (!support.ifNoneMatch || !support.ifMatch) {
        throw new Error(
          `the S3 endpoint ignores conditional writes (If-None-Match honoured: ${support.ifNoneMatch}, If-Match: ${support.ifMatch}); ` +
            'Stele needs them to keep tiles immutable (set requireConditionalWrites: false only for a test server)',
        );
      }
    } else {
      log?.warn(
        'conditional S3 writes are not verified on this endpoint; the DynamoDB lock alone guards against forks',
      );
    }

    key = await openSigner(config);
    const { signer } = key;
    const table = config.dynamo?.table;
    const lock: SequencerLock =
      lockKind === 'bucket' || !ddb || !table
        ? new StoreLock(staging, BUCKET_LOCK_KEY)
        : new DynamoLock({ client: ddb, table, log: config.origin });
    if (config.index !== false) {
      index =
        ddb && table
          ? new DynamoIndex({ client: ddb, table, log: config.origin })
          : new LmdbIndex(config.indexDir!, log);
    }
    const reader = new LogReader(store, logCorruptObjects(log));
    const witnessing = await config.witnessing?.({
      verifier: makeVerifier(config.origin, SIG_ED25519, signer.publicKey),
      store,
    });
    const sequencer = await Sequencer.open({
      origin: config.origin,
      signer,
      store,
      staging,
      lock,
      batchInterval: config.batchInterval,
      maxBatch: config.maxBatch,
      minBatchSpacing: config.minBatchSpacing ?? AWS_MIN_BATCH_SPACING_MS,
      maxPending: config.maxPending,
      listeners: [...(index ? [indexFeeder(index, reader)] : []), ...(config.listeners ?? [])],
      ...(witnessing ? { witnessing } : {}),
      logger: log,
    });

    const opened = sequencer.checkpoint;
    const indexReady = index
      ? reconcileIndex(index, reader, opened, log).then(
          () => undefined,
          (e: unknown) => log?.error({ err: (e as Error).message }, 'index catch-up failed; the next batch retries it'),
        )
      : Promise.resolve();

    // Partial-tile sweeper: deletes a partial as soon as its full tile is published.
    const sweeper =
      config.s3.sweepPartials === false
        ? undefined
        : await PartialSweeper.start(
            store,
            ddb && table ? new DynamoMark(ddb, table, config.origin, 'swept') : new StoreMark(staging, 'marks/swept'),
            opened.size,
            (e) => log?.error({ err: e.message }, 'partial-tile sweep failed; retried after the next publish'),
          );

    // Heartbeat: stallSeconds grows only while anchors wait and no checkpoint is published.
    let lastProgress = Date.now();
    let stopReported = false;
    sequencer.onPublished((c) => {
      lastProgress = Date.now();
      sweeper?.published(c.size);
    });
    sweeper?.published(opened.size);
    const heartbeatMs = config.heartbeatMs ?? 10_000;
    const heartbeat =
      heartbeatMs > 0
        ? setInterval(() => {
            const now = Date.now();
            if (sequencer.pending === 0) lastProgress = now;
            const c = sequencer.checkpoint;
            log?.info(
              {
                heartbeat: 1,
                size: c.size,
                pending: sequencer.pending,
                stallSeconds: Math.round((now - lastProgress) / 1000),
                checkpointAgeSeconds: Math.round((now - Date.parse(c.timestamp)) / 1000),
              },
              'sequencer heartbeat',
            );
            if (sequencer.failure && !stopReported) {
              stopReported = true;
              log?.fatal({ err: sequencer.failure.message }, 'sequencer is stopped; restart it to resume from storage');
            }
          }, heartbeatMs)
        : undefined;
    heartbeat?.unref();

    return {
      sequencer,
      store,
      staging,
      lock,
      index,
      signer,
      reader,
      indexReady,
      sweeper,
      sweepIdle: async () => sweeper?.idle(),
      async close() {
        if (heartbeat) clearInterval(heartbeat);
        await sequencer.close();
        await indexReady;
        await sweeper?.idle();
        if (index instanceof LmdbIndex) await index.close();
        destroy();
      },
    };
  } catch (e) {
    if (index instanceof LmdbIndex) await index.close();
    destroy();
    throw e;
  }
}

/**
 * What an API replica needs: the public objects, the shared index, the log's public key,
 * and the latest published checkpoint, read from `checkpoint.json` and verified against
 * that key (refresh() on an interval; a checkpoint never goes back to a smaller size or a
 * different root at the same size).
 */
export async function openAwsReader(config: AwsLogConfig) {
  // A reader only needs the public key: the vkey, KMS GetPublicKey, or (for the operator's
  // checks on the sequencer's host) the key file, read without creating one, or the token.
  const s = config.signer;
  const publicKey = s.kind === 'vkey' ? vkeyVerifier(s.vkey, config.origin).publicKey : await readerPublicKey(config);
  const { s3, store, ddb } = awsBackends(config);
  const logKey = makeVerifier(config.origin, SIG_ED25519, publicKey);
  // The shared DynamoDB index, if there is one (else a replica keeps its own: see src/serve/backends.ts).
  const index =
    ddb && config.dynamo ? new DynamoIndex({ client: ddb, table: config.dynamo.table, log: config.origin }) : undefined;
  let latest: PublishedCheckpoint | undefined;
  // Verified against the checkpoints refresh() accepts (the API also passes its checkpoint with each read).
  const reader = new LogReader(store, logCorruptObjects(config.logger));
  const refresh = async (): Promise<PublishedCheckpoint | undefined> => {
    const bytes = await store.get(CHECKPOINT_JSON_KEY);
    if (!bytes) return latest;
    const cp = decodePublishedCheckpoint(bytes, logKey);
    if (latest && (cp.size < latest.size || (cp.size === latest.size && !bytesEqual(cp.root, latest.root)))) {
      throw new Error(
        `published checkpoint went from size ${latest.size} to ${cp.size} with another root: refusing it`,
      );
    }
    latest = cp;
    reader.trust(cp);
    return cp;
  };
  return {
    store,
    index,
    publicKey,
    reader,
    /** Fetches and verifies the published checkpoint; returns the latest one known. */
    refreshCheckpoint: refresh,
    /** The latest verified checkpoint (after a refresh). */
    checkpoint: () => latest,
    async close() {
      s3.destroy();
      ddb?.destroy();
    },
  };
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

/** The log's public key from its signing key, which is let go at once; the key must be this log's. */
async function readerPublicKey(config: AwsLogConfig): Promise<Uint8Array> {
  const s = config.signer;
  const key =
    s.kind === 'key-file'
      ? { signer: parsePrivateKey(await readFile(s.path, 'utf8')), close: () => undefined }
      : await openSigner(config);
  key.close();
  if (key.signer.name !== config.origin)
    throw new AwsConfigError(`the key is for ${key.signer.name}, not ${config.origin}`);
  return key.signer.publicKey;
}

/** The log's Ed25519 key from its note vkey, which must name this log's origin. */
function vkeyVerifier(vkey: string, origin: string): NoteVerifier {
  let v: NoteVerifier;
  try {
    v = parseVkey(vkey);
  } catch (e) {
    throw new AwsConfigError(`STELE_VKEY: ${(e as Error).message}`);
  }
  if (v.type !== SIG_ED25519) throw new AwsConfigError("STELE_VKEY must be the log's Ed25519 vkey (type 0x01)");
  if (v.name !== origin) throw new AwsConfigError(`STELE_VKEY is the key of ${v.name}, not of ${origin}`);
  return v;
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
