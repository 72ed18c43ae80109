// The §4.3 report of a C2SP tlog-proof (src/core/tlog-proof.ts) alone: tlog-proof
// §"Verifying a tlog proof" in the rules' terms. Rules 1 and 5 on its checkpoint note as on
// any checkpoint; rule 3 on the entry its extra data holds (entry hash from index, entry and
// prior hash, and the file's digest when one is given); rule 4 on its inclusion proof to the
// signed root; rule 2 through `prove` when the caller has one, else only when the proof's
// checkpoint is the pinned one (otherwise SKIPped, as `offline` says). A checkpoint that does
// not verify leaves nothing to prove the entry against: rules 3 and 4 then fail with it.
import type { CanonicalEntry } from '../entry.js';
import { toHex } from '../hash.js';
import { type TlogProof, parseSteleExtra } from '../tlog-proof.js';
import { type CheckedCheckpoint, type Trust, checkCheckpoint } from './checkpoint.js';
import { type ProveConsistency, checkConsistencyWithPin } from './consistency.js';
import { type CheckedEntry, checkEntry } from './entry.js';
import { checkInclusion } from './inclusion.js';
import { Report } from './report.js';

/** The report of a C2SP tlog-proof, and what it verified. */
export interface TlogProofReport {
  readonly report: Report;
  readonly checkpoint: CheckedCheckpoint;
  /** The entry the extra data holds and its recomputed entry hash, when rule 3 could read it. */
  readonly entry?: CanonicalEntry;
  readonly entryHash?: Uint8Array;
}

export interface TlogProofOptions {
  /** The file's SHA-256: the entry must record it. */
  readonly fileDigest?: Uint8Array;
  /** Consistency proofs from the pinned tree (rule 2); none offline. */
  readonly prove?: ProveConsistency | null;
  /** Rule 2's SKIP when the proof's checkpoint is not the pinned one and nothing can prove it. */
  readonly offline?: (proofSize: number) => { reason: string; detail: string };
}

const offlineDefault = (size: number) => ({
  reason: 'offline',
  detail: `not checked offline: the proof's checkpoint (size ${size}) is not the pinned one`,
});

export async function checkTlogProof(
  proof: TlogProof,
  trust: Trust,
  opts: TlogProofOptions = {},
): Promise<TlogProofReport> {
  const report = new Report('entry');
  const cc = checkCheckpoint({ note: proof.checkpoint }, trust);
  report.add('signature', cc.signature);
  report.add(
    'consistency',
    cc.signature.ok
      ? await checkConsistencyWithPin(
          trust.pin,
          { size: cc.size, root: cc.root },
          opts.prove ?? null,
          (opts.offline ?? offlineDefault)(cc.size),
        )
      : { ok: false, detail: 'not checked: the checkpoint did not verify' },
  );
  report.add('witnesses', cc.witnesses);
  const parts = parseSteleExtra(proof.extra);
  const entry: CheckedEntry = parts
    ? checkEntry({
        seq: proof.index,
        entry: parts.canonical,
        prior: parts.prior,
        ...(opts.fileDigest ? { fileDigest: toHex(opts.fileDigest) } : {}),
      })
    : { ok: false, detail: 'the extra data does not hold a prior entry hash and a canonical entry' };
  if (!cc.signature.ok) {
    // Nothing signed to bind the entry to: the rules that needed it fail with the checkpoint.
    const unbound = 'not checked: the checkpoint did not verify, so nothing binds the entry to the log';
    report.add('leaf', { ok: false, detail: entry.ok ? unbound : `${entry.detail}; ${unbound}` });
    report.add('inclusion', { ok: false, detail: unbound });
  } else {
    report.add('leaf', entry);
    report.add(
      'inclusion',
      entry.leaf
        ? checkInclusion(proof.index, cc.size, entry.leaf, proof.proof, cc)
        : { ok: false, detail: 'not checked: the extra data holds no entry to recompute the leaf from' },
    );
  }
  report.finish();
  return {
    report,
    checkpoint: cc,
    ...(entry.entry ? { entry: entry.entry } : {}),
    ...(entry.entryHash ? { entryHash: entry.entryHash } : {}),
  };
}
