// JSON views of docs/interface.md §2.2–2.6 built from published data.
import { type CanonicalEntry, entryIdOfHex, parseCanonicalEntry, presentEntry } from '../core/entry.js';
import { HASH_SIZE, leafHash, toBase64, toHex } from '../core/hash.js';
import { SIG_COSIGNATURE_V1, keyHash, keyIdOf, parseNote } from '../core/note.js';
import type { PublishedCheckpoint } from '../sequencer/contract.js';
import { JsonFragment, JsonObjectWriter } from './json.js';
import type { CheckpointView, WitnessSigView } from './wire.js';

export type { CheckpointView } from './wire.js';

/** The witness cosignature lines of a note (type 0x04 payloads: 8-byte time ‖ signature). */
export function cosignaturesOf(note: string, witnessKeys: ReadonlyMap<string, Uint8Array>): WitnessSigView[] {
  const out: WitnessSigView[] = [];
  for (const sig of parseNote(note).signatures) {
    const pub = witnessKeys.get(sig.name);
    if (sig.payload.length !== 72 || !pub) continue;
    if (toHex(keyHash(sig.name, SIG_COSIGNATURE_V1, pub)) !== toHex(sig.keyHash)) continue;
    const seconds = Number(Buffer.from(sig.payload.subarray(0, 8)).readBigUInt64BE());
    out.push({
      name: sig.name,
      signature: `ed25519:${toBase64(sig.payload.subarray(8))}`,
      timestamp: new Date(seconds * 1000).toISOString(),
    });
  }
  return out;
}

/** Checkpoint JSON (docs/interface.md §2.2) plus the signed note itself, so clients can check it byte for byte. */
export function checkpointView(
  cp: PublishedCheckpoint,
  publicKey: Uint8Array,
  lifetimeEntries: number,
  witnessKeys: ReadonlyMap<string, Uint8Array> = new Map(),
): CheckpointView {
  return {
    logId: cp.origin,
    treeSize: cp.size,
    rootHash: toHex(cp.root),
    timestamp: cp.timestamp,
    keyId: keyIdOf(publicKey),
    signature: `ed25519:${toBase64(cp.signature)}`,
    witnesses: cosignaturesOf(cp.note, witnessKeys),
    lifetimeEntries,
    note: cp.note,
  };
}

/**
 * The latest checkpoint's view: its signed part built once per checkpoint, the whole view
 * (with lifetimeEntries, which moves with the pool) and its JSON once per pool size.
 */
export class CheckpointViews {
  private signed: { cp: PublishedCheckpoint; view: CheckpointView } | undefined;
  private current: { cp: PublishedCheckpoint; view: CheckpointView; json?: JsonFragment } | undefined;

  constructor(
    private readonly publicKey: Uint8Array,
    private readonly witnessKeys: ReadonlyMap<string, Uint8Array>,
    private readonly lifetimeEntries: () => number,
  ) {}

  view(cp: PublishedCheckpoint): CheckpointView {
    return this.at(cp).view;
  }

  json(cp: PublishedCheckpoint): JsonFragment {
    const at = this.at(cp);
    return (at.json ??= new JsonFragment(at.view));
  }

  private at(cp: PublishedCheckpoint) {
    const lifetimeEntries = Math.max(cp.size, this.lifetimeEntries());
    if (this.current?.cp !== cp || this.current.view.lifetimeEntries !== lifetimeEntries) {
      if (this.signed?.cp !== cp) this.signed = { cp, view: checkpointView(cp, this.publicKey, 0, this.witnessKeys) };
      this.current = { cp, view: { ...this.signed.view, lifetimeEntries } };
    }
    return this.current;
  }
}

/**
 * The entry-proof view (docs/interface.md §2.3–2.4, EntryProofView) as JSON bytes. `auditPath`
 * is its hashes back to back; `checkpointJson` is `checkpoint` serialised (once per
 * checkpoint, by the caller).
 */
