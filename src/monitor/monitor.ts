// A monitor follows a Stele log from its tiles (a URL or a directory): each step it reads the
// checkpoint, checks the log's signature, proves the new tree consistent with the one it
// held (from the new tiles, against both signed roots), then reads the new bundles, checks
// every record against its entry hash and leaf, and raises an alert for each new entry the
// watch list matches. Other sources of the same log (a mirror, a witness's copy, a second
// log signing with the same key) are compared too: two checkpoints that cannot both be true
// are a fork, reported with both signed notes. Its state (the size, root and note it holds,
// up to where it has alerted) is a JSON file, so a restart alerts for nothing twice.
import { promises as fs } from 'node:fs';
import { openCheckpoint } from '../core/checkpoint.js';
import { entryHash } from '../core/entry.js';
import { bytesEqual, leafHash, toHex } from '../core/hash.js';
import { proveConsistency, verifyConsistency } from '../core/merkle.js';
import type { NoteVerifier } from '../core/note.js';
import type { ObjectReader } from '../store/store.js';
import { TILE_WIDTH, TileHashReader } from '../core/tiles.js';
import { readBundle, readTileBytes, storeTileFetcher } from '../tilestore.js';

export interface WatchList {
  readonly digests?: readonly string[];
  readonly artifacts?: readonly string[];
  readonly scopes?: readonly string[];
  readonly types?: readonly string[];
}

export type Alert =
  | {
      readonly kind: 'watch';
      readonly seq: number;
      readonly matched: string[];
      readonly entry: Record<string, unknown>;
    }
  | {
      readonly kind: 'fork';
      readonly severity: 'critical';
      readonly message: string;
      readonly notes: readonly [string, string];
    }
  | { readonly kind: 'invalid'; readonly severity: 'critical'; readonly message: string; readonly source: string };

interface Held {
  size: number;
  root: string;
  note: string;
}

export interface MonitorState {
  readonly held: Held | null;
  /** Entries below this were checked and matched against the watch list. */
  readonly scanned: number;
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
  readonly onAlert: (a: Alert) => void;
  readonly onProgress?: (scanned: number, size: number) => void;
}

const utf8 = new TextDecoder();

async function readState(file: string): Promise<MonitorState> {
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as MonitorState;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { held: null, scanned: 0 };
    throw new Error(`cannot read the monitor state ${file}: ${(e as Error).message}`);
  }
}

async function writeState(file: string, s: MonitorState): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await fs.writeFile(tmp, JSON.stringify(s));
  await fs.rename(tmp, file);
}

/** What of an entry the watch list matches (empty: nothing). */
export function matches(w: WatchList, e: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (w.digests?.includes(String(e.digest))) out.push(`digest ${String(e.digest)}`);
  if (typeof e.artifact === 'string' && w.artifacts?.includes(e.artifact)) out.push(`artifact ${e.artifact}`);
  if (typeof e.artifactId === 'string' && w.artifacts?.includes(e.artifactId)) out.push(`artifact ${e.artifactId}`);
  if (typeof e.scope === 'string' && w.scopes?.includes(e.scope)) out.push(`scope ${e.scope}`);
  if (typeof e.type === 'string' && w.types?.includes(e.type)) out.push(`type ${e.type}`);
  return out;
}

export class Monitor {
  private state: MonitorState = { held: null, scanned: 0 };

  constructor(private readonly o: MonitorOptions) {}

  async load(): Promise<MonitorState> {
    this.state = await readState(this.o.stateFile);
    return this.state;
  }

  /** The source's checkpoint, its log signature checked (null: none published yet). */
  private async checkpointOf(src: MonitorSource): Promise<(Held & { rootBytes: Uint8Array }) | null> {
    const data = await src.objects.get('checkpoint');
    if (!data) return null;
    const note = Buffer.from(data).toString('utf8');
    const cp = openCheckpoint(note, this.o.verifier);
    return { size: cp.size, root: toHex(cp.root), note, rootBytes: cp.root };
  }

