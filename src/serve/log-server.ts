// `stele serve`: the HTTP server over a log backend (src/serve/backends.ts): the JSON API,
// the log's objects as the CDN serves them, metrics, and graceful shutdown.
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type AppOptions, createApp } from '../api/app.js';
import { appListener } from '../api/fast-reads.js';
import { ServedCheckpoint } from '../api/objects.js';
import { type HttpServer, listenHttp } from '../http/server.js';
import { type GuardOptions, bearerTokens, parseTokenGrants } from '../api/anchor-guard.js';
import { Metrics } from '../api/metrics.js';
import { ConfigError } from '../settings/errors.js';
import type { ServeConfig } from './config.js';
import { mountControlPlane } from '../control/mount.js';
import { SIG_ED25519, formatVkey, keyIdOf, makeVerifier } from '../core/note.js';
import { describeQuorum, parsePolicy } from '../core/tlog-policy.js';
import { type Backend, openBackend, openSettingsHome } from './backends.js';
import { reconcileLogSettings } from './log-settings.js';
import { lockDataDir } from '../store/dir-lock.js';
import { Undo } from './undo.js';

export type { ServeConfig } from './config.js';

/** Longest a shutdown waits for clients to read their last answers. */
const SHUTDOWN_GRACE_MS = 10_000;

export interface RunningServer {
  readonly url: string;
  readonly origin: string;
  readonly keyId: string;
  readonly vkey: string;
  readonly dataDir: string;
  readonly keyCreated: boolean;
  /** vkeys of the witnesses whose cosignatures the log collects. */
  readonly witnesses: readonly string[];
  /** The mirrors it pushes to: vkey and where each serves its copy. */
  readonly mirrors: readonly { readonly vkey: string; readonly tiles: string }[];
  /** The quorum of the policy it advertises, in words: "none", "all of (w1, w2)", "1 of (w1, m1)"…. */
  readonly quorum: string;
  /** How many of the witnesses are demo witnesses (in this process, their state in the data directory). */
  readonly demoWitnesses: number;
  /** Stops accepting requests, integrates the anchors already accepted, closes storage. */
  close(): Promise<void>;
  /** Resolves if the log stops on its own (another writer, a changed lock): the process should exit. */
  readonly stopped: Promise<Error>;
}

/**
 * Starts in the order that keeps a mistaken second start harmless: the data directory's
 * lock first (a second process stops there, having touched nothing), then the port (a
 * taken port stops it before any recovery), answering 503 `starting` until the log is open.
 */
