// The cosigners a Stele log advertises (its witnesses and mirrors: the witness lines of the
// policy at <log URL>/api/ledger/key), for a mirror that keeps their cosignatures with its
// copy so the copy verifies under the policy clients pinned. Read when a checkpoint brings
// cosignatures, at most once a minute once read; a read that failed (a log that is starting
// answers 503) is tried again with the next checkpoint, so no cosignature is dropped for
// want of keys a moment later readable. Reads at once are one read.
import { type NoteVerifier, parseVkey } from '../core/note.js';
import { parsePolicy } from '../core/tlog-policy.js';

const FRESH_MS = 60_000;
/** Keys read longer ago are read again for a checkpoint that brings a cosignature under none of them. */
const RECHECK_MS = 5_000;
const TIMEOUT_MS = 5_000;

/** The keys; `unknownSeen`: a cosignature came under none of them (the log's policy may have changed). */
export type CosignerKeys = (unknownSeen?: boolean) => Promise<readonly NoteVerifier[]>;

/** The keys of the policy the log at `logUrl` advertises; none until it has been read. */
export function advertisedCosigners(logUrl: string, now: () => number = Date.now): CosignerKeys {
  let keys: readonly NoteVerifier[] = [];
  let readAt = Number.NEGATIVE_INFINITY;
  let reading: Promise<void> | null = null;
  const read = async (): Promise<void> => {
    try {
      const res = await fetch(`${logUrl.replace(/\/$/, '')}/api/ledger/key`, {
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
      if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
      const doc = (await res.json()) as { witnessPolicy?: { policy?: unknown } };
      const text = doc.witnessPolicy?.policy;
      if (typeof text !== 'string') throw new Error('no witnessPolicy.policy');
      keys = parsePolicy(text).witnesses.map((w) => parseVkey(w.vkey));
      readAt = now();
    } catch {
      // Not read: the keys read before (if any) stay, and the next checkpoint asks again.
    }
  };
  return async (unknownSeen = false) => {
    if (now() - readAt >= (unknownSeen ? RECHECK_MS : FRESH_MS)) {
      reading ??= read().finally(() => (reading = null));
      await reading;
    }
    return keys;
  };
}
