// Where `stele serve` gets its log: the embedded local directory (sequencer, LMDB index,
// demo witnesses), or AWS (STELE_BACKEND=aws) as the sequencer or a read-only API replica.
// Both sequencers take their witnesses and mirrors from src/serve/witnessing.ts, and keep the
// settings they were started with where openSettingsHome says (src/serve/log-settings.ts).
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { LedgerService } from '../api/ledger.js';
import type { AwsLogConfig } from './aws-config.js';
import { type FollowerStatus, IndexFollower } from '../index/follower.js';
import { type DigestHintOptions, LmdbIndex } from '../index/lmdb.js';
import { publishedAnchorFinder } from '../index/published-anchor.js';
import { DuplicateAnchors } from '../sequencer/in-flight-duplicates.js';
import { localPaths, openLocalLog } from './local-log.js';
import type { AnchorRequest } from '../core/anchor.js';
import { SIG_ED25519, makeVerifier } from '../core/note.js';
import { LogReader, logCorruptObjects } from '../read/reader.js';
import {
  type AnchorReceipt,
  AnchorTimeoutError,
  type OnCommitted,
  type IntegratedBatch,
  type PublishedCheckpoint,
} from '../sequencer/contract.js';
import type { Sequencer } from '../sequencer/sequencer.js';
import { logKeySpec, openLogSigner } from './log-signer.js';
import { LOG_SETTINGS_NAME, type SettingsHome, settingsFile, settingsObject } from './settings-home.js';
import { FsObjectStore } from '../store/fs.js';
import type { ObjectReader, ObjectStore } from '../store/store.js';
import { EXPLORER_CONFIG_KEY } from '../store/layout.js';
import { explorerConfig } from '../api/explorer.js';
import { indexCovers } from '../api/index-coverage.js';
import type { WitnessEndpoint } from '../witness/collector.js';
import type { ServeConfig } from './config.js';
import {
  type AdvertisedWitnessing,
  type LogWitnessing,
  type WitnessSettings,
  advertisedWitnessing,
  ledgerWitnessFields,
  openWitnessing,
  readWitnessSettings,
} from './witnessing.js';

/** A log as the HTTP layer sees it. */
export interface Backend {
  readonly ledger: LedgerService;
  /** The published objects, served at /checkpoint and /tile/…. */
  readonly objects: ObjectReader;
  readonly sequencer?: Sequencer;
  /**
   * A sequencer's submit under the anchor deadline: the one way entries reach the log. The
   * ledger's anchor route adds the duplicate rule on top; the control plane records through it.
   */
  readonly append?: Append;
  readonly keyCreated: boolean;
  readonly witnessEndpoints: readonly WitnessEndpoint[];
  onPublished(fn: (cp: PublishedCheckpoint, batch: IntegratedBatch | null) => void): void;
  /** Readiness: null while the log can take and serve anchors, else why not. */
  notReady(): string | null;
  /** An API replica that keeps its own index: how far it has followed the published log. */
  followerStatus?(): FollowerStatus;
  /** Calls `fn` if the log stops on its own (another writer, a changed lock): the server should exit. */
  onStopped(fn: (err: Error) => void): void;
  /** Integrates what was accepted, then releases storage. */
  close(): Promise<void>;
}

type Append = (request: AnchorRequest, onCommitted?: OnCommitted) => Promise<AnchorReceipt>;

export async function openBackend(cfg: ServeConfig, logger: Logger, env: NodeJS.ProcessEnv): Promise<Backend> {
  if (cfg.backend === 'aws') {
    // Without DynamoDB the sequencer keeps its lookup index in LMDB under the data directory.
    const aws = {
      ...(await awsConfig(cfg, env, cfg.role ?? 'sequencer')),
      ...(cfg.minBatchSpacingMs !== undefined ? { minBatchSpacing: cfg.minBatchSpacingMs } : {}),
      indexDir: join(cfg.dataDir, 'index'),
      indexHints: digestHints(cfg),
      logger,
    };
    const witnesses = readWitnessSettings(cfg);
    return cfg.role === 'api'
      ? awsReplica(aws, witnesses, logger, aws.indexDir)
      : awsSequencer(aws, witnesses, cfg, logger);
  }
  return localBackend(cfg, logger, env);
}

