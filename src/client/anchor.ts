// `ledger anchor <file>`: the file's digest sent, and the entry the log answers verified.
import { type LabelField, checkLabel } from '../core/labels.js';
import { hashFromHex, leafHash, toHex } from '../core/hash.js';
import type { AnchorBody, EntryView, LedgerApi } from './api.js';
import { UsageError } from './errors.js';
import { type FileDigest, sha256File } from './hashfile.js';
import { type Outcome, Report, checkInclusion, hashes } from './rules.js';
import {
  type CheckpointSummary,
  type PinMove,
  type Session,
  bundleOf,
  checkpointRules,
  checkpointSummary,
} from './session.js';
import { ApiView } from './views.js';
import { leafRule } from './entry-rules.js';

export interface AnchorResult {
  readonly file: string;
  readonly digest: string;
  readonly bytes: number;
  readonly report: Report;
  readonly entry: EntryView;
  readonly leafIndex: number;
  readonly treeSize: number;
  readonly checkpoint: CheckpointSummary;
  readonly pinMoved: PinMove | null;
  readonly savedProof?: string;
  /** The log already held this anchor (same digest, artifact, scope, tenant) and answered with that entry. */
  readonly existing: boolean;
}

export interface AnchorOptions {
  readonly artifact?: string;
  readonly scope?: string;
  /** Sent with the anchor; the entry records it (in production the token's tenant decides). */
  readonly tenant?: string;
  readonly type?: AnchorBody['type'];
  /** Append a new entry even if the log holds an identical anchor (else it answers with that one). */
  readonly allowDuplicate?: boolean;
  readonly digest?: FileDigest;
  readonly onHashProgress?: (bytes: number, total: number) => void;
}

/** A label option checked by the log's rule (src/core/labels.ts), in its NFC form. */
export function labelOption(field: LabelField, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const checked = checkLabel(field, value);
  if (!checked.ok) throw new UsageError(checked.reason);
  return checked.value;
}

export async function anchorFile(
  s: Session,
  api: LedgerApi,
  file: string,
  opts: AnchorOptions = {},
): Promise<AnchorResult> {
  // Labels by the log's rule (NFC, no invisible or control characters), refused before any work.
  const artifact = labelOption('artifact', opts.artifact);
  const scope = labelOption('scope', opts.scope);
  const tenant = labelOption('tenant', opts.tenant);
  const { digest, bytes } = opts.digest ?? (await sha256File(file, opts.onHashProgress));
  const body: AnchorBody = { digest };
  if (artifact !== undefined) body.artifact = artifact;
  if (scope !== undefined) body.scope = scope;
  if (tenant !== undefined) body.tenant = tenant;
  if (opts.type !== undefined && opts.type !== 'ledger_anchor') body.type = opts.type;
  if (opts.allowDuplicate) body.allowDuplicate = true;
  const res = await api.anchor(body);
  const report = new Report();
  const view = new ApiView(api);
  const { cc, pinMoved } = await checkpointRules(s, report, { json: res.checkpoint }, view.prove);
  const expectedType = opts.type ?? 'ledger_anchor';
  const eh = hashFromHex(res.entry.proof.entryHash);
  let leaf: Outcome & { prior?: string } = await leafRule(
    s,
    res.entry,
    res.leafIndex,
    res.checkpoint.treeSize,
    toHex(leafHash(eh)),
    digest,
  );
  const echo: string[] = [];
  if (res.entry.type !== expectedType) echo.push(`entry type is ${res.entry.type}, not ${expectedType}`);
  if (artifact !== undefined && res.entry.artifact !== artifact) echo.push('entry does not carry the artifact sent');
  if (scope !== undefined && res.entry.scope !== scope) echo.push('entry does not carry the scope sent');
  if (tenant !== undefined && res.entry.tenant !== tenant) echo.push('entry does not carry the tenant sent');
  if (echo.length) leaf = { ok: false, detail: [leaf.ok ? '' : leaf.detail, ...echo].filter(Boolean).join('; ') };
  report.add('leaf', leaf);
  report.add('inclusion', checkInclusion(res.leafIndex, cc.size, leafHash(eh), hashes(res.inclusionProof), cc));
  let savedProof: string | undefined;
  if (report.finish())
    savedProof = await s.proofs.save(
      bundleOf(res.entry, res.leafIndex, res.inclusionProof, res.checkpoint, s, file, leaf.prior),
    );
  return {
    file,
    digest,
    bytes,
    report,
    entry: res.entry,
    leafIndex: res.leafIndex,
    treeSize: res.checkpoint.treeSize,
    checkpoint: checkpointSummary(cc),
    pinMoved,
    ...(savedProof ? { savedProof } : {}),
    existing: res.existing === true,
  };
}
