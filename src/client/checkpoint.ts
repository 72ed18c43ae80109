// `ledger checkpoint`: the log's current checkpoint, verified, and its unsigned fields kept apart.
import type { CheckpointView } from './api.js';
import { Report } from './rules.js';
import { type CheckpointSummary, type PinMove, type Session, type UnsignedFields, checkpointRules } from './session.js';
import { checkpointSummary } from './session.js';
import type { LogView } from './views.js';

export interface CheckpointResult {
  readonly report: Report;
  /** Verified facts, and (`unsigned`) the JSON fields no signature covers, shown as such. */
  readonly checkpoint: CheckpointSummary & { keyId: string };
  readonly witnesses: string[];
  /** The signed note (as served, or rebuilt from the JSON signature fields). */
  readonly note: string;
  readonly pinMoved: PinMove | null;
  readonly pinnedBefore: number;
}

export function unsignedFields(j: CheckpointView): UnsignedFields {
  return {
    ...(j.timestamp ? { timestamp: j.timestamp } : {}),
    ...(j.lifetimeEntries !== undefined ? { lifetimeEntries: j.lifetimeEntries } : {}),
    keyId: j.keyId,
    witnesses: j.witnesses,
  };
}

export async function verifyCheckpoint(s: Session, view: LogView): Promise<CheckpointResult> {
  const report = new Report('checkpoint');
  const input = await view.checkpoint();
  const { cc, pinMoved } = await checkpointRules(s, report, input, view.prove, view);
  report.finish();
  const note = cc.note ?? '';
  return {
    report,
    checkpoint: {
      ...checkpointSummary(cc),
      keyId: s.trust.keyId,
      ...(input.json ? { unsigned: unsignedFields(input.json) } : {}),
    },
    witnesses: cc.witnesses.names,
    note,
    pinMoved,
    pinnedBefore: s.trust.pin.size,
  };
}
