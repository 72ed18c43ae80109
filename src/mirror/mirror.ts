// A C2SP tlog-mirror for the logs it is configured for (origin + vkey; Stele or not).
// Per log it keeps (state.ts key logs/<hex origin>.json, swapped with compare-and-swap):
// the recent pending checkpoints (add-checkpoint, checked exactly as a witness checks), the
// next entry (the first not yet stored), and the mirror checkpoint with its cosignature.
// add-entries authenticates each package against a pending checkpoint by its subtree
// consistency proof before its bundle and tiles are written, and cosigns (tlog-cosignature,
// the mirror's own key) only once every entry up to the checkpoint is stored.
// Besides the log's signature, a checkpoint keeps every cosignature it was given that verifies
// under a key the log advertises (MirroredLog.cosigners: its witnesses and other mirrors),
// merged as the same checkpoint comes again, so the copy verifies under the log's own policy.
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';
import { type ExtendedCheckpointBody, parseExtendedCheckpointBody } from '../core/checkpoint.js';
import { bytesEqual, concatBytes, leafHash, toHex } from '../core/hash.js';
import { type NoteSigner, type NoteVerifier, cosignBody, parseNote, verifySignature } from '../core/note.js';
import type { CosignerKeys } from './advertised.js';
import type { ObjectReader, ObjectStore } from '../store/store.js';
import { VersionConflictError } from '../store/store.js';
import { TILE_WIDTH } from '../core/tiles.js';
import { readBundle } from '../read/tilestore.js';
import { type AddCheckpointRequest, originHash, refuse } from '../witness/protocol.js';
import { checkAgainstHeld, checkRequest, openPresentedCheckpoint } from '../witness/witness.js';
import { entryHash } from '../core/entry.js';
import {
  type AddEntriesReader,
  MirrorError,
  type MirrorInfo,
  type PackageSpan,
  TruncatedError,
  canonicalPackages,
} from './protocol.js';
import { MirrorCopy } from './storage.js';
import { rangeHash, verifySubtree } from '../core/subtree.js';

/** A checkpoint the mirror holds: size, hex root, and the note (body and the log's signature lines). */
interface Held {
  readonly size: number;
  readonly root: string;
  readonly note: string;
}

interface LogState {
  /** Recent pending checkpoints, oldest first; the last is the pending checkpoint. */
  readonly pending: Held[];
  readonly next: number;
  readonly mirror: (Held & { readonly cosignature: string }) | null;
}

export interface MirroredLog {
  readonly verifier: NoteVerifier;
  /**
   * A Stele log's own objects (its URL or directory): the mirror also copies its record
   * bundles, each record checked against the entry hash it must chain to, so `stele ledger
   * audit` can run on the copy. Absent for a plain tlog-tiles log.
   */
  readonly records?: ObjectReader;
  /** The cosigners the log advertises, whose cosignatures the copy keeps (none if absent). */
  readonly cosigners?: CosignerKeys;
}

export interface MirrorOptions {
  readonly signer: NoteSigner;
  readonly logs: readonly MirroredLog[];
  /** Durable per-log state. */
  readonly state: ObjectStore;
  /** The public copy of one log, by lowercase hex SHA-256(origin). */
  readonly copyOf: (hash: string) => ObjectStore;
  /** Secret that authenticates tickets (the mirror's alone). */
  readonly ticketKey: Uint8Array;
  readonly now?: () => number;
  /** Most packages one add-entries request may commit before the mirror answers 202 (default 256). */
  readonly maxPackagesPerRequest?: number;
}

/** Pending checkpoints kept to accept as upload_end, besides any a ticket brings. */
const HISTORY = 32;
/** Entries a client may resend below the next entry (one package's worth and change). */
const MAX_EXCESS = 2 * TILE_WIDTH;
const TICKET_MAC = 16;
/** Cosignatures kept with a checkpoint, beyond the log's own signature (signed-note asks verifiers for 16 at least). */
const MAX_KEPT = 15;

export type AddEntriesResult = { status: 200; cosignature: string } | { status: 202; info: MirrorInfo };

const stateKey = (origin: string) => `logs/${Buffer.from(origin).toString('hex')}.json`;
const EMPTY: LogState = { pending: [], next: 0, mirror: null };

