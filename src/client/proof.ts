// `ledger proof <entry_id>`: a stored (or fetched) inclusion proof, verified again.
import { hashFromHex, leafHash, toHex } from '../core/hash.js';
import type { LedgerApi } from './api.js';
import { advancePin } from './config.js';
import { LogAnswerError, UsageError, VerificationError } from './errors.js';
import type { ProofBundle } from './proofs.js';
import { Report, checkCheckpoint, checkConsistencyWithPin, checkInclusion, hashes } from './rules.js';
import { type PinMove, type Session, bundleOf } from './session.js';
import { ApiView } from './views.js';
import { leafRule } from './entry-rules.js';

export interface ProofResult {
  readonly bundle: ProofBundle;
  readonly stored: boolean;
  readonly report: Report;
  readonly pinMoved: PinMove | null;
  readonly savedProof?: string;
}

export async function proveEntry(s: Session, id: string, api: LedgerApi | null): Promise<ProofResult> {
  let bundle = await s.proofs.load(id);
  const stored = bundle !== null;
  if (!bundle) {
    if (!api) throw new UsageError(`no stored proof for ${id}, and no endpoint to fetch it from`);
    let found;
    try {
      found = await api.entry({ id });
    } catch (e) {
      if (e instanceof LogAnswerError && e.status === 404)
        throw new VerificationError(`entry ${id} is not in the log (${e.message})`);
      throw e;
    }
    bundle = bundleOf(found.entry, found.leafIndex, found.auditPath, found.checkpoint, s);
    bundle.leafHash = found.leafHash;
    bundle.rootHash = found.rootHash;
    bundle.treeSize = found.treeSize;
  }
  const report = new Report();
  const cc = checkCheckpoint({ json: bundle.checkpoint }, s.trust);
  report.add('signature', cc.signature);
  const prove = api ? new ApiView(api).prove : null;
  const pin = s.trust.pin;
  const consistency = await checkConsistencyWithPin(pin, { size: cc.size, root: cc.root }, prove, {
    reason: 'offline',
    detail: `offline: the proof's checkpoint (size ${cc.size}) and the pinned one (size ${pin.size}) differ; run online to prove consistency`,
  });
  report.add('consistency', consistency);
  report.add('witnesses', cc.witnesses);
  if (bundle.entry.id !== id)
    report.add('leaf', { ok: false, detail: `the log answered with entry ${bundle.entry.id}, not ${id}` });
  else {
    const leaf = await leafRule(
      api ? s : { ...s, tiles: undefined },
      bundle.entry,
      bundle.leafIndex,
      bundle.treeSize,
      bundle.leafHash,
      undefined,
      bundle.priorEntryHash,
    );
    if (leaf.ok && leaf.prior) bundle.priorEntryHash = leaf.prior;
    report.add('leaf', leaf);
  }
  let inclusion = checkInclusion(
    bundle.leafIndex,
    bundle.treeSize,
    leafHash(hashFromHex(bundle.entry.proof.entryHash)),
    hashes(bundle.auditPath),
    cc,
  );
  if (inclusion.ok && bundle.rootHash !== toHex(cc.root))
    inclusion = { ok: false, detail: 'the proof rootHash is not the checkpoint root' };
  report.add('inclusion', inclusion);
  const ok = report.finish();
  let savedProof: string | undefined;
  if (ok && !stored) savedProof = await s.proofs.save(bundle);
  let pinMoved: PinMove | null = null;
  if (ok && !s.keepPin && cc.size > pin.size && 'ok' in consistency && consistency.ok) {
    if (
      await advancePin(
        s.config.path,
        { treeSize: pin.size, rootHash: toHex(pin.root) },
        { treeSize: cc.size, rootHash: toHex(cc.root) },
      )
    ) {
      pinMoved = { from: pin.size, to: cc.size };
    }
  }
  return { bundle, stored, report, pinMoved, ...(savedProof ? { savedProof } : {}) };
}