export async function startServer(
  given: ServeConfig,
  logger: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RunningServer> {
  const tokenGuard = guardFor(given);
  const { cfg, undo, dirLock, http, backend, anchorPolicy } = await openParts(given, logger, env);
  const { ledger } = backend;
  const guard: GuardOptions = { ...tokenGuard, ...(anchorPolicy ? { decide: anchorPolicy.decide } : {}) };
  const metrics = watchedMetrics(backend);
  // The stored checkpoint that /checkpoint serves: one that does not verify makes the log unready.
  const servedCheckpoint = new ServedCheckpoint(backend.objects, ledger, logger);
  metrics.watchHealth({
    notReady: () => backend.notReady() ?? servedCheckpoint.lastProblem(),
    checkpoint: () => ledger.checkpoint(),
    commitFailures: backend.sequencer && (() => backend.sequencer!.commitFailures),
  });
  let shuttingDown = false;
  const appOptions: AppOptions = {
    ledger,
    objects: backend.objects,
    logger,
    metrics,
    guard,
    notReady: () => backend.notReady(),
    closing: () => shuttingDown,
    servedCheckpoint,
  };
  const app = createApp(appOptions);
  const control = cfg.enterprise
    ? await undo.guard(() =>
        mountControlPlane(app, {
          submit: (req, onCommitted) => {
            if (!backend.append) throw new ConfigError('the enterprise control plane needs a log that accepts entries');
            return backend.append(req, onCommitted);
          },
          reader: ledger.reader,
          checkpoint: () => ledger.checkpoint(),
          dataDir: join(cfg.dataDir, 'control'),
          logger,
          env,
        }),
      )
    : undefined;
  const { server } = http;
  server.removeAllListeners('request');
  server.on('request', appListener(app, appOptions));

  let closing: Promise<void> | undefined;
  return {
    url: http.url,
    origin: ledger.origin,
    keyId: keyIdOf(ledger.publicKey),
    vkey: formatVkey(makeVerifier(ledger.origin, SIG_ED25519, ledger.publicKey)),
    dataDir: cfg.dataDir,
    keyCreated: backend.keyCreated,
    witnesses: backend.witnessEndpoints.map((e) => formatVkey(e.verifier)),
    mirrors: (ledger.mirrors ?? []).map((m) => ({ vkey: m.vkey, tiles: m.tiles })),
    quorum: ledger.witnessPolicy === undefined ? 'none' : describeQuorum(parsePolicy(ledger.witnessPolicy)),
    demoWitnesses: cfg.demoWitnesses ?? 0,
    close() {
      closing ??= (async () => {
        // Stop accepting connections; answers still owed are sent with Connection: close.
        shuttingDown = true;
        const stopped = new Promise<void>((r) => server.close(() => r()));
        server.closeIdleConnections();
        await control?.close();
        anchorPolicy?.close();
        await backend.sequencer?.close();
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        const hardStop = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
        await stopped;
        clearInterval(sweep);
        clearTimeout(hardStop);
        await backend.close();
        await dirLock?.release();
      })();
      return closing;
    },
    stopped: new Promise<Error>((resolve) => backend.onStopped(resolve)),
  };
}

/**
 * Opens, in order, what the server needs, each undone (newest first) if a later one fails:
 * the data directory's lock, the stored settings, the port, the log, the anchor policy.
 */
async function openParts(given: ServeConfig, logger: Logger, env: NodeJS.ProcessEnv) {
  const undo = new Undo();
  const dirLock = given.backend === 'aws' ? undefined : await lockDataDir(given.dataDir);
  undo.push(() => dirLock?.release());
  // The settings the log was started with, kept with it (a local directory or the S3 log's
  // private prefix): read and compared before anything opens, recorded once the log has.
  const stored = await undo.guard(() => openSettingsHome(given, env));
  let storedOpen = true;
  const closeStored = () => {
    if (storedOpen) stored?.close();
    storedOpen = false;
  };
  undo.push(closeStored);
  const settings = stored ? await undo.guard(() => reconcileLogSettings(given, stored.home)) : undefined;
  const cfg = settings?.cfg ?? given;
  if (settings && settings.applied.length > 0)
    logger.info(
      { settings: settings.applied },
      `using the ${settings.applied.join(', ')} stored with the log (${stored!.home.where})`,
    );
  const http = await undo.guard(() => listen(cfg));
  undo.push(() => http.close());
  const backend = await undo.guard(() => openBackend(cfg, logger, env));
  undo.push(() => backend.close());
  // Only a log that opened (verified, not refused) gets its settings recorded.
  await undo.guard(async () => settings?.record());
  closeStored();
  // Production: every anchor is decided by the anchor policy (loaded only then: Cedar is large).
  const anchorPolicy =
    cfg.mode === 'production' && backend.sequencer
      ? await undo.guard(async () => {
          const { openAnchorPolicy } = await import('../api/anchor-policy.js');
          return openAnchorPolicy(cfg.anchorPolicy ?? join(cfg.dataDir, 'anchor-policy'), logger).catch(
            (e: unknown) => {
              throw new ConfigError(`anchor policy: ${(e as Error).message}`);
            },
          );
        })
      : undefined;
  undo.push(() => anchorPolicy?.close());
  return { cfg, undo, dirLock, http, backend, anchorPolicy };
}

/** The /metrics collectors of a backend: its reads, its follower, each publish. */
function watchedMetrics(backend: Backend): Metrics {
  const metrics = new Metrics();
  metrics.watchReader(backend.ledger.reader.stats);
  if (backend.followerStatus) metrics.watchFollower(backend.followerStatus);
  backend.onPublished((cp, batch) => metrics.onPublished(cp, batch));
  metrics.onPublished(backend.ledger.checkpoint(), null);
  return metrics;
}

/** Binds the port before the log is opened; until then every request is a 503 `starting`. */
function listen(cfg: ServeConfig): Promise<HttpServer> {
  return listenHttp(
    (_req, res) => {
      res.writeHead(503, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', 'Retry-After': '1' });
      res.end(
        JSON.stringify({
          error: {
            code: 'starting',
            message: 'the log is starting (recovering and verifying its storage); retry shortly',
          },
        }),
      );
    },
    cfg.host,
    cfg.port,
  );
}

function guardFor(cfg: ServeConfig): GuardOptions {
  if (cfg.mode === 'demo') return cfg.anchorTokens ? { authenticate: bearerTokens(grants(cfg.anchorTokens)) } : {};
  if (!cfg.anchorTokens) {
    if (cfg.role === 'api') return {};
    throw new ConfigError('production mode needs anchor tokens (--anchor-tokens or STELE_ANCHOR_TOKENS)');
  }
  return {
    authenticate: bearerTokens(grants(cfg.anchorTokens)),
    ratePerSecond: cfg.anchorRate ?? 100,
    tenants: 'token',
  };
}

function grants(spec: string) {
  try {
    return parseTokenGrants(spec);
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}
