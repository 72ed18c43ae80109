// The /api/ledger routes of spec §4.1, computed from the tiles (through LogReader's
// cache) and the lookup index. No route reads more than a few tiles per tree level.
import { type ParsedUrlQuery, parse as parseQuery } from 'node:querystring';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { type AnchorRequest, ValidationError, parseAnchorBody, parseAnchorOptions } from '../core/anchor.js';
import { ARTIFACT_ID, type CanonicalEntry, ZERO_HASH, parseEntryId } from '../core/entry.js';
import { TLOG_PROOF_MEDIA_TYPE, steleTlogProof } from '../core/tlog-proof.js';
import { isHash64, toHex } from '../core/hash.js';
import type { LookupIndex } from '../index/types.js';
import { SIG_COSIGNATURE_V1, SIG_ED25519, formatVkey, keyIdOf, makeVerifier } from '../core/note.js';
import type { LogReader } from '../reader.js';
import {
  AnchorTimeoutError,
  type AnchorReceipt,
  PoolFullError,
  type PublishedCheckpoint,
  SequencerStoppedError,
  StorageUnavailableError,
  type SubmitOptions,
} from '../sequencer/contract.js';
import { ApiError, badRequest, notFound } from './errors.js';
import { registerSearch } from './search.js';
import { type CheckpointView, CheckpointViews, anchorJson, consistencyJson, entryProofJson } from './views.js';
import type { KeyView } from './wire.js';

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
  /** Entries accepted, including those still pooled. */
  lifetimeEntries(): number;
  readonly witnesses: readonly WitnessInfo[];
  /** Cosignatures a checkpoint needs at least (exact for an M-of-N policy). */
  readonly witnessThreshold: number;
  /** The witness policy as C2SP tlog-policy text (this log, its witnesses, the quorum), if known. */
  readonly witnessPolicy?: string;
  /** Appends, or answers an identical anchor with the entry already in the log (`existing`). */
  submit?(request: AnchorRequest, options?: SubmitOptions): Promise<AnchorReceipt>;
}

/** Spec §4.1's three lookup keys, plus `leaf` (a bare leaf index, for tlog tooling). */
const LOOKUP_KEYS = ['id', 'artifact', 'hash', 'leaf'] as const;
const MAX_QUERY_VALUE = 128;
/** What `ctx.type = 'json'` sets, without its per-request MIME lookup. */
const JSON_TYPE = 'application/json; charset=utf-8';

type Query = ParsedUrlQuery;

/**
 * Whether /entry should answer a C2SP tlog-proof file: `format=tlog-proof`, or an Accept
 * header naming text/x.tlog-proof (`format=json` keeps the JSON view whatever Accept says).
 */
function wantsTlogProof(ctx: Context, format: string | undefined): boolean {
  if (format !== undefined) {
    if (format === 'tlog-proof') return true;
    if (format === 'json') return false;
    throw badRequest('invalid_format', 'format must be json or tlog-proof');
  }
  return (ctx.get('Accept') ?? '')
    .split(',')
    .some((t) => t.split(';')[0]!.trim().toLowerCase() === TLOG_PROOF_MEDIA_TYPE);
}

/** The request's query parameters: node:querystring parses several times faster than ctx.query. */
const queryOf = (ctx: Context): Query => parseQuery(ctx.querystring);

/** A query parameter given exactly once, or undefined. */
function single(query: Query, name: string): string | undefined {
  const v = query[name];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) throw badRequest('duplicate_parameter', `${name} is given more than once`);
  if (v.length > MAX_QUERY_VALUE) throw badRequest(`invalid_${name}`, `${name} is too long`);
  return v;
}

function treeSizeParam(query: Query, name: string): number {
  const v = single(query, name);
  if (v === undefined) throw badRequest(`missing_${name}`, `${name} is required`);
  if (!/^(0|[1-9][0-9]{0,15})$/.test(v) || !Number.isSafeInteger(Number(v))) {
    throw badRequest(`invalid_${name}`, `${name} must be a non-negative integer`);
  }
  return Number(v);
}

/**
 * Whether the entry found through the index is the one looked up. Only these two keys go
 * through the index (id and leaf name the leaf itself), so only they parse the record.
 */
function carries(found: { readonly entry: CanonicalEntry }, key: (typeof LOOKUP_KEYS)[number], value: string): boolean {
  if (key === 'hash') return found.entry.digest === value.toLowerCase();
  if (key === 'artifact') return found.entry.artifactId === value;
  return true;
}