export function entryProofJson(
  seq: number,
  canonical: Uint8Array,
  entryHash: Uint8Array,
  auditPath: Uint8Array,
  checkpoint: CheckpointView,
  checkpointJson: JsonFragment,
  leaf: Uint8Array = leafHash(entryHash),
): Buffer {
  const w = new JsonObjectWriter()
    .number('leafIndex', seq)
    .number('treeSize', checkpoint.treeSize)
    .hex('leafHash', leaf)
    .packedHexList('auditPath', auditPath, HASH_SIZE)
    .value('rootHash', checkpoint.rootHash)
    .fragment('checkpoint', checkpointJson);
  writeEntryView(w, 'entry', seq, canonical, entryHash);
  return w.end();
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const COLON = 0x3a;
const isDigit = (b: number | undefined): boolean => b !== undefined && b >= 0x30 && b <= 0x39;

/**
 * Whether the bytes hold `"<array index>":` (0, or digits without a leading zero) anywhere:
 * a key JSON.parse moves to the front of its object. Scanned as bytes, so the record is not
 * decoded to a string per answer; a match inside a string value only costs the slow path.
 */
function hasArrayIndexKey(b: Uint8Array): boolean {
  for (let i = b.indexOf(QUOTE); i >= 0; i = b.indexOf(QUOTE, i + 1)) {
    let j = i + 1;
    if (b[j] === 0x30) j++;
    else if (isDigit(b[j])) while (isDigit(b[j])) j++;
    else continue;
    if (b[j] === QUOTE && b[j + 1] === COLON) return true;
  }
  return false;
}

/**
 * The entry view (presentEntry) of a checked record. The record's canonical JSON lists its
 * fields as JSON.stringify of the parsed record would (RFC 8785 writes strings and numbers
 * as JSON.stringify does), so it is spliced between the id and the proof as it is; a record
 * with an array-index key, whose order JSON.parse changes, is written the slow way.
 */
function writeEntryView(
  w: JsonObjectWriter,
  key: string,
  seq: number,
  canonical: Uint8Array,
  entryHash: Uint8Array,
): void {
  const last = canonical.length - 1;
  if (last < 2 || canonical[0] !== OPEN_BRACE || canonical[last] !== CLOSE_BRACE || hasArrayIndexKey(canonical)) {
    w.value(key, presentEntry(parseCanonicalEntry(canonical), seq, entryHash));
    return;
  }
  const hex = toHex(entryHash);
  w.spliced(key, `{"id":"${entryIdOfHex(seq, hex)}",`, canonical.subarray(1, last), `,"proof":{"entryHash":"${hex}"}}`);
}

/** The anchor response (docs/interface.md §2.5) as JSON bytes; `checkpointJson` as for entryProofJson. */
export function anchorJson(
  seq: number,
  entry: CanonicalEntry,
  entryHash: Uint8Array,
  inclusionProof: readonly Uint8Array[],
  checkpointJson: JsonFragment,
  existing = false,
): Buffer {
  const w = new JsonObjectWriter()
    .value('entry', presentEntry(entry, seq, entryHash))
    .number('leafIndex', seq)
    .hexList('inclusionProof', inclusionProof)
    .fragment('checkpoint', checkpointJson);
  // Only a merged duplicate says so (AnchorView.existing); a new entry's answer is unchanged.
  return (existing ? w.value('existing', true) : w).end();
}

/** The consistency view (ConsistencyView) as JSON bytes. */
export function consistencyJson(
  first: number,
  second: number,
  firstRoot: Uint8Array,
  secondRoot: Uint8Array,
  proof: readonly Uint8Array[],
): Buffer {
  return new JsonObjectWriter()
    .number('first', first)
    .number('second', second)
    .hex('firstRoot', firstRoot)
    .hex('secondRoot', secondRoot)
    .hexList('proof', proof)
    .end();
}
