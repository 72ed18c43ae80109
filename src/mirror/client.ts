// The log side of tlog-mirror: brings one mirror up to a checkpoint. add-checkpoint (with a
// consistency proof from the pending size the mirror last told us), then add-entries in
// requests of at most 32 packages, gzip-compressed, resuming from the next entry and ticket
// of each 202 or 409, until the mirror answers 200 with its cosignature, which must verify.
// Bounded: an answer counts as progress only if the mirror's next entry moved; a few answers
// without it (each after a jittered, doubling pause) end the push. A mirror that holds more of
// the log than the checkpoint pushed (a larger pending size, a checkpoint of the log's with
// another root) is a rollback of the log (WitnessRollbackError, as a witness's), never retried.
import { gzipSync } from 'node:zlib';
import { type NoteVerifier, parseNote, verifySignature } from '../core/note.js';
import { proveConsistency, treeHash } from '../core/merkle.js';
import type { ObjectReader } from '../store/store.js';
import { TILE_WIDTH, TileHashReader, type HashTile } from '../core/tiles.js';
import { readBundle, storeTileFetcher } from '../read/tilestore.js';
import { openCheckpoint } from '../core/checkpoint.js';
import { bytesEqual } from '../core/hash.js';
import { MalformedSizeError, WitnessRollbackError, postAddCheckpoint } from '../witness/collector.js';
import { originHash } from '../witness/protocol.js';
import { backoffMs, pause } from './backoff.js';
import {
  CLIENT_PACKAGES_PER_REQUEST,
  MIRROR_INFO_CONTENT_TYPE,
  type MirrorInfo,
  canonicalPackages,
  encodeHeader,
  encodePackage,
  parseMirrorInfo,
} from './protocol.js';
import { proveSubtree } from '../core/subtree.js';

export interface MirrorEndpoint {
  /** Cosignature verifier (type 0x04); its name is the mirror's name. */
  readonly verifier: NoteVerifier;
  /** Submission prefix: POST <url>/add-checkpoint, <url>/add-entries. */
  readonly url: string;
}

/** What an upload needs of the log at one size: its entries and proofs. */
export interface LogData {
  readonly size: number;
  entries(start: number, end: number): Promise<Uint8Array[]>;
  subtreeProof(start: number, end: number): Promise<Uint8Array[]>;
  consistencyProof(oldSize: number): Promise<Uint8Array[]>;
  /** The root of the log's tree at `n` ≤ size. */
  rootAt(n: number): Promise<Uint8Array>;
}

/** LogData read from a log's tlog-tiles objects (its store, a directory, a URL). */
export function logDataFromObjects(objects: ObjectReader, size: number): LogData {
  const tiles = new Map<string, Promise<HashTile>>();
  const fetchTile = storeTileFetcher(objects);
  const reader = new TileHashReader(size, (level, index, width) => {
    const key = `${level}/${index}/${width}`;
    let t = tiles.get(key);
    if (!t) tiles.set(key, (t = Promise.resolve(fetchTile(level, index, width))));
    return t;
  });
  return {
    size,
    async entries(start, end) {
      const index = Math.floor(start / TILE_WIDTH);
      const from = index * TILE_WIDTH;
      const items = await readBundle(objects, 'entries', index, end - from);
      return items.slice(start - from, end - from);
    },
    subtreeProof: (start, end) => proveSubtree(start, end, size, reader),
    consistencyProof: (old) => proveConsistency(old, size, reader),
    rootAt: (n) => treeHash(n, reader),
  };
}

export class MirrorPushError extends Error {
  override name = 'MirrorPushError';
}

export interface MirrorClientOptions {
  readonly packagesPerRequest?: number;
  /** gzip the add-entries bodies (default true). */
  readonly gzip?: boolean;
  /** The log's key: with it, the mirror's served copy is checked for a fork (checkCopy). */
  readonly logKey?: NoteVerifier;
}

/** Answers without progress before a push gives up. */
const MAX_STALLS = 3;
/** The pause after the first answer without progress; it doubles up to the cap. */
const RETRY_BASE_MS = 200;
const RETRY_CAP_MS = 2_000;

export class MirrorClient {
  /** The pending size the mirror last reported or accepted; 0 asks it. */
  private pendingSize = 0;
  /** Where the next upload starts: the mirror's next entry as last reported. */
  private next = 0;
  private ticket: Uint8Array = new Uint8Array(0);
  /** Bytes sent in add-entries bodies (after compression), for benches. */
  bytesSent = 0;

  constructor(
    readonly endpoint: MirrorEndpoint,
    private readonly options: MirrorClientOptions = {},
  ) {}

  get name(): string {
    return this.endpoint.verifier.name;
  }

  private url(path: string): string {
    return `${this.endpoint.url.replace(/\/$/, '')}/${path}`;
  }

  private rollback(size: number, logSize: number, forked = false): WitnessRollbackError {
    return new WitnessRollbackError(this.name, size, logSize, 'mirror', forked);
  }

  /**
   * Uploads the log up to `note` (of `log.size`) and returns the mirror's cosignature line.
   * Throws WitnessRollbackError if the mirror holds more of the log (see the file's head).
   */
  async push(note: string, log: LogData, signal?: AbortSignal): Promise<string> {
    await this.addCheckpoint(note, log, signal);
    return this.upload(note, log, signal);
  }

