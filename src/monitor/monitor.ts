// A monitor follows a Stele log from its tiles (a URL or a directory): each step it reads the
// checkpoint, checks the log's signature, proves the new tree consistent with the one it
// held (from the new tiles, against both signed roots), then reads the new bundles, checks
// every record against its entry hash and leaf, and raises an alert for each new entry the
// watch list matches. Other sources of the same log (a mirror, a witness's copy, a second
// log signing with the same key) are compared too: two checkpoints that cannot both be true
// are a fork, reported with both signed notes. Its state (the size, root and note it holds,
// up to where it has checked, the alerts not yet delivered) is a JSON file replaced
// atomically and durably: an alert enters it in the same write that records its entry as
// checked, and leaves it only once every sink took it (alerts.ts), so a restart or a kill -9
// raises no alert twice and loses none.
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { openCheckpoint } from '../core/checkpoint.js';
import { entryHash } from '../core/entry.js';
import { bytesEqual, leafHash, toHex } from '../core/hash.js';
import { proveConsistency } from '../core/merkle.js';
import { checkConsistencyProof } from '../core/verify/index.js';
import type { NoteVerifier } from '../core/note.js';
import type { ObjectReader } from '../store/store.js';
import { TILE_WIDTH, TileHashReader } from '../core/tiles.js';
import { replaceFile } from '../store/files.js';
import { readBundle, readTileBytes, storeTileFetcher } from '../read/tilestore.js';
import type { Alert, AlertSink, RaisedAlert } from './alerts.js';
import type { StepOutcome } from './follow.js';

export interface WatchList {
  readonly digests?: readonly string[];
  readonly artifacts?: readonly string[];
  readonly scopes?: readonly string[];
  readonly tenants?: readonly string[];
  readonly types?: readonly string[];
}

export type { Alert, AlertSink, RaisedAlert } from './alerts.js';

interface Held {
  size: number;
  root: string;
  note: string;
}

/** An alert raised but not yet taken by every sink: `sinks` names those still to take it. */
interface Pending {
  readonly alert: RaisedAlert;
  readonly sinks: readonly string[];
}

export interface MonitorState {
  readonly held: Held | null;
  /** Entries below this were checked and matched against the watch list (their alerts raised). */
  readonly scanned: number;
  /** The outbox: raised alerts some sink has not taken yet, oldest first. */
  readonly pending?: readonly Pending[];
}

export interface MonitorSource {
  readonly name: string;
  readonly objects: ObjectReader;
}

export interface MonitorOptions {
  readonly log: MonitorSource;
  /** Other copies of the same log to compare with (mirrors, a second log under the key). */
  readonly others?: readonly MonitorSource[];
  readonly verifier: NoteVerifier;
  readonly watch: WatchList;
  readonly stateFile: string;
  /** Where alerts go, in this order (each alert to every sink). */
  readonly sinks: readonly AlertSink[];
  /** A sink that failed to take an alert (it stays in the outbox and is tried again next step). */
  readonly onDeliveryError?: (sink: string, e: Error) => void;
  readonly onProgress?: (scanned: number, size: number) => void;
}

/** Without alerts to raise, the state is saved at least this often while catching up. */
const SAVE_EVERY = 16 * TILE_WIDTH;
/** Bundles read ahead while scanning. */
const READ_AHEAD = 8;

const utf8 = new TextDecoder();

async function readState(file: string): Promise<MonitorState> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as MonitorState;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { held: null, scanned: 0 };
    throw new Error(`cannot read the monitor state ${file}: ${(e as Error).message}`);
  }
}

const writeState = (file: string, s: MonitorState): Promise<void> => replaceFile(file, JSON.stringify(s));

const shortHash = (...parts: string[]): string =>
  createHash('sha256').update(parts.join('\n\n')).digest('hex').slice(0, 16);

/** What of an entry the watch list matches (empty: nothing). */
export function matches(w: WatchList, e: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (w.digests?.includes(String(e.digest))) out.push(`digest ${String(e.digest)}`);
  if (typeof e.artifact === 'string' && w.artifacts?.includes(e.artifact)) out.push(`artifact ${e.artifact}`);
  if (typeof e.artifactId === 'string' && w.artifacts?.includes(e.artifactId)) out.push(`artifact ${e.artifactId}`);
  if (typeof e.scope === 'string' && w.scopes?.includes(e.scope)) out.push(`scope ${e.scope}`);
  if (typeof e.tenant === 'string' && w.tenants?.includes(e.tenant)) out.push(`tenant ${e.tenant}`);
  if (typeof e.type === 'string' && w.types?.includes(e.type)) out.push(`type ${e.type}`);
  return out;
}

