// The two reads every verifier makes, GET /api/ledger/entry (an entry with its inclusion
// proof) and GET /api/ledger/consistency: their answers as functions of the query (which the
// server's node:http fast path calls, src/api/fast-reads.ts), the same as Koa handlers, which
// @koa/router mounts with the other /api/ledger routes (for every variant the fast path
// leaves to Koa, and for an app used without it).
import type { Context, Middleware } from 'koa';
import { ARTIFACT_ID, ZERO_HASH, parseEntryId } from '../core/entry.js';
import { isHash64 } from '../core/hash.js';
import { TLOG_PROOF_MEDIA_TYPE, steleTlogProof } from '../core/tlog-proof.js';
import { type EntryWithProof, type Maybe, andThen } from '../read/reader.js';
import type { PublishedCheckpoint } from '../sequencer/contract.js';
import { AnswerCache, FOREVER, ownedBody } from './answer-cache.js';
import { badRequest, notFound } from '../http/errors.js';
import { indexCovers } from './index-coverage.js';
import { recordFieldIs } from './record-fields.js';
import { JSON_TYPE, type Query, noStore, queryOf, single, treeSizeParam } from './route-helpers.js';
import type { LedgerService } from './ledger.js';
import { CheckpointViews, consistencyJson, entryProofJson } from './views.js';

/** Spec §4.1's three lookup keys, plus `leaf` (a bare leaf index, for tlog tooling). */
const LOOKUP_KEYS: readonly string[] = ['id', 'artifact', 'hash', 'leaf'];
type LookupKey = 'id' | 'artifact' | 'hash' | 'leaf';
/** Answers kept per route (an entry's is ~2.5 KiB, a consistency proof's ~1.5 KiB). */
const CACHED_ANSWERS = 4096;

/**
 * Whether /entry should answer a C2SP tlog-proof file: `format=tlog-proof`, or an Accept
 * header naming text/x.tlog-proof (`format=json` keeps the JSON view whatever Accept says).
 */
function wantsTlogProof(accept: string, format: string | undefined): boolean {
  if (format !== undefined) {
    if (format === 'tlog-proof') return true;
    if (format === 'json') return false;
    throw badRequest('invalid_format', 'format must be json or tlog-proof');
  }
  if (accept === '') return false;
  return accept.split(',').some((t) => t.split(';')[0]!.trim().toLowerCase() === TLOG_PROOF_MEDIA_TYPE);
}

/**
 * Whether an entry the index names is the one looked up (only these two keys go through the
 * index: id and leaf name the leaf itself): read from the record's bytes when they are
 * plain canonical JSON, else from the record parsed.
 */
function carries(found: EntryWithProof, key: 'artifact' | 'hash', value: string): boolean {
  const [field, expected] = key === 'hash' ? ['digest', value.toLowerCase()] : ['artifactId', value];
  return recordFieldIs(found.canonical, field, expected) ?? found.entry[field] === expected;
}

const HEX_DIGITS = '0123456789abcdef';

/** Whether `bytes` in lowercase hex start with `prefix` (an entry id's), without encoding them all. */
function hexStartsWith(bytes: Uint8Array, prefix: string): boolean {
  if (prefix.length > 2 * bytes.length) return false;
  for (let i = 0; i < prefix.length; i++) {
    const b = bytes[i >> 1]!;
    if (prefix[i] !== HEX_DIGITS[i % 2 === 0 ? b >> 4 : b & 15]) return false;
  }
  return true;
}

/** The one lookup key of an /entry query; throws the refusal for unknown or missing keys. */
function lookupKeyOf(query: Query): LookupKey {
  let key: string | undefined;
  let count = 0;
  let extra: string | undefined;
  for (const k of Object.keys(query)) {
    if (LOOKUP_KEYS.includes(k)) {
      key = k;
      count++;
    } else if (k !== 'format') extra ??= k;
  }
  if (extra !== undefined) throw badRequest('unknown_parameter', `unknown query parameter ${JSON.stringify(extra)}`);
  if (count !== 1) throw badRequest('lookup_key', 'give exactly one of id, artifact, hash or leaf');
  return key as LookupKey;
}

/** A read route's answer (status 200): its media type and body. */
export interface ReadAnswer {
  readonly type: string;
  readonly body: Buffer | string;
}