  /**
   * Throws WitnessRollbackError if the copy the mirror serves (monitoring prefix = its URL,
   * as Stele mirrors have it) holds a checkpoint of this log, under the log's key (option logKey),
   * beyond `log` or with another root at its size. A copy that cannot be read or opened says nothing.
   */
  async checkCopy(log: LogData, signal?: AbortSignal): Promise<void> {
    const logKey = this.options.logKey;
    if (!logKey) return;
    let served;
    try {
      const res = await fetch(this.url(`${originHash(logKey.name)}/checkpoint`), signal ? { signal } : {});
      if (res.status !== 200) return;
      served = openCheckpoint(await res.text(), logKey);
    } catch {
      return;
    }
    if (served.size > log.size) throw this.rollback(served.size, log.size);
    if (!bytesEqual(served.root, await log.rootAt(served.size))) throw this.rollback(served.size, log.size, true);
  }

  private async addCheckpoint(note: string, log: LogData, signal?: AbortSignal): Promise<void> {
    for (let attempt = 0; attempt < MAX_STALLS; attempt++) {
      if (attempt > 0) await pause(backoffMs(attempt, RETRY_BASE_MS, RETRY_CAP_MS), signal);
      const old = Math.min(this.pendingSize, log.size);
      const proof = old === 0 || old === log.size ? [] : await log.consistencyProof(old);
      const answer = await postAddCheckpoint(this.endpoint.url, old, proof, note, signal).catch((e: unknown) => {
        throw e instanceof MalformedSizeError ? new MirrorPushError(`mirror ${e.message}`) : e;
      });
      if (answer.status === 200) {
        this.pendingSize = log.size;
        return;
      }
      // A larger pending size is a checkpoint the log signed and no longer has.
      if (answer.size !== undefined && answer.size > log.size) throw this.rollback(answer.size, log.size);
      if (answer.size !== undefined && answer.size !== old) {
        this.pendingSize = answer.size;
        continue;
      }
      // Refused at the size it holds (another root there, no consistency from it): its copy
      // may show that the log forked; else the refusal is reported as it came.
      if (answer.status === 409 || answer.status === 422) await this.checkCopy(log, signal);
      throw new MirrorPushError(`mirror add-checkpoint answered ${answer.status}: ${answer.text.trim().slice(0, 200)}`);
    }
    throw new MirrorPushError('mirror kept reporting a stale pending size');
  }

  /** The add-entries body for [start, end): header and up to `max` packages. */
  async body(
    origin: string,
    start: number,
    log: LogData,
    max = this.options.packagesPerRequest ?? CLIENT_PACKAGES_PER_REQUEST,
  ): Promise<Buffer> {
    const parts = [encodeHeader({ origin, start, end: log.size, ticket: this.ticket })];
    for (const p of canonicalPackages(start, log.size).slice(0, max)) {
      const [entries, proof] = await Promise.all([
        log.entries(p.start, p.end),
        log.subtreeProof(p.subtreeStart, p.end),
      ]);
      parts.push(encodePackage(entries, proof));
    }
    return Buffer.concat(parts);
  }

  private async upload(note: string, log: LogData, signal?: AbortSignal): Promise<string> {
    const body = parseNote(note).body;
    const origin = body.slice(0, body.indexOf('\n'));
    let stalls = 0;
    for (;;) {
      const start = Math.min(this.next, log.size);
      const raw = await this.body(origin, start, log);
      const gzip = this.options.gzip ?? true;
      const payload = new Uint8Array(gzip ? gzipSync(raw, { level: 1 }) : raw);
      this.bytesSent += payload.length;
      const res = await fetch(this.url('add-entries'), {
        method: 'POST',
        body: payload,
        headers: { 'Content-Type': 'application/octet-stream', ...(gzip ? { 'Content-Encoding': 'gzip' } : {}) },
        ...(signal ? { signal } : {}),
      });
      const text = await res.text();
      if (res.status === 200) {
        const sig = parseNote(`${body}\n${text}`).signatures.find(
          (s) => verifySignature(body, s, this.endpoint.verifier) !== null,
        );
        if (!sig) throw new MirrorPushError('mirror returned no valid cosignature');
        this.next = log.size;
        return sig.line;
      }
      if (
        (res.status === 202 || res.status === 409) &&
        res.headers.get('content-type')?.startsWith(MIRROR_INFO_CONTENT_TYPE)
      ) {
        let info: MirrorInfo;
        try {
          info = parseMirrorInfo(text);
        } catch (e) {
          throw new MirrorPushError(`mirror sent malformed mirror-info: ${(e as Error).message}`);
        }
        // Pending beyond this checkpoint: the log signed more than it has (never retried).
        if (info.size > log.size) throw this.rollback(info.size, log.size);
        // Progress is the mirror's next entry moving, nothing else.
        const moved = info.next !== this.next;
        this.next = info.next;
        this.ticket = info.ticket;
        if (res.status === 409 && info.size !== log.size && !moved)
          throw new MirrorPushError(`mirror refused upload_end ${log.size} (its pending size is ${info.size})`);
        stalls = moved ? 0 : stalls + 1;
        if (stalls >= MAX_STALLS)
          throw new MirrorPushError(`mirror answered ${res.status} without progress at entry ${start}`);
        if (stalls > 0) await pause(backoffMs(stalls, RETRY_BASE_MS, RETRY_CAP_MS), signal);
        continue;
      }
      throw new MirrorPushError(`mirror add-entries answered ${res.status}: ${text.trim().slice(0, 200)}`);
    }
  }
}
