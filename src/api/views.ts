// JSON views of spec §2.2–2.6 built from published data.
import { type CanonicalEntry, presentEntry } from '../entry.js';
import { leafHash, toBase64, toHex } from '../hash.js';
import { SIG_COSIGNATURE_V1, keyHash, keyIdOf, parseNote } from '../note.js';
import type { PublishedCheckpoint } from '../sequencer/sequencer.js';
import type { CheckpointView, EntryProofView, WitnessSigView } from './wire.js';

export type { CheckpointView, EntryProofView } from './wire.js';

/** The witness cosignature lines of a note (type 0x04 payloads: 8-byte time ‖ signature). */
export function cosignaturesOf(note: string, witnessKeys: ReadonlyMap<string, Uint8Array>): WitnessSigView[] {
  const out: WitnessSigView[] = [];
  for (const sig of parseNote(note).signatures) {
    const pub = witnessKeys.get(sig.name);
    if (sig.payload.length !== 72 || !pub) continue;
    if (toHex(keyHash(sig.name, SIG_COSIGNATURE_V1, pub)) !== toHex(sig.keyHash)) continue;
    const seconds = Number(Buffer.from(sig.payload.subarray(0, 8)).readBigUInt64BE());
    out.push({ name: sig.name, signature: `ed25519:${toBase64(sig.payload.subarray(8))}`, timestamp: new Date(seconds * 1000).toISOString() });
  }
  return out;
}

/** Checkpoint JSON (spec §2.2) plus the signed note itself, so clients can check it byte for byte. */
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

export function entryProofView(
  seq: number,
  entry: CanonicalEntry,
  entryHash: Uint8Array,
  auditPath: readonly Uint8Array[],
  checkpoint: CheckpointView,
  leaf: Uint8Array = leafHash(entryHash),
): EntryProofView {
  return {
    leafIndex: seq,
    treeSize: checkpoint.treeSize,
    leafHash: toHex(leaf),
    auditPath: auditPath.map(toHex),
    rootHash: checkpoint.rootHash,
    checkpoint,
    entry: presentEntry(entry, seq, entryHash),
  };
}
