// `ledger verify <file> --proof <file.tlog-proof>`: the report of spec §4.3 from a C2SP
// tlog-proof alone, with no network. The proof file's checkpoint note, inclusion proof and
// extra data (src/core/tlog-proof.ts) carry everything rules 1, 3, 4 and 5 need; rule 2 needs a
// consistency proof the file does not hold, so it is checked only when the proof's
// checkpoint is the pinned one (same size: same root), and otherwise reported as not checked.
import { promises as fs } from 'node:fs';
import { presentEntry } from '../core/entry.js';
import { hashFromHex, toHex } from '../core/hash.js';
import { parseTlogProof, verifyTlogProof, TlogProofError, type TlogProof } from '../core/tlog-proof.js';
import type { EntryView } from './api.js';
import { ClientError, VerificationError } from './errors.js';
import type { Session, VerifyResult } from './ledger.js';
import { Report, checkCheckpoint, checkConsistency } from './verify.js';

/** Reads and parses a proof file: unreadable → io (exit 3), malformed → verification (exit 1). */
export async function readTlogProof(path: string): Promise<TlogProof> {
  let text: string;
  try {
    text = await fs.readFile(path, 'utf8');
  } catch (e) {
    throw new ClientError('io', `cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return parseTlogProof(text);
  } catch (e) {
    if (e instanceof TlogProofError) throw new VerificationError(`${path}: ${e.message}`);
    throw e;
  }
}

export async function verifyFileWithTlogProof(s: Session, file: string, digest: string, bytes: number, proofPath: string): Promise<VerifyResult> {
  const proof = await readTlogProof(proofPath);
  const report = new Report();
  // Rules 1 and 5 as for any checkpoint: the log signature by the pinned key, the trust policy's quorum.
  const cc = checkCheckpoint({ note: proof.checkpoint }, s.trust);
  report.add('signature', cc.signature);
  const pin = s.trust.pin;
  report.add(
    'consistency',
    cc.size === pin.size
      ? await checkConsistency(pin, { size: cc.size, root: cc.root }, null)
      : { status: 'SKIP', reason: 'offline', detail: `not checked offline: the proof's checkpoint (size ${cc.size}) is not the pinned one (size ${pin.size}); run \`ledger checkpoint\` online to prove consistency` },
  );
  report.add('witnesses', cc.witnesses);
  const r = verifyTlogProof(proof, s.trust.log, s.trust.witnesses, hashFromHex(digest));
  const { entry: entryCheck, digest: digestCheck, inclusion } = r.checks;
  const notRun = (why: string) => ({ status: 'SKIP' as const, reason: why, detail: `not checked: ${why}` });
  // Rule 3: the entry bound to its leaf (entry hash from index, entry and prior hash), and the file's digest in it.
  if (r.failed === 'signature') {
    report.add('leaf', notRun('the checkpoint did not verify'));
    report.add('inclusion', notRun('the checkpoint did not verify'));
  } else {
    report.add('leaf', entryCheck?.ok === false || !digestCheck ? (entryCheck ?? notRun('no entry')) : digestCheck);
    report.add('inclusion', inclusion ?? notRun('the extra data holds no entry'));
  }
  report.finish();
  const entry = r.entry && r.entryHash ? (presentEntry(r.entry, proof.index, r.entryHash) as unknown as EntryView) : undefined;
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