export class Mirror {
  private readonly logs = new Map<string, MirroredLog>();
  private readonly byHash = new Map<string, string>();
  private readonly copies = new Map<string, MirrorCopy>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly o: MirrorOptions) {
    for (const l of o.logs) {
      this.logs.set(l.verifier.name, l);
      this.byHash.set(originHash(l.verifier.name), l.verifier.name);
    }
  }

  get name(): string {
    return this.o.signer.name;
  }

  /** The public copy of the log whose origin hashes to `hash` (null if not mirrored). */
  copy(hash: string): MirrorCopy | null {
    const origin = this.byHash.get(hash);
    return origin === undefined ? null : this.copyFor(origin);
  }

  private copyFor(origin: string): MirrorCopy {
    let c = this.copies.get(origin);
    if (!c) this.copies.set(origin, (c = new MirrorCopy(this.o.copyOf(originHash(origin)))));
    return c;
  }

  async stateOf(origin: string): Promise<LogState & { version: string | null }> {
    const obj = await this.o.state.getVersioned(stateKey(origin));
    if (!obj) return { ...EMPTY, version: null };
    return { ...(JSON.parse(Buffer.from(obj.data).toString('utf8')) as LogState), version: obj.version };
  }

  /** One step per log at a time in this process; the state swap guards across processes. */
  private serial<T>(origin: string, step: () => Promise<T>): Promise<T> {
    const prev = this.queues.get(origin) ?? Promise.resolve();
    const run = prev.then(step, step);
    this.queues.set(
      origin,
      run.catch(() => undefined),
    );
    return run;
  }

  private async save(origin: string, state: LogState, version: string | null): Promise<void> {
    const { pending, next, mirror } = state;
    try {
      await this.o.state.swap(stateKey(origin), Buffer.from(JSON.stringify({ pending, next, mirror })), version);
    } catch (e) {
      if (e instanceof VersionConflictError) throw new MirrorError(409, 'the mirror state moved; retry');
      throw e;
    }
  }

  /**
   * tlog-witness add-checkpoint, updating the pending checkpoint (never the mirror
   * checkpoint) and signing nothing ("The mirror cosigner MUST NOT sign the checkpoint in
   * this process"); the log's signature is kept. Throws WitnessError with its status.
   */
  async addCheckpoint(req: AddCheckpointRequest): Promise<void> {
    const cp = this.open(req.checkpoint);
    checkRequest(req, cp);
    const kept = await this.keptCosignatures(cp.origin, req.checkpoint, cp.body);
    await this.serial(cp.origin, async () => {
      const st = await this.stateOf(cp.origin);
      const last = st.pending[st.pending.length - 1];
      const held = { size: last?.size ?? 0, root: last?.root ?? '', version: last ? st.version : null };
      if (req.oldSize !== held.size)
        throw refuse.staleOldSize(held.size, `mirror holds a pending size ${held.size}, not ${req.oldSize}`);
      checkAgainstHeld(held, req, cp);
      if (last && last.size === cp.size) return this.merge(cp.origin, st, kept);
      const pending = [...st.pending, { size: cp.size, root: toHex(cp.root), note: withLines(cp.note, kept) }].slice(
        -HISTORY,
      );
      await this.save(cp.origin, { ...st, pending }, st.version);
    });
  }

  /** The cosignature lines of `text` (over `body`) under the log's advertised keys, this mirror's own excepted. */
  private async keptCosignatures(origin: string, text: string, body: string): Promise<string[]> {
    const cosigners = this.logs.get(origin)?.cosigners;
    const sigs = parseNote(text).signatures.filter((s) => s.name !== origin && s.name !== this.name);
    if (!cosigners || sigs.length === 0) return [];
    const under = (keys: readonly NoteVerifier[]) =>
      sigs.filter((s) => keys.some((k) => k.name !== this.name && verifySignature(body, s, k) !== null));
    let kept = under(await cosigners());
    if (kept.length < sigs.length) kept = under(await cosigners(true));
    return kept.map((s) => s.line);
  }

  /**
   * The same checkpoint again, maybe with more cosignatures: they join its pending note and,
   * if it is the mirror checkpoint already, the checkpoint the copy serves.
   */
  private async merge(origin: string, st: LogState & { version: string | null }, kept: string[]): Promise<void> {
    const last = st.pending[st.pending.length - 1]!;
    const note = withLines(last.note, kept);
    if (note === last.note) return;
    const pending = [...st.pending.slice(0, -1), { ...last, note }];
    let mirror = st.mirror;
    if (mirror && mirror.size === last.size) {
      mirror = { ...mirror, note };
      await this.copyFor(origin).store.swap(
        'checkpoint',
        Buffer.from(`${note}${mirror.cosignature}`),
        await this.version(origin),
      );
    }
    await this.save(origin, { pending, next: st.next, mirror }, st.version);
  }

  /** The presented checkpoint, its log's signature checked, with the note the mirror keeps (body and log lines). */
  private open(text: string): ExtendedCheckpointBody & { body: string; note: string } {
    const { body, logLines, ...checkpoint } = openPresentedCheckpoint(
      text,
      (origin) => this.logs.get(origin)?.verifier,
    );
    return { ...checkpoint, body, note: `${body}\n${logLines}` };
  }

  private ticketMac(origin: string, note: string): Uint8Array {
    return hmac(
      nobleSha256,
      this.o.ticketKey,
      new TextEncoder().encode(`stele mirror ticket\n${origin}\n${note}`),
    ).subarray(0, TICKET_MAC);
  }

  /** A ticket naming a pending checkpoint: its note, authenticated by the mirror's secret. */
  private ticketFor(origin: string, h: Held | undefined): Uint8Array {
    if (!h) return new Uint8Array(0);
    return concatBytes(this.ticketMac(origin, h.note), new TextEncoder().encode(h.note));
  }

  /** The pending checkpoint a ticket names, if the mirror made the ticket (and so checked it). */
  private fromTicket(origin: string, ticket: Uint8Array): Held | null {
    if (ticket.length <= TICKET_MAC) return null;
    const note = new TextDecoder().decode(ticket.subarray(TICKET_MAC));
    if (!bytesEqual(this.ticketMac(origin, note), ticket.subarray(0, TICKET_MAC))) return null;
    const body = parseExtendedCheckpointBody(parseNote(note).body);
    return { size: body.size, root: toHex(body.root), note };
  }

  private info(origin: string, st: LogState, target?: Held): MirrorInfo {
    const t = target ?? st.pending[st.pending.length - 1];
    return { size: t?.size ?? 0, next: st.next, ticket: this.ticketFor(origin, t) };
  }

  /**
   * add-entries: reads the header and then one package at a time from `body`. Returns 200
   * with the mirror's cosignature once everything up to upload_end is stored, or 202 with
   * the advanced next entry; throws MirrorError with the text's status otherwise.
   */
  async addEntries(body: AddEntriesReader): Promise<AddEntriesResult> {
    let header;
    try {
      header = await body.header();
    } catch (e) {
      if (e instanceof TruncatedError || e instanceof TypeError)
        throw new MirrorError(400, `malformed add-entries header: ${(e as Error).message}`);
      throw e;
    }
    const { origin, start, end, ticket } = header;
    const log = this.logs.get(origin);
    if (!log) throw new MirrorError(404, `unknown log ${origin}`);
    const st = await this.stateOf(origin);
    if (st.pending.length === 0)
      throw new MirrorError(422, 'the mirror has no pending checkpoint of this log: add-checkpoint first');
    if (start > end) throw new MirrorError(400, `upload_start ${start} is above upload_end ${end}`);
    const target = this.targetOf(origin, st, end, ticket);
    if (!target)
      throw new MirrorError(
        409,
        `upload_end ${end} is not a pending checkpoint size of this mirror`,
        this.info(origin, st),
      );
    if (st.mirror && end < st.mirror.size)
      throw new MirrorError(
        409,
        `upload_end ${end} is below the mirror checkpoint ${st.mirror.size}`,
        this.info(origin, st),
      );
    if (start > st.next)
      throw new MirrorError(
        409,
        `upload_start ${start} is beyond the next entry ${st.next}`,
        this.info(origin, st, target),
      );
    if (Math.min(end, st.next) - start > MAX_EXCESS)
      throw new MirrorError(
        409,
        `upload_start ${start} resends too much below the next entry ${st.next}`,
        this.info(origin, st, target),
      );

    const packages = canonicalPackages(start, end);
    const limit = this.o.maxPackagesPerRequest ?? 256;
    let saved = 0;
    for (const span of packages) {
      if (saved === limit) break;
      let pkg;
      try {
        pkg = await body.package(span.end - span.start);
      } catch (e) {
        if (!(e instanceof TruncatedError)) throw e;
        if (saved === 0) throw new MirrorError(400, `no complete entry package: ${e.message}`);
        break; // "The mirror discards any partial bytes after the last successfully authenticated entry package."
      }
      await this.serial(origin, () => this.commitPackage(log, span, pkg.entries, pkg.proof, target));
      saved++;
    }
    return this.serial(origin, async () => {
      const now = await this.stateOf(origin);
      if (now.next < end) return { status: 202 as const, info: this.info(origin, now, target) };
      return { status: 200 as const, cosignature: await this.advanceMirror(origin, now, target) };
    });
  }

  private targetOf(origin: string, st: LogState, end: number, ticket: Uint8Array): Held | null {
    const known =
      [...st.pending].reverse().find((p) => p.size === end) ?? (st.mirror?.size === end ? st.mirror : undefined);
    if (known) return known;
    try {
      const t = this.fromTicket(origin, ticket);
      return t && t.size === end ? t : null;
    } catch {
      return null;
    }
  }

  /** Authenticates one package against `target`, then stores what is new in it. */
  private async commitPackage(
    log: MirroredLog,
    span: PackageSpan,
    entries: Uint8Array[],
    proof: Uint8Array[],
    target: Held,
  ): Promise<void> {
    const origin = log.verifier.name;
    const st = await this.stateOf(origin);
    if (span.start > st.next)
      throw new MirrorError(
        409,
        `entries from ${st.next} are missing before ${span.start}`,
        this.info(origin, st, target),
      );
    const copy = this.copyFor(origin);
    const index = span.subtreeStart / TILE_WIDTH;
    // "it reconstructs the subtree hash based on the received entries and entries already in the log".
    const before = await copy.entries(index, span.start - span.subtreeStart);
    const all = [...before, ...entries];
    const leaves = all.map((e) => leafHash(e));
    if (
      !verifySubtree(
        span.subtreeStart,
        span.end,
        target.size,
        proof,
        rangeHash(leaves),
        Buffer.from(target.root, 'hex'),
      )
    ) {
      throw new MirrorError(
        422,
        `entries [${span.start}, ${span.end}) do not verify against the checkpoint of size ${target.size}`,
      );
    }
    // "If some entry has already been written to the log or the pending entry list, the mirror MUST skip saving that entry."
    if (span.end <= st.next) return;
    const records = log.records ? await this.records(log.records, index, all, copy) : undefined;
    await copy.writeBundle(index, all, leaves, records);
    await this.save(origin, { ...st, next: span.end }, st.version);
  }

  /**
   * A Stele log's record bundle for these entries (entry hashes), from the log's own
   * objects; each record must hash, with the entry hash before it, to its entry hash.
   */
  private async records(
    source: ObjectReader,
    index: number,
    entryHashes: readonly Uint8Array[],
    copy: MirrorCopy,
  ): Promise<Uint8Array[]> {
    const first = index * TILE_WIDTH;
    let records: Uint8Array[];
    try {
      records = await readBundle(source, 'records', index, entryHashes.length);
    } catch (e) {
      throw new MirrorError(422, `the log's record bundle ${index} could not be read: ${(e as Error).message}`);
    }
    let prior: Uint8Array =
      first === 0 ? new Uint8Array(32) : (await copy.entries(index - 1, TILE_WIDTH))[TILE_WIDTH - 1]!;
    records.forEach((r, i) => {
      const eh = entryHash(first + i, r, prior);
      if (!bytesEqual(eh, entryHashes[i]!))
        throw new MirrorError(422, `record ${first + i} from the log does not hash to its entry hash`);
      prior = eh;
    });
    return records;
  }

  /** The last step of add-entries: the mirror checkpoint moves up to `target` (never back) and is cosigned. */
  private async advanceMirror(
    origin: string,
    st: LogState & { version: string | null },
    target: Held,
  ): Promise<string> {
    if (st.mirror && st.mirror.size > target.size)
      throw new MirrorError(409, `the mirror checkpoint moved past ${target.size}`, this.info(origin, st));
    if (st.mirror && st.mirror.size === target.size) return st.mirror.cosignature;
    const cp = parseNote(target.note);
    const cosignature = await cosignBody(cp.body, this.o.signer, this.timestamp());
    const mirror = { ...target, cosignature };
    // The served checkpoint (with the mirror's cosignature) is written before the state that
    // says so, and the cosignature returned only after both: "MUST persist the new checkpoint before responding".
    await this.copyFor(origin).store.swap(
      'checkpoint',
      Buffer.from(`${target.note}${cosignature}`),
      await this.version(origin),
    );
    await this.save(origin, { ...st, mirror }, st.version);
    return cosignature;
  }

  private async version(origin: string): Promise<string | null> {
    return (await this.copyFor(origin).store.getVersioned('checkpoint'))?.version ?? null;
  }

  /** "The cosignature MUST NOT omit the timestamp". */
  private timestamp(): number {
    const seconds = Math.floor((this.o.now ?? Date.now)() / 1000);
    if (!(seconds > 0)) throw new Error(`refusing to cosign at time ${seconds}: the clock is wrong`);
    return seconds;
  }
}

/** `note` with the cosignature lines `more` added: one per key name (those it has stay), at most MAX_KEPT beyond the log's. */
function withLines(note: string, more: readonly string[]): string {
  const parsed = parseNote(note);
  const lines = parsed.signatures.map((s) => s.line);
  const names = new Set(parsed.signatures.map((s) => s.name));
  for (const line of more) {
    const name = line.slice(2, line.indexOf(' ', 2));
    if (names.has(name) || lines.length > MAX_KEPT) continue;
    names.add(name);
    lines.push(line);
  }
  return `${parsed.body}\n${lines.join('')}`;
}
