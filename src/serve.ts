// `stele serve`: one process with the sequencer, the lookup index, the JSON API and the
// tile server, over a local data directory (the embedded defaults).
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { createApp } from './api/app.js';
import { mountControlPlane } from './control/mount.js';
import { type GuardOptions, bearerTokens, parseTokenGrants } from './api/guard.js';
import type { LedgerService } from './api/ledger.js';
import { Metrics } from './api/metrics.js';
import { catchUpIndex, indexFeeder } from './index/catchup.js';
import { LmdbIndex } from './index/lmdb.js';
import { localPaths, openLocalLog } from './log/local.js';
import { type NoteVerifier, SIG_ED25519, formatVkey, keyIdOf, makeVerifier } from './note.js';
import { loadOrCreateKey } from './signer.js';
import { type WitnessEndpoint, WitnessCollector } from './witness/collector.js';
import { type RunningWitness, parseWitnessSpec, startWitness } from './witness/host.js';
import { LogReader } from './reader.js';

/** Longest a shutdown waits for clients to read their last answers. */
const SHUTDOWN_GRACE_MS = 10_000;

export interface ServeConfig {
  readonly dataDir: string;
  readonly origin: string;
  readonly host: string;
  readonly port: number;
  readonly batchIntervalMs: number;
  readonly maxBatch: number;
  readonly mode: 'demo' | 'production';
  /** `name=token[@tenant],…`; required in production mode. */
  readonly anchorTokens?: string;
  /** Anchors per second per client (production default 100). */
  readonly anchorRate?: number;
  readonly fsync?: boolean;
  /** Local demo witnesses started in this process (each with its own key and state). */
  readonly demoWitnesses?: number;
  /** External witnesses, `<vkey>=<url>` each, comma-separated. */
  readonly witnesses?: string;
  /** Cosignatures required to publish (default: all configured witnesses). */
  readonly witnessThreshold?: number;
  /** Mount the enterprise control plane (/v1) on this server, recording into this log. */
  readonly enterprise?: boolean;
}

export interface RunningServer {
  readonly url: string;
  readonly origin: string;
  readonly keyId: string;
  readonly vkey: string;
  readonly dataDir: string;
  readonly keyCreated: boolean;
  /** vkeys of the witnesses whose cosignatures the log collects. */
  readonly witnesses: readonly string[];
  /** Stops accepting requests, integrates the anchors already accepted, closes storage. */
  close(): Promise<void>;
}

export async function startServer(cfg: ServeConfig, logger: Logger): Promise<RunningServer> {
  const guard = guardFor(cfg);
  const { signer: logKey } = await loadOrCreateKey(localPaths(cfg.dataDir).keyFile, cfg.origin);
  const demo = await startDemoWitnesses(cfg, makeVerifier(cfg.origin, SIG_ED25519, logKey.publicKey), logger);
  const endpoints: WitnessEndpoint[] = [
    ...(cfg.witnesses ?? '').split(',').filter(Boolean).map((w) => parseWitnessSpec(w.trim())),
    ...demo.map((d) => ({ verifier: d.verifier, url: d.url })),
  ];
  const threshold = cfg.witnessThreshold ?? endpoints.length;
  const collector = endpoints.length > 0 ? new WitnessCollector({ witnesses: endpoints, threshold }) : undefined;
  const index = new LmdbIndex(join(cfg.dataDir, 'private', 'index'));
  const metrics = new Metrics();
  let reader: LogReader | undefined;
  const { sequencer, store, signer, keyCreated } = await openLocalLog({
    dataDir: cfg.dataDir,
    origin: cfg.origin,
    batchInterval: cfg.batchIntervalMs,
    maxBatch: cfg.maxBatch,
    fsync: cfg.fsync ?? true,
    logger,
    listeners: [{ onBatch: (b) => indexFeeder(index, reader!).onBatch(b) }],
    witnessing: collector,
  }).catch(async (e) => {
    await index.close();
    await Promise.all(demo.map((d) => d.close()));
    throw e;
  });
  reader = new LogReader(store);
  metrics.watchReader(reader.stats);
  await catchUpIndex(index, reader, sequencer.checkpoint.size, sequencer.checkpoint);
  sequencer.onPublished((cp, batch) => metrics.onPublished(cp, batch));
  metrics.onPublished(sequencer.checkpoint, null);

  const ledger: LedgerService = {
    origin: cfg.origin,
    publicKey: signer.publicKey,
    reader,
    index,
    checkpoint: () => sequencer.checkpoint,
    lifetimeEntries: () => sequencer.lifetimeEntries,
    witnesses: endpoints.map((e) => ({ name: e.verifier.name, publicKey: e.verifier.publicKey })),
    witnessThreshold: collector ? threshold : 0,
    submit: (req) => sequencer.submit(req),
  };
  const app = createApp({
    ledger,
    objects: store,
    logger,
    metrics,
    guard,
    unhealthy: () => (sequencer.failure ? `sequencer stopped: ${sequencer.failure.message}` : null),
  });

  const control = cfg.enterprise
    ? await mountControlPlane(app, {
        submit: (req) => sequencer.submit(req),
        reader,
        checkpoint: () => sequencer.checkpoint,
        dataDir: join(cfg.dataDir, 'control'),
        logger,
        env: process.env,
      })
    : undefined;

  let shuttingDown = false;
  app.middleware.unshift(async (ctx, next) => {
    if (shuttingDown) ctx.set('Connection', 'close');
    await next();
  });

  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(cfg.port, cfg.host, () => resolve(s));
    s.once('error', reject);
  });
  server.keepAliveTimeout = 65_000;
  const { port } = server.address() as AddressInfo;
  const host = cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host;

  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    origin: cfg.origin,
    keyId: keyIdOf(signer.publicKey),
    vkey: formatVkey(makeVerifier(cfg.origin, SIG_ED25519, signer.publicKey)),
    dataDir: cfg.dataDir,
    keyCreated,
    witnesses: endpoints.map((e) => formatVkey(e.verifier)),
    close() {
      closing ??= (async () => {
        // Stop accepting connections; answers still owed are sent with Connection: close.
        shuttingDown = true;
        const stopped = new Promise<void>((r) => server.close(() => r()));
        server.closeIdleConnections();
        await control?.close();
        await sequencer.close();
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        const hardStop = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
        await stopped;
        clearInterval(sweep);
        clearTimeout(hardStop);
        await index.close();
        await Promise.all(demo.map((d) => d.close()));
      })();
      return closing;
    },
  };
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

function guardFor(cfg: ServeConfig): GuardOptions {
  if (cfg.mode === 'demo') return cfg.anchorTokens ? { authenticate: bearerTokens(parseTokenGrants(cfg.anchorTokens)) } : {};
  if (!cfg.anchorTokens) throw new Error('production mode needs anchor tokens (--anchor-tokens or STELE_ANCHOR_TOKENS)');
  return { authenticate: bearerTokens(parseTokenGrants(cfg.anchorTokens)), ratePerSecond: cfg.anchorRate ?? 100 };
}