/** The LMDB lookup index's digest hints as this start sets them (`--digest-hints-mib`). */
function digestHints(cfg: ServeConfig): DigestHintOptions {
  return cfg.digestHintsMib === undefined ? {} : { bytes: cfg.digestHintsMib * 2 ** 20 };
}

/** The S3/AWS log's configuration: the environment, with this start's lock and --signer. */
async function awsConfig(cfg: ServeConfig, env: NodeJS.ProcessEnv, role: 'sequencer' | 'api'): Promise<AwsLogConfig> {
  // The AWS SDK loads only for this backend.
  const { awsLogConfigFromEnv } = await import('./aws-config.js');
  return awsLogConfigFromEnv(env, { lock: cfg.lock, role, signer: cfg.signer });
}

/**
 * Where this start's log keeps its settings: the data directory, or the S3 log's private prefix
 * (read with a client of its own, before the log opens). Undefined for an API replica: it
 * advertises what it is given and publishes nothing, so it neither applies nor stores them.
 */
export async function openSettingsHome(
  cfg: ServeConfig,
  env: NodeJS.ProcessEnv,
): Promise<{ readonly home: SettingsHome; close(): void } | undefined> {
  if (cfg.backend !== 'aws') return { home: settingsFile(cfg.dataDir), close: () => undefined };
  if (cfg.role === 'api') return undefined;
  const { awsPrivateStore } = await import('./aws-log.js');
  const { store, close } = awsPrivateStore(await awsConfig(cfg, env, 'sequencer'));
  return { home: settingsObject(store, `s3://${store.bucket}/${store.prefix}${LOG_SETTINGS_NAME}`), close };
}

/**
 * The receipt, or AnchorTimeoutError once `ms` have passed: an anchor never hangs, whatever
 * storage or the witnesses do. It may still be committed later, which the error says.
 */
function withDeadline(receipt: Promise<AnchorReceipt>, ms: number, why: () => string | null): Promise<AnchorReceipt> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const reason = why() ?? 'the log is busy';
      reject(
        new AnchorTimeoutError(
          `not acknowledged within ${ms / 1000} s (${reason}); it may still be recorded: look it up by digest before anchoring again`,
        ),
      );
    }, ms);
  });
  return Promise.race([receipt, late]).finally(() => clearTimeout(timer));
}

/** What a log with a sequencer gives the HTTP layer (the local log and the AWS sequencer alike). */
function sequencerBackend(
  log: {
    readonly sequencer: Sequencer;
    readonly reader: LogReader;
    readonly index: LedgerService['index'];
    readonly publicKey: Uint8Array;
    readonly objects: ObjectReader;
    readonly keyCreated: boolean;
    close(): Promise<void>;
  },
  cfg: ServeConfig,
  witnessing: LogWitnessing,
): Backend {
  const { sequencer, reader, index } = log;
  feedMirrors(sequencer, witnessing);
  const append: Append = (req, onCommitted) =>
    withDeadline(sequencer.submit(req, onCommitted), cfg.anchorTimeoutMs, () => sequencer.notReady);
  const anchors = new DuplicateAnchors(
    (req) => sequencer.submit(req),
    publishedAnchorFinder(index, reader, () => sequencer.checkpoint),
  );
  // The duplicate rule needs an index that covers the log: while it catches up (a lost index,
  // an upgrade), an anchor is a 503 index_not_ready, never a second entry for a published one.
  // Once it covers, it stays covered (batches are indexed before they publish).
  let covered = false;
  const admit = async () => {
    if (covered) return;
    await indexCovers(index, sequencer.checkpoint);
    covered = true;
  };
  return {
    ledger: {
      origin: cfg.origin,
      publicKey: log.publicKey,
      reader,
      index,
      checkpoint: () => sequencer.checkpoint,
      committed: () => sequencer.committedCheckpoint,
      lifetimeEntries: () => sequencer.lifetimeEntries,
      ...ledgerWitnessFields(witnessing),
      submit: async (req, options) => {
        await admit();
        return withDeadline(anchors.submit(req, options), cfg.anchorTimeoutMs, () => sequencer.notReady);
      },
    },
    objects: log.objects,
    sequencer,
    append,
    keyCreated: log.keyCreated,
    witnessEndpoints: witnessing.witnesses,
    onPublished: (fn) => sequencer.onPublished(fn),
    notReady: () => sequencer.notReady,
    onStopped: (fn) => sequencer.onStopped(fn),
    close: log.close,
  };
}

