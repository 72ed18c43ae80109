// The log side of tlog-mirror: brings one mirror up to a checkpoint. add-checkpoint (with a
// consistency proof from the pending size the mirror last told us), then add-entries in
// requests of at most 32 packages, gzip-compressed, resuming from the next entry and ticket
// of each 202 or 409, until the mirror answers 200 with its cosignature, which must verify.
import { gzipSync } from 'node:zlib';
import { type NoteVerifier, parseNote, verifySignature } from '../core/note.js';
import { proveConsistency } from '../core/merkle.js';
import type { ObjectReader } from '../store/store.js';
import { TILE_WIDTH, TileHashReader, type HashTile } from '../core/tiles.js';
import { readBundle, storeTileFetcher } from '../tilestore.js';
import { SIZE_CONTENT_TYPE, formatAddCheckpoint } from '../witness/protocol.js';
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
  };
}

export class MirrorPushError extends Error {
  override name = 'MirrorPushError';
}

export interface MirrorClientOptions {
  readonly packagesPerRequest?: number;
  /** gzip the add-entries bodies (default true). */
  readonly gzip?: boolean;
}

/** Requests that made no progress before the push gives up. */
const MAX_STALLS = 3;

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

  /** Uploads the log up to `checkpoint` (of `log.size`) and returns the mirror's cosignature line. */
  async push(note: string, log: LogData, signal?: AbortSignal): Promise<string> {
    await this.addCheckpoint(note, log, signal);
    return this.upload(note, log, signal);
  }

  private async addCheckpoint(note: string, log: LogData, signal?: AbortSignal): Promise<void> {
    for (let attempt = 0; attempt < MAX_STALLS; attempt++) {
      const old = Math.min(this.pendingSize, log.size);
      const proof = old === 0 || old === log.size ? [] : await log.consistencyProof(old);
      const res = await fetch(this.url('add-checkpoint'), {
        method: 'POST',
        body: formatAddCheckpoint({ oldSize: old, proof, checkpoint: note }),
        ...(signal ? { signal } : {}),
      });
      const text = await res.text();
      if (res.status === 200) {
        this.pendingSize = log.size;
        return;
      }
      if (res.status === 409 && res.headers.get('content-type')?.startsWith(SIZE_CONTENT_TYPE)) {
        const held = Number(text.trim());
        if (!Number.isSafeInteger(held))
          throw new MirrorPushError(`mirror sent a malformed size ${JSON.stringify(text.slice(0, 40))}`);
        // A mirror already pending beyond this checkpoint may still take entries up to it
        // (a past pending size); add-entries says so with a 409 if not.
        if (held >= log.size) return;
        this.pendingSize = held;
        continue;
      }
      throw new MirrorPushError(`mirror add-checkpoint answered ${res.status}: ${text.trim().slice(0, 200)}`);
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
        const progressed = info.next > start || (res.status === 409 && info.next !== start);
        this.next = info.next;
        this.ticket = info.ticket;
        if (res.status === 409 && info.size !== log.size && info.next <= start) {
          throw new MirrorPushError(`mirror refused upload_end ${log.size} (its pending size is ${info.size})`);
        }
        stalls = progressed ? 0 : stalls + 1;
        if (stalls >= MAX_STALLS)
          throw new MirrorPushError(`mirror answered ${res.status} without progress at entry ${start}`);
        continue;
      }
      throw new MirrorPushError(`mirror add-entries answered ${res.status}: ${text.trim().slice(0, 200)}`);
    }
  }
}
