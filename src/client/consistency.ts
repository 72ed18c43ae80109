// `ledger consistency --from --to`: a consistency proof between two sizes, checked and
// anchored to the verified checkpoint.
import { bytesEqual, hashFromHex, toHex } from '../core/hash.js';
import { LogAnswerError, UsageError } from './errors.js';
import { Report, checkConsistency, checkConsistencyProof, hashes } from './rules.js';
import { type CheckpointSummary, type PinMove, type Session, checkpointRules, checkpointSummary } from './session.js';
import { ApiView, type LogView, type TilesView } from './views.js';

export interface ConsistencyResult {
  readonly report: Report;
  readonly from: number;
  readonly to: number;
  readonly firstRoot?: string;
  readonly secondRoot?: string;
  readonly proof?: string[];
  readonly checkpoint: CheckpointSummary;
  readonly pinMoved: PinMove | null;
}

export async function proveConsistency(
  s: Session,
  view: LogView,
  from: number | undefined,
  to: number | undefined,
): Promise<ConsistencyResult> {
  const report = new Report('checkpoint');
  const { cc, pinMoved } = await checkpointRules(s, report, await view.checkpoint(), view.prove, view);
  const a = from ?? s.trust.pin.size;
  const b = to ?? cc.size;
  const base = { report, from: a, to: b, checkpoint: checkpointSummary(cc), pinMoved };
  // Sizes the user gave are checked as usage; a log smaller than the pin is rule 2's FAIL
  // (a rollback, already in the report), not a usage error.
  if (from === undefined && to === undefined && a > b) {
    report.finish();
    return base;
  }
  if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b) || a < 1 || a > b)
    throw new UsageError(`need 1 ≤ --from ≤ --to (got ${a} → ${b})`);
  if (b > cc.size) throw new UsageError(`--to ${b} exceeds the current tree size ${cc.size}`);

  let firstRoot: Uint8Array;
  let secondRoot: Uint8Array;
  let proof: Uint8Array[];
  try {
    if (view instanceof ApiView) {
      const c = await view.api.consistency(a, b);
      [firstRoot, secondRoot, proof] = [hashFromHex(c.firstRoot), hashFromHex(c.secondRoot), hashes(c.proof)];
    } else {
      const r = (view as TilesView).reader;
      const p = cc.size;
      ({ firstRoot, secondRoot, proof } = await r.consistency(a, b, p));
    }
  } catch (e) {
    if (!(e instanceof LogAnswerError) && (e as { kind?: string }).kind !== undefined) throw e;
    report.addCheck(7, `Consistency ${a} → ${b}`, { ok: false, detail: `no proof: ${(e as Error).message}` });
    report.finish();
    return base;
  }
  const requested = checkConsistencyProof({ size: a, root: firstRoot }, { size: b, root: secondRoot }, proof);
  report.addCheck(7, `Consistency ${a} → ${b}`, requested);
  const anchored = await checkConsistency(
    { size: b, root: secondRoot },
    { size: cc.size, root: cc.root },
    view.prove,
    'requested',
  );
  report.addCheck(
    8,
    'Anchored to the verified checkpoint',
    anchored.ok
      ? { ok: true, detail: b === cc.size ? `size ${b} is the checkpoint itself` : anchored.detail }
      : anchored,
  );
  if (a === s.trust.pin.size && !bytesEqual(firstRoot, s.trust.pin.root)) {
    report.addCheck(7, `Consistency ${a} → ${b}`, {
      ok: false,
      detail: `the claimed root of size ${a} differs from the pinned root`,
    });
  }
  report.finish();
  return { ...base, firstRoot: toHex(firstRoot), secondRoot: toHex(secondRoot), proof: proof.map(toHex) };
}
