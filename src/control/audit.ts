// The audit stream: one signed event per decision (policy evaluation, lease, operation
// denied), key rotation and authentication failure, each carrying the ledger entry id that
// anchors its record. Events are numbered 1, 2, 3, … with no gaps; the number is the SSE
// event id, so a client resumes with Last-Event-ID and receives every later event once.
//
// Event:  {v, id, type, time, record, digest, ledger_entry_id, key_id, signature}
//   record    the decision / epoch / failure record whose digest the ledger entry holds
//   digest    hex SHA-256 of the RFC 8785 JSON of `record` (= the ledger entry's digest)
//   signature ed25519 over "stele/control/audit-event/v1\n" ‖ RFC 8785 JSON without `signature`
//
// Storage: append-only JSON-lines segments audit/seg-<first id>.jsonl of SEGMENT_EVENTS
// events each, signed and written in groups (the events appended in one turn of the event
// loop: one write, and one fdatasync when enabled, per group); an event is acknowledged, and
// streamed, only once written. A torn last line left by a
// crash is cut off at the next start. Recent events are also kept in memory for live
// streaming and short resumes; older ones are read back from the segments.
import { createReadStream } from 'node:fs';
import { type FileHandle, mkdir, open, readFile, readdir, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { AUDIT_DOMAIN, type ControlSigner, canonicalJson } from './signing.js';

export const SEGMENT_EVENTS = 100_000;
const RING_EVENTS = 16_384;

export interface AuditEvent {
  readonly v: 1;
  readonly id: number;
  readonly type: string;
  readonly time: string;
  readonly record: Record<string, unknown>;
  readonly digest: string;
  readonly ledger_entry_id: string;
  readonly key_id: string;
  readonly signature: string;
}

/** An event with its serialised JSON (no newline), as stored and streamed. */
export interface StoredEvent {
  readonly id: number;
  readonly type: string;
  /** Event time in ms since the epoch. */
  readonly ms: number;
  readonly json: string;
}

export interface AuditFilter {
  readonly types?: ReadonlySet<string>;
  /** Inclusive lower bound on event time, ms. */
  readonly since?: number;
  /** Exclusive upper bound on event time, ms. */
  readonly until?: number;
}

export function matches(e: StoredEvent, f: AuditFilter): boolean {
  return (
    (!f.types || f.types.has(e.type)) &&
    (f.since === undefined || e.ms >= f.since) &&
    (f.until === undefined || e.ms < f.until)
  );
}

/** An event accepted by append(), signed when its group is flushed. */
interface Pending {
  readonly id: number;
  readonly type: string;
  readonly ms: number;
  readonly record: Record<string, unknown>;
  /** RFC 8785 JSON of `record`. */
  readonly recordJson: string;
  readonly digest: string;
  readonly ledgerEntryId: string;
  resolve(e: AuditEvent): void;
  reject(e: Error): void;
}

/** An event as stored and streamed, and as answered to the caller that appended it. */
interface Sealed {
  readonly stored: StoredEvent;
  readonly full: AuditEvent;
}

const segName = (first: number) => `seg-${String(first).padStart(12, '0')}.jsonl`;

function toStored(json: string): StoredEvent {
  const e = JSON.parse(json) as AuditEvent;
  if (!Number.isSafeInteger(e.id) || typeof e.type !== 'string' || typeof e.time !== 'string')
    throw new Error('malformed audit event');
  return { id: e.id, type: e.type, ms: Date.parse(e.time), json };
}

export class AuditLog {
  private assigned = 0;
  private written = 0;
  private ring: StoredEvent[] = [];
  private pending: Pending[] = [];
  private flushing: Promise<void> | undefined;
  private fh: FileHandle | undefined;
  private fhFirst = 0;
  private failed: Error | undefined;
  private closed = false;
  private readonly listeners = new Set<(e: StoredEvent) => void>();

  private readonly segmentEvents: number;
  private readonly ringEvents: number;

  private constructor(
    readonly dir: string,
    private readonly signer: ControlSigner,
    private readonly fsync: boolean,
    private readonly logger: Logger,
    sizes: { segmentEvents?: number; ringEvents?: number },
  ) {
    this.segmentEvents = sizes.segmentEvents ?? SEGMENT_EVENTS;
    this.ringEvents = sizes.ringEvents ?? RING_EVENTS;
  }

  private segFirst(id: number): number {
    return Math.floor((id - 1) / this.segmentEvents) * this.segmentEvents + 1;
  }

  /** Opens (creating) the log in `dir`; segment and memory-ring sizes are adjustable for tests. */
  static async open(
    dir: string,
    signer: ControlSigner,
    o: { fsync: boolean; logger: Logger; segmentEvents?: number; ringEvents?: number },
  ): Promise<AuditLog> {
    const log = new AuditLog(dir, signer, o.fsync, o.logger, o);
    await mkdir(dir, { recursive: true });
    const segs = await log.segments();
    const last = segs.at(-1);
    if (last !== undefined) {
      const path = join(dir, segName(last));
      const text = await readFile(path, 'utf8');
      const end = text.lastIndexOf('\n') + 1;
      if (end < text.length) {
        o.logger.warn({ path, bytes: text.length - end }, 'cutting a torn audit event off the last segment');
        await truncate(path, Buffer.byteLength(text.slice(0, end)));
      }
      const lines = text.slice(0, end).split('\n').filter(Boolean);
      let expect = last;
      for (const line of lines) {
        const ev = toStored(line);
        if (ev.id !== expect)
          throw new Error(`audit segment ${path} is out of sequence at event ${ev.id} (expected ${expect})`);
        expect++;
        log.remember(ev);
      }
      log.written = log.assigned = expect - 1;
    }
    return log;
  }

  /** Id of the last written event (0 when none). */
  get lastId(): number {
    return this.written;
  }

  private async segments(): Promise<number[]> {
    return (await readdir(this.dir))
      .map((n) => /^seg-(\d{12})\.jsonl$/.exec(n))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  }

  private remember(ev: StoredEvent): void {
    this.ring.push(ev);
    if (this.ring.length > this.ringEvents * 2) this.ring = this.ring.slice(-this.ringEvents);
  }

  /**
   * Appends an event; resolves once it is signed and written (and synced when enabled).
   * `recordJson` is the RFC 8785 JSON of `record` when the caller has it (it hashed it for
   * `digest`): the event's canonical form is then composed around it, not recomputed.
   */
  append(
    type: string,
    record: Record<string, unknown>,
    digest: string,
    ledgerEntryId: string,
    recordJson = canonicalJson(record),
  ): Promise<AuditEvent> {
    if (this.failed) return Promise.reject(this.failed);
    if (this.closed) return Promise.reject(new Error('the audit log is closed'));
    // The id and time are fixed now (ids in call order); the signature when the group is flushed.
    const id = ++this.assigned;
    return new Promise<AuditEvent>((resolve, reject) => {
      this.pending.push({ id, type, ms: Date.now(), record, recordJson, digest, ledgerEntryId, resolve, reject });
      // The flush starts on the next turn of the event loop, not now: events appended together
      // (a ledger batch's, from its commit callbacks) share one write and one sync, and their
      // signing runs after the caller's own I/O (the batch's tiles) is under way.
      if (!this.flushing) this.flushing = new Promise<void>((r) => setImmediate(r)).then(() => this.flushLoop());
    });
  }

  /** Signs a group of events in one call to the signing thread; each event's canonical form is composed around its record's canonical JSON. */
  private async seal(batch: readonly Pending[]): Promise<Sealed[]> {
    const keyId = this.signer.keyId;
    const str = JSON.stringify;
    const times = batch.map((p) => new Date(p.ms).toISOString());
    // RFC 8785: members sorted by key (digest < id < key_id < ledger_entry_id < record < time
    // < type < v); strings and integers serialise exactly as JSON.stringify does.
    const canonicals = batch.map(
      (p, i) =>
        `{"digest":${str(p.digest)},"id":${p.id},"key_id":${str(keyId)},"ledger_entry_id":${str(p.ledgerEntryId)},"record":${p.recordJson},"time":${str(times[i])},"type":${str(p.type)},"v":1}`,
    );
    const signatures = await this.signer.signCanonicals(AUDIT_DOMAIN, canonicals);
    return batch.map(({ id, type, ms, record, recordJson, digest, ledgerEntryId }, i) => {
      const time = times[i]!;
      const signature = signatures[i]!;
      const json = `{"v":1,"id":${id},"type":${str(type)},"time":${str(time)},"record":${recordJson},"digest":${str(digest)},"ledger_entry_id":${str(ledgerEntryId)},"key_id":${str(keyId)},"signature":${str(signature)}}`;
      return {
        stored: { id, type, ms, json },
        full: { v: 1, id, type, time, record, digest, ledger_entry_id: ledgerEntryId, key_id: keyId, signature },
      };
    });
  }

  private async flushLoop(): Promise<void> {
    try {
      while (this.pending.length > 0 && !this.failed) {
        const batch = this.pending;
        this.pending = [];
        let sealed: Sealed[];
        try {
          sealed = await this.seal(batch);
          await this.write(sealed.map((e) => e.stored));
        } catch (e) {
          this.failed = new Error(`the audit log could not be written: ${(e as Error).message}`);
          this.logger.error({ err: (e as Error).message }, 'audit log write failed; refusing further events');
          for (const p of [...batch, ...this.pending]) p.reject(this.failed);
          this.pending = [];
          return;
        }
        batch.forEach((p, i) => {
          const { stored, full } = sealed[i]!;
          this.written = stored.id;
          this.remember(stored);
          for (const l of this.listeners) l(stored);
          p.resolve(full);
        });
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private async write(events: StoredEvent[]): Promise<void> {
    let i = 0;
    while (i < events.length) {
      const first = this.segFirst(events[i]!.id);
      let j = i;
      while (j < events.length && this.segFirst(events[j]!.id) === first) j++;
      if (!this.fh || this.fhFirst !== first) {
        await this.fh?.close();
        this.fh = await open(join(this.dir, segName(first)), 'a', 0o600);
        this.fhFirst = first;
      }
      await this.fh.write(
        events
          .slice(i, j)
          .map((e) => `${e.json}\n`)
          .join(''),
      );
      if (this.fsync) await this.fh.datasync();
      i = j;
    }
  }

  /** Calls `fn` for every event written from now on, in id order; returns the unsubscribe function. */
  subscribe(fn: (e: StoredEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Written events with id > `after`, in id order, up to the last one written when the end is reached. */
  async *since(after: number): AsyncGenerator<StoredEvent> {
    let next = after + 1;
    for (;;) {
      const snapshot = this.ring;
      const upto = this.written;
      const ringStart = snapshot[0]?.id ?? upto + 1;
      if (next >= ringStart) {
        for (const ev of snapshot) {
          if (ev.id >= next && ev.id <= upto) {
            yield ev;
            next = ev.id + 1;
          }
        }
        return;
      }
      // Older than the memory ring: read them back from the segments.
      const from = next;
      for (const first of await this.segments()) {
        if (first + this.segmentEvents <= next || first >= ringStart) continue;
        const rl = createInterface({
          input: createReadStream(join(this.dir, segName(first)), 'utf8'),
          crlfDelay: Infinity,
        });
        try {
          for await (const line of rl) {
            if (!line) continue;
            const ev = toStored(line);
            if (ev.id >= ringStart) break;
            if (ev.id === next) {
              yield ev;
              next++;
            }
          }
        } finally {
          rl.close();
        }
      }
      if (next === from) throw new Error(`audit event ${next} is missing from the segments`);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flushing;
    await this.fh?.close();
    this.fh = undefined;
    this.listeners.clear();
  }
}