async function localBackend(cfg: ServeConfig, logger: Logger, env: NodeJS.ProcessEnv): Promise<Backend> {
  const settings = readWitnessSettings(cfg);
  const logKey = await openLogSigner(logKeySpec(cfg.signer, localPaths(cfg.dataDir).keyFile, env), cfg.origin);
  const logVerifier = makeVerifier(cfg.origin, SIG_ED25519, logKey.signer.publicKey);
  const publicObjects = new FsObjectStore(localPaths(cfg.dataDir).publicDir);
  let witnessing: LogWitnessing;
  try {
    witnessing = await openWitnessing(settings, logVerifier, publicObjects, logger, cfg.dataDir);
  } catch (e) {
    logKey.close();
    throw e;
  }
  const index = new LmdbIndex(join(cfg.dataDir, 'private', 'index'), logger, undefined, digestHints(cfg));
  // The index's reader exists before the log opens: a start that re-applies a staged batch
  // tells the listeners about it from inside openLocalLog.
  const reader = new LogReader(publicObjects, logCorruptObjects(logger));
  const opened = await openLocalLog({
    dataDir: cfg.dataDir,
    origin: cfg.origin,
    batchInterval: cfg.batchIntervalMs,
    maxBatch: cfg.maxBatch,
    minBatchSpacing: cfg.minBatchSpacingMs ?? 0,
    fsync: cfg.fsync ?? true,
    logger,
    index: { index, reader },
    witnessing: witnessing.hook,
    signer: logKey.signer,
  }).catch(async (e: unknown) => {
    logKey.close();
    await index.close();
    await witnessing.close();
    throw e;
  });
  // The index catches up beside the log (openSequencer): what needs no index is served at once.
  const { sequencer, store, signer, indexReady, stopIndexCatchUp } = opened;
  return sequencerBackend(
    {
      sequencer,
      reader,
      index,
      publicKey: signer.publicKey,
      objects: store,
      keyCreated: logKey.created,
      async close() {
        // A shutdown does not wait for a catch-up of hours: the next start goes on from what is indexed.
        stopIndexCatchUp();
        await sequencer.close();
        await witnessing.close();
        await indexReady;
        await index.close();
        logKey.close();
      },
    },
    cfg,
    witnessing,
  );
}

/** Mirrors that are not required follow each publish, and the checkpoint the log opened with. */
function feedMirrors(sequencer: Sequencer, witnessing: LogWitnessing): void {
  sequencer.onPublished((cp) => witnessing.published(cp));
  witnessing.published(sequencer.checkpoint);
}

async function awsSequencer(
  config: AwsLogConfig,
  settings: WitnessSettings,
  cfg: ServeConfig,
  logger: Logger,
): Promise<Backend> {
  const { openAwsLog } = await import('./aws-log.js');
  // Bound inside openAwsLog, once the log's key (KMS, a key file or a token key) and its store are open.
  const bound: { witnessing?: LogWitnessing } = {};
  const log = await openAwsLog({
    ...config,
    witnessing: async ({ verifier, store }) => {
      bound.witnessing = await openWitnessing(settings, verifier, store, logger, cfg.dataDir);
      return bound.witnessing.hook;
    },
  }).catch(async (e: unknown) => {
    await bound.witnessing?.close();
    throw e;
  });
  const witnessing = bound.witnessing!;
  const close = async () => {
    await log.close();
    await witnessing.close();
  };
  if (!log.index) {
    await close();
    throw new Error('the AWS sequencer needs the DynamoDB index');
  }
  // Served at once, as the local log is: the index catches up beside it (openSequencer).
  const backend = sequencerBackend(
    {
      sequencer: log.sequencer,
      reader: log.reader,
      index: log.index,
      publicKey: log.signer.publicKey,
      objects: log.store,
      keyCreated: false,
      close,
    },
    cfg,
    witnessing,
  );
  await publishExplorerConfig(log.store, backend.ledger);
  return backend;
}