export interface LedgerReads {
  /**
   * GET /entry's answer to a query (and the request's Accept header); throws its refusal.
   * Synchronous (no promise) when the answer needs nothing that is not in memory.
   */
  readonly entryAnswer: (query: Query, accept: string) => Maybe<ReadAnswer>;
  /** GET /consistency's answer to a query; throws its refusal. Synchronous as entryAnswer. */
  readonly consistencyAnswer: (query: Query) => Maybe<ReadAnswer>;
  /** The two as Koa handlers (the router's mount). */
  readonly entry: Middleware;
  readonly consistency: Middleware;
  /** The checkpoint views the routes answer with (each JSON serialised once per checkpoint). */
  readonly checkpoints: CheckpointViews;
}

const readsOf = new WeakMap<LedgerService, LedgerReads>();

/** The read handlers of `svc`: one set per service, so the router and the fast path share their checkpoint views. */
export function ledgerReads(svc: LedgerService): LedgerReads {
  let reads = readsOf.get(svc);
  if (!reads) {
    reads = makeReads(svc);
    readsOf.set(svc, reads);
  }
  return reads;
}

function makeReads(svc: LedgerService): LedgerReads {
  const answers = new ReadAnswers(svc);
  return {
    entryAnswer: (query, accept) => answers.entryAnswer(query, accept),
    consistencyAnswer: (query) => answers.consistencyAnswer(query),
    entry: koaRead((ctx) => answers.entryAnswer(queryOf(ctx), ctx.get('Accept'))),
    consistency: koaRead((ctx) => answers.consistencyAnswer(queryOf(ctx))),
    checkpoints: answers.checkpoints,
  };
}

/** The read routes' answers over one service, with the answers kept for reuse. */
class ReadAnswers {
  readonly checkpoints: CheckpointViews;
  private readonly entryAnswers = new AnswerCache<number, { found: EntryWithProof; body: Buffer }>(
    CACHED_ANSWERS,
    ({ found, body }) => ({ found: found.detached(), body: ownedBody(body) }),
  );
  // A log only grows: the proof between two of its sizes is the same whatever the checkpoint.
  private readonly consistencyAnswers = new AnswerCache<string, { body: Buffer }>(CACHED_ANSWERS);

  constructor(private readonly svc: LedgerService) {
    const witnessKeys = new Map(svc.witnesses.map((w) => [w.name, w.publicKey]));
    this.checkpoints = new CheckpointViews(svc.publicKey, witnessKeys, () => svc.lifetimeEntries());
  }

  /**
   * The answer for leaf `seq` of `cp` (`confirmed`: the entry if the lookup read it already):
   * synchronous when its answer is kept or its tiles are cached. An id's hash prefix must match.
   */
  private entryAt(
    seq: number,
    cp: PublishedCheckpoint,
    idPrefix: string | undefined,
    asProof: boolean,
    confirmed?: EntryWithProof,
  ): Maybe<ReadAnswer> {
    // An entry's answer holds the checkpoint's JSON, so that JSON is its generation.
    const generation = this.checkpoints.json(cp);
    const cached = this.entryAnswers.get(seq, generation);
    return andThen(cached?.found ?? confirmed ?? this.svc.reader.entryWithProofNow(seq, cp), (found) => {
      if (idPrefix !== undefined && !hexStartsWith(found.entryHash, idPrefix)) {
        throw notFound('entry_not_found', `entry ${seq} exists but its hash does not start with ${idPrefix}`);
      }
      if (asProof) return this.tlogProofAnswer(seq, found, cp);
      const body =
        cached?.body ??
        this.entryAnswers.answer(seq, generation, {
          found,
          body: entryProofJson(
            seq,
            found.canonical,
            found.entryHash,
            found.auditPathBytes,
            this.checkpoints.view(cp),
            generation,
            found.leafHash,
          ),
        }).body;
      return { type: JSON_TYPE, body };
    });
  }

  /** A C2SP tlog-proof file of the entry: its extra needs entry_hash(seq − 1), authenticated against the same checkpoint (§1.1). */
  private async tlogProofAnswer(seq: number, found: EntryWithProof, cp: PublishedCheckpoint): Promise<ReadAnswer> {
    const prior = seq === 0 ? ZERO_HASH : (await this.svc.reader.entry(seq - 1, cp)).entryHash;
    return { type: TLOG_PROOF_TYPE, body: steleTlogProof(seq, found.canonical, prior, found.auditPath, cp.note) };
  }

