// The cosigners a Stele log advertises (its witnesses and mirrors: the witness lines of the
// policy at <log URL>/api/ledger/key), for a mirror that keeps their cosignatures with its
// copy so the copy verifies under the policy clients pinned. Read when a checkpoint brings
// cosignatures, and at most once a minute (every 10 s while the log cannot be read: a log
// that is starting answers 503); the keys last read stay in use meanwhile.
import { type NoteVerifier, parseVkey } from '../core/note.js';
import { parsePolicy } from '../core/tlog-policy.js';

const FRESH_MS = 60_000;
const RETRY_MS = 10_000;
const TIMEOUT_MS = 2_000;

export type CosignerKeys = () => Promise<readonly NoteVerifier[]>;

/** The keys of the policy the log at `logUrl` advertises; none until it has been read. */
export function advertisedCosigners(logUrl: string, now: () => number = Date.now): CosignerKeys {
  let keys: readonly NoteVerifier[] = [];
  let readAt = Number.NEGATIVE_INFINITY;
  let wait = 0;
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
      wait = FRESH_MS;
    } catch {
      wait = RETRY_MS;
    }
    readAt = now();
  };
  return async () => {
    if (now() - readAt >= wait) {
      reading ??= read().finally(() => (reading = null));
      await reading;
    }
    return keys;
  };
}