export class Monitor {
  private state: MonitorState = { held: null, scanned: 0 };
  /** Sinks that failed during this step: not tried again until the next one. */
  private down = new Set<string>();
  private delivered = 0;

  constructor(private readonly o: MonitorOptions) {}

  async load(): Promise<MonitorState> {
    this.state = await readState(this.o.stateFile);
    return this.state;
  }

  /** Alerts in the outbox, not yet taken by every sink. */
  get pending(): number {
    return this.state.pending?.length ?? 0;
  }

  /** The id a receiver deduplicates on: the log, then what the alert is about. */
  private idOf(a: Alert): string {
    const origin = this.o.verifier.name;
    if (a.kind === 'watch') return `${origin}/watch/${a.seq}`;
    if (a.kind === 'fork') return `${origin}/fork/${shortHash(...a.notes)}`;
    return `${origin}/invalid/${shortHash(a.source, a.message)}`;
  }

  /**
   * Puts alerts in the outbox with `moved` (what they were raised for) in one durable write,
   * then hands the outbox to the sinks. An alert already waiting (same id) is not added again.
   */
  private async raise(alerts: readonly Alert[], moved: Partial<MonitorState> = {}): Promise<void> {
    const waiting = new Set((this.state.pending ?? []).map((p) => p.alert.id));
    const sinks = this.o.sinks.map((k) => k.name);
    const fresh = alerts
      .map((a) => ({ alert: { ...a, id: this.idOf(a) } as RaisedAlert, sinks }))
      .filter((p) => p.sinks.length > 0 && !waiting.has(p.alert.id));
    this.state = { ...this.state, ...moved, pending: [...(this.state.pending ?? []), ...fresh] };
    await writeState(this.o.stateFile, this.state);
    await this.deliver();
  }

  /** Hands the outbox to each sink in turn (oldest first), saving after each sink's pass. */
  private async deliver(): Promise<void> {
    for (const sink of this.o.sinks) {
      if (this.down.has(sink.name)) continue;
      const taken = new Set<string>();
      for (const p of this.state.pending ?? []) {
        if (!p.sinks.includes(sink.name)) continue;
        try {
          await sink.deliver(p.alert);
        } catch (e) {
          this.down.add(sink.name);
          this.o.onDeliveryError?.(sink.name, e as Error);
          break;
        }
        taken.add(p.alert.id);
        this.delivered++;
      }
      if (taken.size === 0) continue;
      const pending = (this.state.pending ?? [])
        .map((p) => (taken.has(p.alert.id) ? { ...p, sinks: p.sinks.filter((n) => n !== sink.name) } : p))
        .filter((p) => p.sinks.length > 0);
      this.state = { ...this.state, pending };
      await writeState(this.o.stateFile, this.state);
    }
  }

  /** The source's checkpoint, its log signature checked (null: none published yet). */
  private async checkpointOf(src: MonitorSource): Promise<(Held & { rootBytes: Uint8Array }) | null> {
    const data = await src.objects.get('checkpoint');
    if (!data) return null;
    const note = Buffer.from(data).toString('utf8');
    const cp = openCheckpoint(note, this.o.verifier);
    return { size: cp.size, root: toHex(cp.root), note, rootBytes: cp.root };
  }

  /** Why the trees of `a` and `b` (b's tiles) cannot both be true (an alert), or null if they can. */
  private async inconsistency(a: Held, b: Held, bTiles: ObjectReader): Promise<Alert | null> {
    const [small, large] = a.size <= b.size ? [a, b] : [b, a];
    if (small.size === large.size) {
      if (small.root === large.root) return null;
    } else if (small.size === 0) {
      return null;
    } else {
      const tiles = large === b ? bTiles : this.o.log.objects;
      try {
        const proof = await proveConsistency(
          small.size,
          large.size,
          new TileHashReader(large.size, storeTileFetcher(tiles)),
        );
        const checked = checkConsistencyProof(
          { size: small.size, root: Buffer.from(small.root, 'hex') },
          { size: large.size, root: Buffer.from(large.root, 'hex') },
          proof,
        );
        if (checked.ok) return null;
      } catch (e) {
        return {
          kind: 'invalid',
          severity: 'critical',
          source: 'tiles',
          message: `cannot prove ${small.size} → ${large.size}: ${(e as Error).message}`,
        };
      }
    }
    return {
      kind: 'fork',
      severity: 'critical',
      message: `two checkpoints of ${this.o.verifier.name} that cannot both be true: size ${a.size} and size ${b.size}`,
      notes: [a.note, b.note],
    };
  }

