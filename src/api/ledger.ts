// The /api/ledger routes of docs/interface.md §4.1, computed from the tiles (through LogReader's
// cache) and the lookup index. No route reads more than a few tiles per tree level.
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { type AnchorRequest, ValidationError, parseAnchorBody, parseAnchorOptions } from '../core/anchor.js';
import type { LookupIndex } from '../index/types.js';
import { SIG_COSIGNATURE_V1, SIG_ED25519, formatVkey, keyIdOf, makeVerifier } from '../core/note.js';
import type { LogReader } from '../read/reader.js';
import {
  AnchorTimeoutError,
  type AnchorReceipt,
  PoolFullError,
  type PublishedCheckpoint,
  SequencerStoppedError,
  StorageUnavailableError,
  type SubmitOptions,
} from '../sequencer/contract.js';
import { ApiError, badRequest } from '../http/errors.js';
import { ledgerReads } from './ledger-reads.js';
import { JSON_TYPE, noStore } from './route-helpers.js';
import { type CheckpointView, anchorJson } from './views.js';
import type { KeyView, MirrorInfo } from './wire.js';
export type { MirrorInfo } from './wire.js';
import { registerSearch } from './search.js';

export interface WitnessInfo {
  readonly name: string;
  readonly publicKey: Uint8Array;
}

/** What the ledger routes read and write. A read-only replica has no `submit`. */
export interface LedgerService {
  readonly origin: string;
  readonly publicKey: Uint8Array;
  readonly reader: LogReader;
  readonly index: LookupIndex;
  /** The latest published checkpoint. */
  checkpoint(): PublishedCheckpoint;
  /** The tree the log has signed but not published yet (it waits for cosignatures), if any. */
  committed?(): PublishedCheckpoint;
  /** Entries accepted, including those still pooled. */
  lifetimeEntries(): number;
  readonly witnesses: readonly WitnessInfo[];
  /** Cosignatures a checkpoint needs at least (exact for an M-of-N policy). */
  readonly witnessThreshold: number;
  /** The witness policy as C2SP tlog-policy text (this log, its witnesses, the quorum), if known. */
  readonly witnessPolicy?: string;
  /** The tlog-mirrors the log pushes to. */
  readonly mirrors?: readonly MirrorInfo[];
  /** Appends, or answers an identical anchor with the entry already in the log (`existing`). */
  submit?(request: AnchorRequest, options?: SubmitOptions): Promise<AnchorReceipt>;
}

/**
 * Decides whether a parsed anchor may enter the pool, as which request (the tenant recorded):
 * throws the refusal (403). See src/api/anchor-guard.ts.
 */
export type AnchorAdmission = (ctx: Context, request: AnchorRequest) => AnchorRequest;

/**
 * `anchorGuards` run before the anchor body is read (authentication, rate limits, parsing);
 * `admit` after it is validated, before it is submitted.
 */
export function ledgerRouter(
  svc: LedgerService,
  anchorGuards: Middleware[] = [],
  admit: AnchorAdmission = (_ctx, r) => r,
): Router {
  const router = new Router({ prefix: '/api/ledger' });
  const reads = ledgerReads(svc);
  const checkpoints = reads.checkpoints;
  const view = (cp: PublishedCheckpoint): CheckpointView => checkpoints.view(cp);

  router.get('/checkpoint', (ctx) => {
    noStore(ctx);
    ctx.body = view(svc.checkpoint());
  });

  router.get('/key', (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=300');
    const body: KeyView = {
      origin: svc.origin,
      keyId: keyIdOf(svc.publicKey),
      publicKey: Buffer.from(svc.publicKey).toString('base64'),
      vkey: formatVkey(makeVerifier(svc.origin, SIG_ED25519, svc.publicKey)),
      witnesses: svc.witnesses.map((w) => ({
        name: w.name,
        vkey: formatVkey(makeVerifier(w.name, SIG_COSIGNATURE_V1, w.publicKey)),
      })),
      witnessPolicy: {
        threshold: svc.witnessThreshold,
        ...(svc.witnessPolicy !== undefined ? { policy: svc.witnessPolicy } : {}),
      },
      ...(svc.mirrors ? { mirrors: [...svc.mirrors] } : {}),
    };
    ctx.body = body;
  });

  router.get('/entry', reads.entry);
  router.get('/consistency', reads.consistency);

  router.post('/anchor', ...anchorGuards, async (ctx) => {
    noStore(ctx);
    if (!svc.submit) throw new ApiError(405, 'read_only', 'this replica does not accept anchors');
    if (!ctx.is('application/json'))
      throw new ApiError(415, 'unsupported_media_type', 'request body must be application/json');
    let request: AnchorRequest;
    let options: SubmitOptions;
    try {
      const body = (ctx.request as { body?: unknown }).body;
      request = parseAnchorBody(body);
      options = parseAnchorOptions(body);
    } catch (e) {
      if (e instanceof ValidationError) throw badRequest(e.code, e.message);
      throw e;
    }
    request = admit(ctx, request);
    let receipt: AnchorReceipt;
    try {
      receipt = await svc.submit(request, options);
    } catch (e) {
      if (e instanceof PoolFullError) throw new ApiError(503, 'pool_full', e.message, { 'Retry-After': '1' });
      if (e instanceof StorageUnavailableError)
        throw new ApiError(503, 'storage_unavailable', e.message, { 'Retry-After': '5' });
      if (e instanceof AnchorTimeoutError) throw new ApiError(503, 'anchor_timeout', e.message, { 'Retry-After': '5' });
      if (e instanceof SequencerStoppedError) throw new ApiError(503, 'sequencer_stopped', e.message);
      throw e;
    }
    // 200 and `existing`: an identical anchor was already in the log and nothing was appended.
    ctx.status = receipt.existing ? 200 : 201;
    ctx.set('Content-Type', JSON_TYPE);
    ctx.body = anchorJson(
      receipt.seq,
      receipt.entry,
      receipt.entryHash,
      receipt.inclusionProof(),
      checkpoints.json(receipt.checkpoint),
      receipt.existing === true,
    );
  });

  registerSearch(router, svc);

  router.get('/summary', async (ctx) => {
    noStore(ctx);
    const cp = svc.checkpoint();
    ctx.body = {
      logId: svc.origin,
      treeSize: cp.size,
      lifetimeEntries: svc.lifetimeEntries(),
      pendingEntries: svc.lifetimeEntries() - cp.size,
      entriesByType: await svc.index.countsByType(),
      indexedEntries: await svc.index.indexedSize(),
      lastCheckpointTime: cp.timestamp,
      witnesses: svc.witnesses.length,
      witnessThreshold: svc.witnessThreshold,
    };
  });

  return router;
}
