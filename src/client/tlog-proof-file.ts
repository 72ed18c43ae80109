// `ledger verify <file> --proof <file.tlog-proof>`: the report of docs/interface.md §4.3 from a C2SP
// tlog-proof alone, with no network. The proof file's checkpoint note, inclusion proof and
// extra data (src/core/tlog-proof.ts) carry everything rules 1, 3, 4 and 5 need; rule 2 needs a
// consistency proof the file does not hold, so it is checked only when the proof's
// checkpoint is the pinned one (same size: same root), and otherwise reported as not checked.
import { promises as fs } from 'node:fs';
import { presentEntry } from '../core/entry.js';
import { hashFromHex, toHex } from '../core/hash.js';
import { checkTlogProof } from '../core/verify/index.js';
import { parseTlogProof, TlogProofError, type TlogProof } from '../core/tlog-proof.js';
import type { EntryView } from './api.js';
import { ClientError, VerificationError } from './errors.js';
import type { Session } from './session.js';
import type { VerifyResult } from './verify-file.js';
import { fsReason } from '../store/files.js';

/** Reads and parses a proof file: unreadable → io (exit 3), malformed → verification (exit 1). */
export async function readTlogProof(path: string): Promise<TlogProof> {
  let text: string;
  try {
    text = await fs.readFile(path, 'utf8');
  } catch (e) {
    throw new ClientError('io', `cannot read ${path}: ${fsReason(e)}`);
  }
  try {
    return parseTlogProof(text);
  } catch (e) {
    if (e instanceof TlogProofError) throw new VerificationError(`${path}: ${e.message}`);
    throw e;
  }
}

export async function verifyFileWithTlogProof(
  s: Session,
  file: string,
  digest: string,
  bytes: number,
  proofPath: string,
): Promise<VerifyResult> {
  const proof = await readTlogProof(proofPath);
  const pin = s.trust.pin;
  // The rules themselves are the core's (src/core/verify/), as in the explorer and the package.
  const {
    report,
    checkpoint: cc,
    entry: provenEntry,
    entryHash,
  } = await checkTlogProof(proof, s.trust, {
    fileDigest: hashFromHex(digest),
    offline: (size) => ({
      reason: 'offline',
      detail: `not checked offline: the proof's checkpoint (size ${size}) is not the pinned one (size ${pin.size}); run \`ledger checkpoint\` online to prove consistency`,
    }),
  });
  const entry =
    provenEntry && entryHash ? (presentEntry(provenEntry, proof.index, entryHash) as unknown as EntryView) : undefined;
  return {
    file,
    digest,
    bytes,
    mode: 'tlog-proof',
    source: proofPath,
    report,
    ...(entry ? { entry } : {}),
    leafIndex: proof.index,
    treeSize: cc.size,
    checkpoint: { origin: cc.origin, treeSize: cc.size, rootHash: toHex(cc.root) },
    pinMoved: null,
  };
}
