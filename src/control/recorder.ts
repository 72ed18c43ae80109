// Every decision the control plane makes is recorded twice: its record's digest is anchored
// in the ledger (through the same sequencer as every other entry, resolving once a published
// checkpoint includes it), and the record itself goes into the signed audit stream together
// with the ledger entry id. The audit event is written as soon as the entry's batch is
// committed (its id is final and it is published even across a crash), alongside the
// checkpoint's publication rather than after it. Records never contain secrets: no tokens,
// no DEKs, no KEKs.
import { anchorRequest } from '../core/anchor.js';
import { entryId } from '../core/entry.js';
import type { AnchorReceipt } from '../sequencer/contract.js';
import type { AuditEvent, AuditLog } from './audit.js';
import { shuttingDown } from './errors.js';
import type { ControlDeps } from './mount.js';
import { canonicalJson, jsonDigest } from './signing.js';

/** Ledger entry types (and audit event types) of the control plane. */
export const CONTROL_ENTRY_TYPES = [
  'policy_evaluation',
  'access_decision',
  'key_epoch',
  'authentication_failure',
] as const;
export type ControlEntryType = (typeof CONTROL_ENTRY_TYPES)[number];

export interface Recorded {
  readonly digest: string;
  readonly ledgerEntryId: string;
  readonly receipt: AnchorReceipt;
  readonly event: AuditEvent;
}

export class Recorder {
  constructor(
    private readonly submit: ControlDeps['submit'],
    private readonly audit: AuditLog,
    private readonly scope: string,
  ) {}

  private readonly inflight = new Set<Promise<unknown>>();
  private closing = false;

  /** Anchors `record` as a `type` entry with `result`, then appends its audit event. */
  record(
    type: ControlEntryType,
    result: string,
    record: Record<string, unknown>,
    labels: { artifact: string; tenant?: string | undefined },
  ): Promise<Recorded> {
    // A request that passed the router's shutdown gate before closing began may reach this
    // point after drain() started: it must not anchor an entry the closed audit log would miss.
    if (this.closing) return Promise.reject(shuttingDown());
    const p = this.recordNow(type, result, record, labels);
    this.inflight.add(p);
    const forget = () => this.inflight.delete(p);
    p.then(forget, forget);
    return p;
  }

  private async recordNow(
    type: ControlEntryType,
    result: string,
    record: Record<string, unknown>,
    labels: { artifact: string; tenant?: string | undefined },
  ): Promise<Recorded> {
    // Canonicalised once: hashed for the entry, and embedded as is in the audit event.
    const recordJson = canonicalJson(record);
    const digest = jsonDigest(recordJson);
    let audited: Promise<AuditEvent> | undefined;
    const receipt = await this.submit(
      anchorRequest(type, result, digest, { artifact: labels.artifact, scope: this.scope, tenant: labels.tenant }),
      (seq, hash) => {
        audited = this.audit.append(type, record, digest, entryId(seq, hash), recordJson);
        audited.catch(() => undefined); // awaited below; never an unhandled rejection meanwhile
      },
    );
    const ledgerEntryId = entryId(receipt.seq, receipt.entryHash);
    const event = await (audited ?? this.audit.append(type, record, digest, ledgerEntryId, recordJson));
    return { digest, ledgerEntryId, receipt, event };
  }

  /**
   * Refuses new recordings and waits for those in flight (their entries are in the sequencer, which is still
   * running when the control plane closes), so that no anchored decision misses its audit event.
   */
  async drain(timeoutMs = 10_000): Promise<boolean> {
    this.closing = true;
    const deadline = Date.now() + timeoutMs;
    while (this.inflight.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await Promise.race([Promise.allSettled([...this.inflight]), new Promise((r) => setTimeout(r, left).unref())]);
    }
    return true;
  }
}