/**
 * Decides whether a parsed anchor may enter the pool, as which request (the tenant recorded):
 * throws the refusal (403). See src/api/guard.ts.
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
  const witnessKeys = new Map(svc.witnesses.map((w) => [w.name, w.publicKey]));
  const checkpoints = new CheckpointViews(svc.publicKey, witnessKeys, () => svc.lifetimeEntries());
  const view = (cp: PublishedCheckpoint): CheckpointView => checkpoints.view(cp);
  const noStore = (ctx: Context) => ctx.set('Cache-Control', 'no-store');

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
    };
    ctx.body = body;
  });

  router.get('/entry', async (ctx) => {
    noStore(ctx);
    const query = queryOf(ctx);
    const given = LOOKUP_KEYS.filter((k) => query[k] !== undefined);
    const extra = Object.keys(query).filter((k) => !(LOOKUP_KEYS as readonly string[]).includes(k) && k !== 'format');
    const asProof = wantsTlogProof(ctx, single(query, 'format'));
    if (extra.length > 0) throw badRequest('unknown_parameter', `unknown query parameter ${JSON.stringify(extra[0])}`);
    if (given.length !== 1) throw badRequest('lookup_key', 'give exactly one of id, artifact, hash or leaf');
    const cp = svc.checkpoint();
    const key = given[0]!;
    const value = single(query, key)!;
    let seq: number | undefined;
    let idPrefix: string | undefined;
    if (key === 'id') {
      const id = parseEntryId(value);
      if (!id) throw badRequest('invalid_id', 'id must look like led_<leaf index>_<12 hex>');
      seq = id.seq;
      idPrefix = id.hashPrefix;
    } else if (key === 'leaf') {
      seq = treeSizeParam(query, 'leaf');
    } else if (key === 'artifact') {
      if (!ARTIFACT_ID.test(value)) throw badRequest('invalid_artifact', 'artifact must look like art_<24 hex>');
      seq = await svc.index.findByArtifact(value);
    } else {
      if (!isHash64(value)) throw badRequest('invalid_hash', 'hash must be 64 hexadecimal characters');
      seq = await svc.index.findByDigest(value.toLowerCase());
    }
    if (seq === undefined || seq >= cp.size)
      throw notFound('entry_not_found', `no published entry for ${key}=${value}`);
    const found = await svc.reader.entryWithProof(seq, cp);
    if (idPrefix !== undefined && !toHex(found.entryHash).startsWith(idPrefix)) {
      throw notFound('entry_not_found', `entry ${seq} exists but its hash does not start with ${idPrefix}`);
    }
    // The index is derived data and may be stale (restored, or ahead of a rolled-back log):
    // the entry it names must really carry the digest or artifact asked for.
    if (!carries(found, key, value)) throw notFound('entry_not_found', `no published entry for ${key}=${value}`);
    if (asProof) {
      // extra needs entry_hash(seq − 1), authenticated against the same checkpoint (§1.1).
      const prior = seq === 0 ? ZERO_HASH : (await svc.reader.entry(seq - 1, cp)).entryHash;
      ctx.set('Content-Type', `${TLOG_PROOF_MEDIA_TYPE}; charset=utf-8`);
      ctx.body = steleTlogProof(seq, found.canonical, prior, found.auditPath, cp.note);
      return;
    }
    ctx.set('Content-Type', JSON_TYPE);
    ctx.body = entryProofJson(
      seq,
      found.canonical,
      found.entryHash,
      found.auditPath,
      view(cp),
      checkpoints.json(cp),
      found.leafHash,
    );
  });

  router.get('/consistency', async (ctx) => {
    noStore(ctx);
    const query = queryOf(ctx);
    const extra = Object.keys(query).filter((k) => k !== 'first' && k !== 'second');
    if (extra.length > 0) throw badRequest('unknown_parameter', `unknown query parameter ${JSON.stringify(extra[0])}`);
    const first = treeSizeParam(query, 'first');
    const second = treeSizeParam(query, 'second');
    const cp = svc.checkpoint();
    if (first < 1) throw badRequest('invalid_first', 'first must be at least 1');
    if (first > second) throw badRequest('invalid_range', 'first must not exceed second');
    if (second > cp.size) throw badRequest('invalid_second', `second exceeds the current tree size ${cp.size}`);
    const found = await svc.reader.consistency(first, second, cp);
    // The signed root stands for the checkpoint's own size (the tiles' agree with it).
    const secondRoot = second === cp.size ? cp.root : found.secondRoot;
    ctx.set('Content-Type', JSON_TYPE);
    ctx.body = consistencyJson(first, second, found.firstRoot, secondRoot, found.proof);
  });

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
