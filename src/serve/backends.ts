// Where `stele serve` gets its log: the embedded local directory (sequencer, LMDB index,
// demo witnesses), or AWS (STELE_BACKEND=aws) as the sequencer or a read-only API replica.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { LedgerService, MirrorInfo } from '../api/ledger.js';
import type { AwsLogConfig } from '../aws/log.js';
import { indexFeeder, reconcileIndex } from '../index/catchup.js';
import { type FollowerStatus, IndexFollower } from '../index/follower.js';
import { LmdbIndex } from '../index/lmdb.js';
import { publishedAnchorFinder } from '../index/published-anchor.js';
import { DuplicateAnchors } from '../sequencer/duplicates.js';
import { localPaths, openLocalLog } from '../log/local.js';
import { type NoteVerifier, SIG_ED25519, formatVkey, makeVerifier } from '../core/note.js';
import { LogReader, logCorruptObjects } from '../reader.js';
import {
  type AnchorReceipt,
  AnchorTimeoutError,
  type IntegratedBatch,
  type PublishedCheckpoint,
} from '../sequencer/contract.js';
import type { Sequencer } from '../sequencer/sequencer.js';
import { openLogSigner } from './log-signer.js';
import { FsObjectStore } from '../store/fs.js';
import type { ObjectReader, ObjectStore } from '../store/store.js';
import { EXPLORER_CONFIG_KEY } from '../store/layout.js';
import { explorerConfig } from '../api/explorer.js';
import { type WitnessEndpoint, WitnessCollector } from '../witness/collector.js';
import { WitnessPolicyError, servedPolicy, thresholdServedPolicy } from '../witness/policy.js';
import {
  type Policy,
  PolicyError,
  formatPolicy,
  minimumCosigners,
  parsePolicy,
  withCosigners,
} from '../core/tlog-policy.js';
import { type RunningWitness, parseWitnessSpec, startWitness } from '../witness/host.js';
import { ConfigError, type ServeConfig } from '../config.js';
import type { MirrorEndpoint } from '../mirror/client.js';
import { MirrorPusher } from '../mirror/pusher.js';
import { originHash } from '../witness/protocol.js';

