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
import { readFile } from 'node:fs/promises';
import { bytesEqual } from '../core/hash.js';
import { type NoteSigner, type NoteVerifier, SIG_ED25519, makeVerifier, parseVkey } from '../core/note.js';
import { LogReader, logCorruptObjects } from '../read/reader.js';
import { type PublishedCheckpoint, decodePublishedCheckpoint } from '../sequencer/contract.js';
import type { Sequencer } from '../sequencer/sequencer.js';
import { openSequencer } from './open-sequencer.js';
import { CHECKPOINT_JSON_KEY } from '../store/layout.js';
import { parsePrivateKey } from '../keys/local-signer.js';
import { type LogSigner, openLogSigner } from './log-signer.js';
import { LmdbIndex } from '../index/lmdb.js';
import type { LookupIndex } from '../index/types.js';
import { type SequencerLock, StoreLock } from '../store/lock.js';
import { StoreMark } from '../store/mark.js';
import { DynamoIndex } from '../aws/dynamo-index.js';
import { DynamoLock, DynamoMark, createDynamoClient } from '../aws/dynamo-lock.js';
import { KmsSigner } from '../aws/kms.js';
import { PartialSweeper, S3ObjectStore, createS3Client } from '../store/s3.js';
import {
  AWS_MIN_BATCH_SPACING_MS,
  AwsConfigError,
  type AwsLogConfig,
  BUCKET_LOCK_KEY,
  type LockKind,
} from './aws-config.js';

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

/** Refuses an endpoint that ignores If-None-Match / If-Match, unless the config waives the check. */
async function checkConditionalWrites(config: AwsLogConfig, store: S3ObjectStore, staging: S3ObjectStore) {
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
    config.logger?.warn(
      'conditional S3 writes are not verified on this endpoint; the DynamoDB lock alone guards against forks',
    );
  }
}

/**
 * A heartbeat log line every `heartbeatMs` (the stack's stalled-checkpoint alarm reads it):
 * stallSeconds grows only while anchors wait and no checkpoint is published. Each publish
 * also tells the partial-tile sweeper what it may delete.
 */
function startHeartbeat(
  sequencer: Sequencer,
  sweeper: PartialSweeper | undefined,
  openedSize: number,
  config: AwsLogConfig,
) {
  const log = config.logger;
  let lastProgress = Date.now();
  let stopReported = false;
  sequencer.onPublished((c) => {
    lastProgress = Date.now();
    sweeper?.published(c.size);
  });
  sweeper?.published(openedSize);
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
  return heartbeat;
}

/** The lock the config asks for, once the config can run it (one line why not, naming the setting). */
function checkedLockKind(config: AwsLogConfig): LockKind {
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
  return lockKind;
}

/** Opens (or creates) the log on S3 + DynamoDB + KMS and starts its sequencer. */
export async function openAwsLog(config: AwsLogConfig): Promise<AwsLog> {
  const log = config.logger;
  const lockKind = checkedLockKind(config);
  const { s3, store, staging, ddb } = awsBackends(config);
  let key: Omit<LogSigner, 'created'> | undefined;
  let index: LookupIndex | undefined;
  const destroy = () => {
    key?.close();
    s3.destroy();
    ddb?.destroy();
  };
  try {
    await checkConditionalWrites(config, store, staging);

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
          : new LmdbIndex(config.indexDir!, log, undefined, config.indexHints);
    }
    const reader = new LogReader(store, logCorruptObjects(log));
    const witnessing = await config.witnessing?.({
      verifier: makeVerifier(config.origin, SIG_ED25519, signer.publicKey),
      store,
    });
    const { sequencer, indexReady, stopIndexCatchUp } = await openSequencer({
      origin: config.origin,
      signer,
      store,
      staging,
      lock,
      batchInterval: config.batchInterval,
      maxBatch: config.maxBatch,
      minBatchSpacing: config.minBatchSpacing ?? AWS_MIN_BATCH_SPACING_MS,
      maxPending: config.maxPending,
      ...(index ? { index: { index, reader } } : {}),
      listeners: config.listeners,
      ...(witnessing ? { witnessing } : {}),
      logger: log,
    });

    const opened = sequencer.checkpoint;

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

    const heartbeat = startHeartbeat(sequencer, sweeper, opened.size, config);

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
        // A shutdown does not wait for a catch-up of hours: the next start goes on from what is indexed.
        stopIndexCatchUp();
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