/** Writes /explorer.json beside the tiles, so the explorer served by the CDN knows the keys. */
async function publishExplorerConfig(store: ObjectStore, ledger: LedgerService): Promise<void> {
  const data = Buffer.from(JSON.stringify(explorerConfig(ledger)));
  const current = await store.getVersioned(EXPLORER_CONFIG_KEY);
  if (current && Buffer.from(current.data).equals(data)) return;
  await store.swap(EXPLORER_CONFIG_KEY, data, current?.version ?? null);
}

/** How long a replica with its own index may stay behind the published checkpoint and still be ready. */
const FOLLOWER_MAX_BEHIND_MS = 30_000;

/**
 * A read-only API replica: follows the published checkpoint in S3 once a second. With the
 * shared DynamoDB index it serves each verified checkpoint at once; without it, it keeps its
 * own LMDB index in `indexDir`, fed by following the record bundles (IndexFollower), and
 * serves a checkpoint only once every entry under it is indexed. One started over a missing
 * or outdated index serves the verified published checkpoint at once while its index catches
 * up beside it: lookups it does not cover answer 503 index_not_ready (never a wrong 404), and
 * /readyz says how far behind it is.
 */
async function awsReplica(
  config: AwsLogConfig,
  settings: WitnessSettings,
  logger: Logger,
  indexDir: string,
): Promise<Backend> {
  const { openAwsReader } = await import('./aws-log.js');
  const r = await openAwsReader(config);
  let advertised: AdvertisedWitnessing;
  try {
    advertised = advertisedWitnessing(settings, makeVerifier(config.origin, SIG_ED25519, r.publicKey));
  } catch (e) {
    await r.close();
    throw e;
  }
  const ownIndex = r.index ? undefined : new LmdbIndex(indexDir, logger, undefined, config.indexHints);
  const follower = ownIndex && new IndexFollower(ownIndex, r.reader, r.refreshCheckpoint, logger);
  const index = r.index ?? ownIndex!;
  const poll = follower ? () => follower.poll() : () => r.refreshCheckpoint();
  // Until the follower has indexed a checkpoint, the verified published one (never older than what it serves next).
  const current = () => follower?.checkpoint() ?? r.checkpoint();
  const release = async () => {
    await follower?.stop();
    await ownIndex?.close();
    await r.close();
  };
  const first = await r.refreshCheckpoint().catch(async (e: unknown) => {
    await release();
    throw e;
  });
  if (!first) {
    await release();
    throw new Error('the log has no published checkpoint yet; start the sequencer first');
  }
  const listeners: ((cp: PublishedCheckpoint, batch: IntegratedBatch | null) => void)[] = [];
  let failure: string | null = null;
  const follow = () => {
    const before = current();
    poll().then(
      (cp) => {
        failure = null;
        if (cp && cp !== before) for (const fn of listeners) fn(cp, null);
      },
      (e: unknown) => {
        failure = (e as Error).message;
        logger.error({ err: failure }, 'following the published log failed');
      },
    );
  };
  // The follower's first round (a catch-up from empty, maybe long) starts now, beside the server.
  if (follower) follow();
  const timer = setInterval(follow, 1000);
  return {
    ledger: {
      origin: config.origin,
      publicKey: r.publicKey,
      reader: r.reader,
      index,
      checkpoint: () => current() ?? first,
      lifetimeEntries: () => (current() ?? first).size,
      ...ledgerWitnessFields(advertised),
    },
    objects: r.store,
    keyCreated: false,
    witnessEndpoints: advertised.witnesses,
    ...(follower ? { followerStatus: () => follower.status() } : {}),
    onPublished: (fn) => listeners.push(fn),
    notReady: () => {
      if (failure !== null) return `following the published log failed: ${failure}`;
      const st = follower?.status();
      // Seconds behind are normal while a batch is indexed; a replica stuck behind is taken out of rotation.
      if (st && st.behindMs > FOLLOWER_MAX_BEHIND_MS)
        return `behind the published log by ${st.lag} entries for ${Math.round(st.behindMs / 1000)} s`;
      return null;
    },
    onStopped: () => undefined,
    async close() {
      clearInterval(timer);
      // The follower's round is stopped by release(); a shared index's last fetch is let finish.
      if (!follower) await poll().catch(() => undefined);
      await release();
    },
  };
}
