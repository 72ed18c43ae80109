// `ledger status`: where the user stands. The pin; the log's current checkpoint from its API
// (rules 1, 2 and 5) with its summary (counts the log states and nothing signs); a mirror's
// checkpoint (the same rules, as a copy that may lag) and how far it lags behind the log and
// the pin. The pin is not moved: status only looks.
import { toHex } from '../core/hash.js';
import type { LedgerApi } from './api.js';
import { ApiView, type TilesView } from './views.js';
import { type CheckpointSummary, type Session, checkpointRules, checkpointSummary } from './session.js';
import { Report, isTransportError } from './rules.js';

export interface SourceStatus {
  readonly source: string;
  readonly report?: Report;
  readonly checkpoint?: CheckpointSummary;
  /** Set when the source could not be read (network or I/O): no verdict on it. */
  readonly error?: string;
}

export interface StatusResult {
  readonly pin: { keyId: string; origin: string; treeSize: number; rootHash: string; quorum: string };
  readonly log: (SourceStatus & { summary?: Record<string, unknown>; sincePin?: number }) | null;
  readonly mirror: (SourceStatus & { lag: number | null; behindPin: number }) | null;
}

async function checkSource(s: Session, view: ApiView | TilesView): Promise<SourceStatus> {
  try {
    const report = new Report('checkpoint');
    const { cc } = await checkpointRules(s, report, await view.checkpoint(), view.prove, view);
    report.finish();
    return { source: view.name, report, checkpoint: checkpointSummary(cc) };
  } catch (e) {
    if (isTransportError(e)) return { source: view.name, error: (e as Error).message };
    throw e;
  }
}

export async function ledgerStatus(
  session: Session,
  api: LedgerApi | null,
  mirror: TilesView | null,
): Promise<StatusResult> {
  const s: Session = { ...session, keepPin: true };
  const pin = s.trust.pin;
  let log: StatusResult['log'] = null;
  if (api) {
    const checked = await checkSource(s, new ApiView(api));
    let summary: Record<string, unknown> | undefined;
    if (!checked.error) summary = await api.summary().catch(() => undefined);
    log = {
      ...checked,
      ...(summary ? { summary } : {}),
      ...(checked.checkpoint ? { sincePin: checked.checkpoint.treeSize - pin.size } : {}),
    };
  }
  let m: StatusResult['mirror'] = null;
  if (mirror) {
    const checked = await checkSource(s, mirror);
    const size = checked.checkpoint?.treeSize;
    m = {
      ...checked,
      lag: size !== undefined && log?.checkpoint ? log.checkpoint.treeSize - size : null,
      behindPin: size !== undefined ? Math.max(0, pin.size - size) : 0,
    };
  }
  return {
    pin: {
      keyId: s.trust.keyId,
      origin: s.trust.origin,
      treeSize: pin.size,
      rootHash: toHex(pin.root),
      quorum: s.trust.quorum.text,
    },
    log,
    mirror: m,
  };
}