  /** Whether the trees of `a` and `b` (b's tiles) can both be true; reports a fork if not. */
  private async consistent(a: Held, b: Held, bTiles: ObjectReader): Promise<boolean> {
    const [small, large] = a.size <= b.size ? [a, b] : [b, a];
    if (small.size === large.size) {
      if (small.root === large.root) return true;
    } else {
      const tiles = large === b ? bTiles : this.o.log.objects;
      try {
        const proof =
          small.size === 0
            ? []
            : await proveConsistency(small.size, large.size, new TileHashReader(large.size, storeTileFetcher(tiles)));
        if (
          small.size === 0 ||
          verifyConsistency(
            small.size,
            large.size,
            proof,
            Buffer.from(small.root, 'hex'),
            Buffer.from(large.root, 'hex'),
          )
        )
          return true;
      } catch (e) {
        this.o.onAlert({
          kind: 'invalid',
          severity: 'critical',
          source: 'tiles',
          message: `cannot prove ${small.size} → ${large.size}: ${(e as Error).message}`,
        });
        return false;
      }
    }
    this.o.onAlert({
      kind: 'fork',
      severity: 'critical',
      message: `two checkpoints of ${this.o.verifier.name} that cannot both be true: size ${a.size} and size ${b.size}`,
      notes: [a.note, b.note],
    });
    return false;
  }

  /** One step; false if a fork or an invalid object stopped it (the state is not moved). */
  async step(): Promise<boolean> {
    const held = this.state.held;
    let cp;
    try {
      cp = await this.checkpointOf(this.o.log);
    } catch (e) {
      this.o.onAlert({
        kind: 'invalid',
        severity: 'critical',
        source: this.o.log.name,
        message: `checkpoint: ${(e as Error).message}`,
      });
      return false;
    }
    if (!cp) return true;
    if (held && !(await this.consistent(held, cp, this.o.log.objects))) return false;
    for (const other of this.o.others ?? []) {
      const oc = await this.checkpointOf(other).catch(() => null);
      if (oc && !(await this.consistent(cp, oc, other.objects))) return false;
    }
    if (held && cp.size < held.size) return true; // a stale copy (a cache): nothing new
    if (!held || cp.size > held.size)
      this.state = { ...this.state, held: { size: cp.size, root: cp.root, note: cp.note } };
    if (!(await this.scan(cp.size))) return false;
    await writeState(this.o.stateFile, this.state);
    return true;
  }

  /** Checks and matches entries [scanned, size), bundle by bundle, saving after each. */
  private async scan(size: number): Promise<boolean> {
    const src = this.o.log.objects;
    let seq = this.state.scanned;
    let prior =
      seq === 0
        ? new Uint8Array(32)
        : (await readBundle(src, 'entries', Math.floor((seq - 1) / TILE_WIDTH), ((seq - 1) % TILE_WIDTH) + 1))[
            (seq - 1) % TILE_WIDTH
          ]!;
    while (seq < size) {
      const index = Math.floor(seq / TILE_WIDTH);
      const width = Math.min(TILE_WIDTH, size - index * TILE_WIDTH);
      const [records, entries, leaves] = await Promise.all([
        readBundle(src, 'records', index, width),
        readBundle(src, 'entries', index, width),
        readTileBytes(src, 0, index, width),
      ]);
      for (let i = seq - index * TILE_WIDTH; i < width; i++, seq++) {
        const eh = entryHash(seq, records[i]!, prior);
        if (!bytesEqual(eh, entries[i]!) || !bytesEqual(leafHash(eh), leaves.subarray(32 * i, 32 * i + 32))) {
          this.o.onAlert({
            kind: 'invalid',
            severity: 'critical',
            source: this.o.log.name,
            message: `entry ${seq}: the record does not hash to its entry hash and leaf`,
          });
          return false;
        }
        prior = eh;
        const entry = JSON.parse(utf8.decode(records[i]!)) as Record<string, unknown>;
        const matched = matches(this.o.watch, entry);
        if (matched.length > 0) this.o.onAlert({ kind: 'watch', seq, matched, entry });
      }
      this.state = { ...this.state, scanned: seq };
      await writeState(this.o.stateFile, this.state);
      this.o.onProgress?.(seq, size);
    }
    return true;
  }
}