/** A log as the HTTP layer sees it. */
export interface Backend {
  readonly ledger: LedgerService;
  /** The published objects, served at /checkpoint and /tile/…. */
  readonly objects: ObjectReader;
  readonly sequencer?: Sequencer;
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

export async function openBackend(cfg: ServeConfig, logger: Logger, env: NodeJS.ProcessEnv): Promise<Backend> {
  if (cfg.backend === 'aws') {
    // The AWS SDK loads only for this backend.
    const { awsLogConfigFromEnv } = await import('../aws/log.js');
    // Without DynamoDB the sequencer keeps its lookup index in LMDB under the data directory.
    const aws = {
      ...awsLogConfigFromEnv(env, { lock: cfg.lock, role: cfg.role ?? 'sequencer' }),
      ...(cfg.minBatchSpacingMs !== undefined ? { minBatchSpacing: cfg.minBatchSpacingMs } : {}),
      indexDir: join(cfg.dataDir, 'index'),
      logger,
    };
    return cfg.role === 'api' ? awsReplica(aws, logger, aws.indexDir) : awsSequencer(aws, cfg.anchorTimeoutMs);
  }
  return localBackend(cfg, logger, env);
}

/**
 * The receipt, or AnchorTimeoutError once `ms` have passed: an anchor never hangs, whatever
 * storage or the witnesses do. It may still be committed later, which the error says.
 */
export function withDeadline(
  receipt: Promise<AnchorReceipt>,
  ms: number,
  why: () => string | null,
): Promise<AnchorReceipt> {
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

function sequencerLedger(
  sequencer: Sequencer,
  reader: LogReader,
  index: LedgerService['index'],
  publicKey: Uint8Array,
  origin: string,
  endpoints: readonly WitnessEndpoint[],
  policy: Policy | null,
  anchorTimeoutMs: number,
  mirrors: readonly MirrorInfo[] = [],
): LedgerService {
  const anchors = new DuplicateAnchors(
    (req) => sequencer.submit(req),
    publishedAnchorFinder(index, reader, () => sequencer.checkpoint),
  );
  return {
    origin,
    publicKey,
    reader,
    index,
    checkpoint: () => sequencer.checkpoint,
    lifetimeEntries: () => sequencer.lifetimeEntries,
    witnesses: endpoints.map((e) => ({ name: e.verifier.name, publicKey: e.verifier.publicKey })),
    witnessThreshold: policy ? minimumCosigners(policy) : 0,
    ...(policy ? { witnessPolicy: formatPolicy(policy) } : {}),
    ...(mirrors.length > 0 ? { mirrors } : {}),
    submit: (req, options) => withDeadline(anchors.submit(req, options), anchorTimeoutMs, () => sequencer.notReady),
  };
}

async function localBackend(cfg: ServeConfig, logger: Logger, env: NodeJS.ProcessEnv): Promise<Backend> {
  const logKey = await openLogSigner(cfg.signer, localPaths(cfg.dataDir).keyFile, cfg.origin, env);
  const logVerifier = makeVerifier(cfg.origin, SIG_ED25519, logKey.signer.publicKey);
  let endpoints: WitnessEndpoint[],
    quorum: ((cosigned: ReadonlySet<string>) => boolean) | undefined,
    policy: Policy | undefined,
    demo: RunningWitness[];
  try {
    ({ endpoints, quorum, policy } = witnessSetup(cfg, logVerifier));
    demo = await startDemoWitnesses(cfg, logVerifier, logger);
  } catch (e) {
    logKey.close();
    throw e;
  }
  endpoints.push(...demo.map((d) => ({ verifier: d.verifier, url: d.url })));
  const published =
    policy ??
    thresholdServedPolicy(logVerifier, endpoints, Math.min(cfg.witnessThreshold ?? endpoints.length, endpoints.length));
  const collector =
    endpoints.length > 0
      ? new WitnessCollector({
          witnesses: endpoints,
          ...(quorum ? { quorum } : { threshold: cfg.witnessThreshold ?? endpoints.length }),
        })
      : undefined;
  const mirrors = mirrorSetup(cfg, new FsObjectStore(localPaths(cfg.dataDir).publicDir), logger);
  const advertised = mirrors ? withMirrors(published, mirrors.endpoints, cfg) : published;
  const index = new LmdbIndex(join(cfg.dataDir, 'private', 'index'), logger);
  // The index's reader exists before the log opens: a start that re-applies a staged batch
  // tells the listeners about it from inside openLocalLog.
  const reader = new LogReader(new FsObjectStore(localPaths(cfg.dataDir).publicDir), logCorruptObjects(logger));
  const opened = await openLocalLog({
    dataDir: cfg.dataDir,
    origin: cfg.origin,
    batchInterval: cfg.batchIntervalMs,
    maxBatch: cfg.maxBatch,
    minBatchSpacing: cfg.minBatchSpacingMs ?? 0,
    fsync: cfg.fsync ?? true,
    logger,
    listeners: [indexFeeder(index, reader)],
    witnessing: mirrors ? mirrors.witnessing(collector) : collector,
    signer: logKey.signer,
  }).catch(async (e: unknown) => {
    logKey.close();
    await index.close();
    await Promise.all(demo.map((d) => d.close()));
    throw e;
  });
  const { sequencer, store, signer } = opened;
  const keyCreated = logKey.created;
  await reconcileIndex(index, reader, sequencer.checkpoint, logger);
  if (mirrors) {
    sequencer.onPublished((cp) => mirrors.published(cp.note, cp.size));
    mirrors.published(sequencer.checkpoint.note, sequencer.checkpoint.size);
  }
  return {
    ledger: sequencerLedger(
      sequencer,
      reader,
      index,
      signer.publicKey,
      cfg.origin,
      endpoints,
      advertised,
      cfg.anchorTimeoutMs,
      mirrors ? mirrorInfo(mirrors.endpoints, cfg.origin) : [],
    ),
    objects: store,
    sequencer,
    keyCreated,
    witnessEndpoints: endpoints,
    ...sequencerHealth(sequencer),
    async close() {
      await sequencer.close();
      await mirrors?.idle();
      await index.close();
      await Promise.all(demo.map((d) => d.close()));
      logKey.close();
    },
  };
}

function sequencerHealth(sequencer: Sequencer): Pick<Backend, 'onPublished' | 'notReady' | 'onStopped'> {
  return {
    onPublished: (fn) => sequencer.onPublished(fn),
    notReady: () => sequencer.notReady,
    onStopped: (fn) => sequencer.onStopped(fn),
  };
}

/**
 * The external witnesses and the quorum: from --witness-policy (a C2SP tlog-policy file,
 * src/witness/policy.ts), else --witness with --witness-threshold (M of N, counted by the
 * collector). Read before anything starts, so a bad policy refuses with one line.
 */
function witnessSetup(
  cfg: ServeConfig,
  log: NoteVerifier,
): { endpoints: WitnessEndpoint[]; quorum?: (cosigned: ReadonlySet<string>) => boolean; policy?: Policy } {
  let given: WitnessEndpoint[];
  try {
    given = (cfg.witnesses ?? '')
      .split(',')
      .filter(Boolean)
      .map((w) => parseWitnessSpec(w.trim()));
  } catch (e) {
    throw new ConfigError(`--witness: ${(e as Error).message}`);
  }
  if (cfg.witnessPolicy === undefined) return { endpoints: given };
  if (cfg.demoWitnesses)
    throw new ConfigError(
      '--demo-witnesses cannot be combined with --witness-policy: name every witness in the policy',
    );
  let text: string;
  try {
    text = readFileSync(cfg.witnessPolicy, 'utf8');
  } catch (e) {
    throw new ConfigError(
      `cannot read the witness policy ${cfg.witnessPolicy}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  try {
    const served = servedPolicy(parsePolicy(text), log, given);
    return { endpoints: served.endpoints, quorum: served.quorum, policy: served.policy };
  } catch (e) {
    if (e instanceof PolicyError || e instanceof WitnessPolicyError)
      throw new ConfigError(`witness policy ${cfg.witnessPolicy}: ${e.message}`);
    throw e;
  }
}

/** The tlog-mirrors of --mirror (and --mirror-quorum, --mirror-timeout), or null when there are none. */
function mirrorSetup(
  cfg: ServeConfig,
  objects: ObjectReader,
  logger: Logger,
): (MirrorPusher & { readonly endpoints: readonly MirrorEndpoint[] }) | null {
  const specs = (cfg.mirrors ?? '')
    .split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  if (specs.length === 0) return null;
  try {
    const mirrors = specs.map((m) => parseWitnessSpec(m));
    const pusher = new MirrorPusher({
      mirrors,
      required: cfg.mirrorQuorum ?? 0,
      objects,
      logger,
      ...(cfg.mirrorTimeoutMs !== undefined ? { timeoutMs: cfg.mirrorTimeoutMs } : {}),
    });
    return Object.assign(pusher, { endpoints: mirrors });
  } catch (e) {
    throw new ConfigError(`--mirror: ${(e as Error).message}`);
  }
}

/**
 * The policy the log publishes, with its mirrors: each a witness line (a mirror cosigns as a
 * witness does), and the --mirror-quorum of them required beside the witnesses' quorum.
 */
function withMirrors(policy: Policy, mirrors: readonly MirrorEndpoint[], cfg: ServeConfig): Policy {
  const cosigners = mirrors.map((m) => ({ name: m.verifier.name, vkey: formatVkey(m.verifier) }));
  try {
    return withCosigners(policy, cosigners, cfg.mirrorQuorum ?? 0, 'mirrors');
  } catch (e) {
    throw new ConfigError(`--mirror: ${(e as Error).message}`);
  }
}

/** What /api/ledger/key says of each mirror: its key, and where its copy of this log is served. */
function mirrorInfo(mirrors: readonly MirrorEndpoint[], origin: string): MirrorInfo[] {
  return mirrors.map((m) => {
    const u = new URL(m.url);
    u.username = u.password = u.search = u.hash = '';
    const base = u.toString().replace(/\/$/, '');
    return { name: m.verifier.name, vkey: formatVkey(m.verifier), tiles: `${base}/${originHash(origin)}/` };
  });
}

/** Demo mode's witnesses: in-process, on loopback, so the default log is witnessed. */
function startDemoWitnesses(cfg: ServeConfig, log: NoteVerifier, logger: Logger): Promise<RunningWitness[]> {
  return Promise.all(
    Array.from({ length: cfg.demoWitnesses ?? 0 }, (_, i) =>
      startWitness({
        dataDir: join(cfg.dataDir, 'witnesses', `w${i + 1}`),
        name: `witness${i + 1}.demo.stele`,
        logs: [log],
        host: '127.0.0.1',
        port: 0,
        logger,
      }),
    ),
  );
}

async function awsSequencer(config: AwsLogConfig, anchorTimeoutMs: number): Promise<Backend> {
  const { openAwsLog } = await import('../aws/log.js');
  const log = await openAwsLog(config);
  if (!log.index) throw new Error('the AWS sequencer needs the DynamoDB index');
  await log.indexReady;
  const { sequencer } = log;
  const ledger = sequencerLedger(
    sequencer,
    log.reader,
    log.index,
    log.signer.publicKey,
    config.origin,
    [],
    null,
    anchorTimeoutMs,
  );
  await publishExplorerConfig(log.store, ledger);
  return {
    ledger,
    objects: log.store,
    sequencer,
    keyCreated: false,
    witnessEndpoints: [],
    ...sequencerHealth(sequencer),
    close: () => log.close(),
  };
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
 * serves a checkpoint only once every entry under it is indexed.
 */
async function awsReplica(config: AwsLogConfig, logger: Logger, indexDir: string): Promise<Backend> {
  const { openAwsReader } = await import('../aws/log.js');
  const r = await openAwsReader(config);
  const ownIndex = r.index ? undefined : new LmdbIndex(indexDir, logger);
  const follower = ownIndex && new IndexFollower(ownIndex, r.reader, r.refreshCheckpoint, logger);
  const index = r.index ?? ownIndex!;
  const poll = follower ? () => follower.poll() : () => r.refreshCheckpoint();
  const current = follower ? () => follower.checkpoint() : () => r.checkpoint();
  const release = async () => {
    await ownIndex?.close();
    await r.close();
  };
  const first = await poll().catch(async (e: unknown) => {
    await release();
    throw e;
  });
  if (!first) {
    await release();
    throw new Error('the log has no published checkpoint yet; start the sequencer first');
  }
  const listeners: ((cp: PublishedCheckpoint, batch: IntegratedBatch | null) => void)[] = [];
  let failure: string | null = null;
  const timer = setInterval(() => {
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
  }, 1000);
  return {
    ledger: {
      origin: config.origin,
      publicKey: r.publicKey,
      reader: r.reader,
      index,
      checkpoint: () => current() ?? first,
      lifetimeEntries: () => (current() ?? first).size,
      witnesses: [],
      witnessThreshold: 0,
    },
    objects: r.store,
    keyCreated: false,
    witnessEndpoints: [],
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
      await poll().catch(() => undefined);
      await release();
    },
  };
}