  /**
   * An entry found through the index by digest or artifact. The index names candidates; the
   * entry a candidate names must really carry the digest or artifact asked for (a short key
   * can be shared, and the index may be stale: restored, or ahead of a rolled-back log). The
   * entry read to check it is the answer's. Synchronous when the index and the candidates'
   * tiles are (the embedded index on a warm replica).
   */
  private lookedUp(
    key: 'artifact' | 'hash',
    value: string,
    cp: PublishedCheckpoint,
    asProof: boolean,
  ): Maybe<ReadAnswer> {
    let confirmed: EntryWithProof | undefined;
    const confirm = (candidate: number): Maybe<boolean> => {
      if (candidate >= cp.size) return false;
      return andThen(this.svc.reader.entryWithProofNow(candidate, cp), (found) => {
        if (!carries(found, key, value)) return false;
        confirmed = found;
        return true;
      });
    };
    const seq =
      key === 'artifact'
        ? this.svc.index.findByArtifact(value, confirm)
        : this.svc.index.findByDigest(value.toLowerCase(), confirm);
    return andThen(seq, (s) =>
      s === undefined || s >= cp.size
        ? this.notFound(key, value, cp)
        : this.entryAt(s, cp, undefined, asProof, confirmed),
    );
  }

  /** No entry carries what was looked up: an answer only from an index that covers the tree (not one rebuilding). */
  private async notFound(key: LookupKey, value: string, cp: PublishedCheckpoint): Promise<never> {
    await indexCovers(this.svc.index, cp);
    throw notFound('entry_not_found', `no published entry for ${key}=${value}`);
  }

  entryAnswer(query: Query, accept: string): Maybe<ReadAnswer> {
    const asProof = wantsTlogProof(accept, single(query, 'format'));
    const key = lookupKeyOf(query);
    const cp = this.svc.checkpoint();
    const value = single(query, key)!;
    if (key === 'artifact') {
      if (!ARTIFACT_ID.test(value)) throw badRequest('invalid_artifact', 'artifact must look like art_<24 hex>');
      return this.lookedUp(key, value, cp, asProof);
    }
    if (key === 'hash') {
      if (!isHash64(value)) throw badRequest('invalid_hash', 'hash must be 64 hexadecimal characters');
      return this.lookedUp(key, value, cp, asProof);
    }
    let seq: number;
    let idPrefix: string | undefined;
    if (key === 'id') {
      const id = parseEntryId(value);
      if (!id) throw badRequest('invalid_id', 'id must look like led_<leaf index>_<12 hex>');
      seq = id.seq;
      idPrefix = id.hashPrefix;
    } else seq = treeSizeParam(query, 'leaf');
    if (seq >= cp.size) throw notFound('entry_not_found', `no published entry for ${key}=${value}`);
    return this.entryAt(seq, cp, idPrefix, asProof);
  }

  consistencyAnswer(query: Query): Maybe<ReadAnswer> {
    for (const k of Object.keys(query))
      if (k !== 'first' && k !== 'second')
        throw badRequest('unknown_parameter', `unknown query parameter ${JSON.stringify(k)}`);
    const first = treeSizeParam(query, 'first');
    const second = treeSizeParam(query, 'second');
    const cp = this.svc.checkpoint();
    if (first < 1) throw badRequest('invalid_first', 'first must be at least 1');
    if (first > second) throw badRequest('invalid_range', 'first must not exceed second');
    if (second > cp.size) throw badRequest('invalid_second', `second exceeds the current tree size ${cp.size}`);
    const key = `${first}/${second}`;
    const cached = this.consistencyAnswers.get(key, FOREVER);
    if (cached) return { type: JSON_TYPE, body: cached.body };
    return andThen(this.svc.reader.consistencyNow(first, second, cp), (found) => {
      // The signed root stands for the checkpoint's own size (the tiles' agree with it).
      const secondRoot = second === cp.size ? cp.root : found.secondRoot;
      const body = this.consistencyAnswers.answer(key, FOREVER, {
        body: consistencyJson(first, second, found.firstRoot, secondRoot, found.proof),
      }).body;
      return { type: JSON_TYPE, body };
    });
  }
}

const TLOG_PROOF_TYPE = `${TLOG_PROOF_MEDIA_TYPE}; charset=utf-8`;

/** A read route as a Koa handler: never stored by a cache, its answer's type and body. */
function koaRead(answer: (ctx: Context) => Maybe<ReadAnswer>): Middleware {
  return async (ctx) => {
    noStore(ctx);
    const a = await answer(ctx);
    ctx.set('Content-Type', a.type);
    ctx.body = a.body;
  };
}