  /**
   * One step: deliver what an earlier step could not, then read, check and scan what is new.
   * 'stop' if a fork or an invalid object was found (the state is not moved past it); 'moved'
   * if the log grew or an alert was delivered; else 'idle'.
   */
  async step(): Promise<StepOutcome> {
    this.down.clear();
    const deliveredBefore = this.delivered;
    if (this.pending > 0) await this.deliver();
    const held = this.state.held;
    let cp;
    try {
      cp = await this.checkpointOf(this.o.log);
    } catch (e) {
      const message = `checkpoint: ${(e as Error).message}`;
      await this.raise([{ kind: 'invalid', severity: 'critical', source: this.o.log.name, message }]);
      return 'stop';
    }
    if (!cp) return this.delivered > deliveredBefore ? 'moved' : 'idle';
    const problem = held ? await this.inconsistency(held, cp, this.o.log.objects) : null;
    if (problem) {
      await this.raise([problem]);
      return 'stop';
    }
    for (const other of this.o.others ?? []) {
      const oc = await this.checkpointOf(other).catch(() => null);
      const p = oc ? await this.inconsistency(cp, oc, other.objects) : null;
      if (p) {
        await this.raise([p]);
        return 'stop';
      }
    }
    const grew = !held || cp.size > held.size;
    // A copy behind the one held (a cache) has nothing new; a larger one is taken in.
    if (grew) this.state = { ...this.state, held: { size: cp.size, root: cp.root, note: cp.note } };
    if (!held || cp.size >= held.size) {
      if (!(await this.scan(cp.size))) return 'stop';
    }
    await writeState(this.o.stateFile, this.state);
    return grew || this.delivered > deliveredBefore ? 'moved' : 'idle';
  }

  /**
   * Checks and matches entries [scanned, size), bundle by bundle. A bundle's alerts are
   * raised with its entries marked scanned (one write); without alerts the state is saved
   * every SAVE_EVERY entries.
   */
  private async scan(size: number): Promise<boolean> {
    const src = this.o.log.objects;
    let seq = this.state.scanned;
    let saved = seq;
    let prior =
      seq === 0
        ? new Uint8Array(32)
        : (await readBundle(src, 'entries', Math.floor((seq - 1) / TILE_WIDTH), ((seq - 1) % TILE_WIDTH) + 1))[
            (seq - 1) % TILE_WIDTH
          ]!;
    // Bundles are read READ_AHEAD ahead of the one being checked (a URL source is latency-bound).
    const fetches = new Map<number, Promise<[Uint8Array[], Uint8Array[], Uint8Array]>>();
    const fetchBundle = (index: number) => {
      const width = Math.min(TILE_WIDTH, size - index * TILE_WIDTH);
      if (width <= 0 || fetches.has(index)) return;
      const p = Promise.all([
        readBundle(src, 'records', index, width),
        readBundle(src, 'entries', index, width),
        readTileBytes(src, 0, index, width),
      ]);
      p.catch(() => undefined); // awaited (and its error thrown) when its turn comes
      fetches.set(index, p);
    };
    while (seq < size) {
      const index = Math.floor(seq / TILE_WIDTH);
      const width = Math.min(TILE_WIDTH, size - index * TILE_WIDTH);
      for (let k = index; k <= index + READ_AHEAD; k++) fetchBundle(k);
      const [records, entries, leaves] = await fetches.get(index)!;
      fetches.delete(index);
      const alerts: Alert[] = [];
      for (let i = seq - index * TILE_WIDTH; i < width; i++, seq++) {
        const eh = entryHash(seq, records[i]!, prior);
        if (!bytesEqual(eh, entries[i]!) || !bytesEqual(leafHash(eh), leaves.subarray(32 * i, 32 * i + 32))) {
          // What this bundle matched before the bad entry is raised with it; nothing past it.
          alerts.push({
            kind: 'invalid',
            severity: 'critical',
            source: this.o.log.name,
            message: `entry ${seq}: the record does not hash to its entry hash and leaf`,
          });
          await this.raise(alerts, { scanned: seq });
          return false;
        }
        prior = eh;
        const entry = JSON.parse(utf8.decode(records[i]!)) as Record<string, unknown>;
        const matched = matches(this.o.watch, entry);
        if (matched.length > 0) alerts.push({ kind: 'watch', seq, matched, entry });
      }
      if (alerts.length > 0) {
        await this.raise(alerts, { scanned: seq });
        saved = seq;
      } else {
        this.state = { ...this.state, scanned: seq };
        if (seq - saved >= SAVE_EVERY) {
          await writeState(this.o.stateFile, this.state);
          saved = seq;
        }
      }
      this.o.onProgress?.(seq, size);
    }
    return true;
  }
}
