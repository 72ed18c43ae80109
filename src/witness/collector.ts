// The log side of witnessing: sends each new checkpoint to the configured witnesses in
// parallel (with the consistency proof from the size each last cosigned), verifies the
// cosignatures that come back, and reports whether the M-of-N policy is met.
import type { SignedCheckpoint } from '../checkpoint.js';
import { type NoteVerifier, parseNote, verifySignature } from '../note.js';
import type { CheckpointWitnessing } from '../sequencer/sequencer.js';
import { SIZE_CONTENT_TYPE, formatAddCheckpoint } from './protocol.js';

export interface WitnessEndpoint {
  /** Cosignature verifier (type 0x04); its name is the witness's name. */
  readonly verifier: NoteVerifier;
  /** Submission prefix: POST <url>/add-checkpoint. */
  readonly url: string;
}

export interface WitnessPolicy {
  readonly witnesses: readonly WitnessEndpoint[];
  /** Cosignatures required before a checkpoint is published (M of N). */
  readonly threshold: number;
  /** Deadline for one round of requests, in ms (default 5,000). */
  readonly timeoutMs?: number;
}

export interface WitnessOutcome {
  readonly name: string;
  readonly ok: boolean;
  readonly reason?: string;
}

/** Stale-size retries per witness per round (a 409 tells us the size it holds). */
const MAX_ATTEMPTS = 3;

export class WitnessCollector implements CheckpointWitnessing {
  /** The size each witness last cosigned, as far as we know; 0 asks it to tell us. */
  private readonly known = new Map<string, number>();
  lastRound: WitnessOutcome[] = [];

  constructor(private readonly policy: WitnessPolicy) {
    if (policy.threshold > policy.witnesses.length) throw new Error('witness threshold exceeds the number of witnesses');
  }

  async cosign(checkpoint: SignedCheckpoint, consistencyFrom: (oldSize: number) => Promise<Uint8Array[]>): Promise<string | null> {
    const signal = AbortSignal.timeout(this.policy.timeoutMs ?? 5000);
    const results = await Promise.all(
      this.policy.witnesses.map((w) =>
        this.ask(w, checkpoint, consistencyFrom, signal).then(
          (line) => ({ name: w.verifier.name, ok: true, line, reason: '' }),
          (e: unknown) => ({ name: w.verifier.name, ok: false, line: '', reason: (e as Error).message }),
        ),
      ),
    );
    this.lastRound = results.map(({ name, ok, reason }) => ({ name, ok, ...(reason ? { reason } : {}) }));
    const lines = results.filter((r) => r.ok).map((r) => r.line);
    if (lines.length < this.policy.threshold) return null;
    return checkpoint.note + lines.join('');
  }

  private async ask(
    w: WitnessEndpoint,
    cp: SignedCheckpoint,
    consistencyFrom: (oldSize: number) => Promise<Uint8Array[]>,
    signal: AbortSignal,
  ): Promise<string> {
    const body = cp.note.slice(0, cp.note.indexOf('\n\n') + 1);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const old = Math.min(this.known.get(w.verifier.name) ?? 0, cp.size);
      const proof = old === 0 || old === cp.size ? [] : await consistencyFrom(old);
      const res = await fetch(`${w.url.replace(/\/$/, '')}/add-checkpoint`, {
        method: 'POST',
        body: formatAddCheckpoint({ oldSize: old, proof, checkpoint: cp.note }),
        signal,
      });
      const text = await res.text();
      if (res.status === 409 && res.headers.get('content-type')?.startsWith(SIZE_CONTENT_TYPE)) {
        const size = Number(text.trim());
        if (!Number.isSafeInteger(size) || size < 0) throw new Error(`witness sent a malformed size ${JSON.stringify(text)}`);
        if (size > cp.size) throw new Error(`witness holds size ${size}, beyond this checkpoint (${cp.size}): a rollback or fork`);
        if (size === old) throw new Error(`witness refused size ${cp.size}: it cosigned a different root`);
        this.known.set(w.verifier.name, size);
        continue;
      }
      if (res.status !== 200) throw new Error(`witness answered ${res.status}: ${text.trim().slice(0, 200)}`);
      // Keep only lines that verify under this witness's key over this checkpoint.
      const sigs = parseNote(`${body}\n${text}`).signatures;
      const good = sigs.find((s) => verifySignature(body, s, w.verifier) !== null);
      if (!good) throw new Error('witness returned no valid cosignature');
      this.known.set(w.verifier.name, cp.size);
      return good.line;
    }
    throw new Error('witness kept reporting a stale size');
  }
}
