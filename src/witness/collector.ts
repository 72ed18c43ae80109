// The log side of witnessing: sends each new checkpoint to the configured witnesses in
// parallel (with the consistency proof from the size each last cosigned), verifies the
// cosignatures that come back, and reports whether the policy is met (M of N, or a
// tlog-policy quorum: src/core/tlog-policy.ts). A witness that
// has cosigned a larger tree than the log now presents is proof that the log was rolled
// back: that is an error of its own (WitnessRollbackError), never an ordinary failed round.
import type { SignedCheckpoint } from '../core/checkpoint.js';
import { type NoteVerifier, parseNote, verifySignature } from '../core/note.js';
import { type CheckpointWitnessing, LogStateError } from '../sequencer/contract.js';
import { SIZE_CONTENT_TYPE, formatAddCheckpoint } from './protocol.js';

export interface WitnessEndpoint {
  /** Cosignature verifier (type 0x04); its name is the witness's name. */
  readonly verifier: NoteVerifier;
  /** Submission prefix: POST <url>/add-checkpoint. */
  readonly url: string;
}

export interface WitnessPolicy {
  readonly witnesses: readonly WitnessEndpoint[];
  /** Cosignatures required before a checkpoint is published (M of N); ignored when `quorum` is given. */
  readonly threshold?: number;
  /**
   * Whether the witnesses that cosigned (by verifier name) are enough to publish: a
   * tlog-policy quorum (quorumMet in src/core/tlog-policy.ts). Default: at least `threshold` of them.
   */
  readonly quorum?: (cosigned: ReadonlySet<string>) => boolean;
  /** Deadline for one round of requests, in ms (default 5,000). */
  readonly timeoutMs?: number;
  /** Told, at start, of a witness that cannot be asked (the log starts anyway; its publishes wait for the quorum). */
  readonly onUnreachable?: (name: string, url: string, reason: string) => void;
}

export interface WitnessOutcome {
  readonly name: string;
  readonly ok: boolean;
  readonly reason?: string;
}

/** Stale-size retries per witness per round (a 409 tells us the size it holds). */
const MAX_ATTEMPTS = 3;

/**
 * A cosigner (a witness, or a mirror) holds a larger tree of this log (`witnessSize`) than the
 * checkpoint the log is presenting (`logSize`), or, `forked`, a checkpoint the log signed at a
 * size it has with another root: the log's state went backwards (a lock or a data directory
 * restored from an old backup, or lost and started again), and entries that party saw are
 * missing from it.
 *
 * Contract: thrown by WitnessCollector.cosign() and checkWitnessedSizes(), and by the mirror
 * pusher (src/mirror/pusher.ts) for a mirror, instead of a failed round. It is not transient:
 * the caller must not retry or publish anything below `witnessSize` (that would fork the log
 * in that party's eyes); the sequencer stops with it and the operator recovers the log from
 * what was published (`stele log recover`). The size is the party's 409 answer, which the
 * protocol does not sign: a configured party that lies can halt the log this way, which is
 * the safe direction (a halt, never a fork).
 */
export class WitnessRollbackError extends LogStateError {
  override name = 'WitnessRollbackError';
  constructor(
    readonly witness: string,
    readonly witnessSize: number,
    readonly logSize: number,
    readonly role: 'witness' | 'mirror' = 'witness',
    readonly forked = false,
  ) {
    // A mirror's copy holds the entries the log lost; a witness holds only a checkpoint.
    const recover =
      role === 'mirror'
        ? `the mirror's copy holds the entries this log lost: restore the log from a newer backup or from that copy`
        : 'recover the log from its published state';
    super(
      forked
        ? `${role} ${witness} holds a checkpoint of size ${witnessSize} signed by this log with another root than the log's own at that size (the log is at size ${logSize}): the log was rolled back and grew another tree; refusing to publish (${recover})`
        : `${role} ${witness} has ${role === 'witness' ? 'cosigned' : 'seen'} size ${witnessSize} of this log, more than the checkpoint of size ${logSize} now presented: the log was rolled back; refusing to publish below ${witnessSize} (${recover})`,
    );
  }
}

/** What one witness holds of this log, as checkWitnessedSizes found it. */
export interface WitnessedSize {
  readonly name: string;
  /**
   * same: it cosigned this very checkpoint; behind: a smaller size (`size`); forked: this
   * size with another root; unknown: no usable answer (`reason`). ahead (a larger size) is
   * never returned: checkWitnessedSizes throws WitnessRollbackError.
   */
  readonly status: 'same' | 'behind' | 'ahead' | 'forked' | 'unknown';
  readonly size?: number;
  readonly reason?: string;
}

/** One add-checkpoint exchange: the status, and the witness's size when it sent one (409). */
export interface Answer {
  readonly status: number;
  readonly text: string;
  readonly size?: number;
}

export class WitnessCollector implements CheckpointWitnessing {
  /** The size each witness last cosigned, as far as we know; 0 asks it to tell us. */
  private readonly known = new Map<string, number>();
  lastRound: WitnessOutcome[] = [];
  private readonly met: (cosigned: ReadonlySet<string>) => boolean;

  constructor(private readonly policy: WitnessPolicy) {
    if ((policy.threshold ?? 0) > policy.witnesses.length)
      throw new Error('witness threshold exceeds the number of witnesses');
    const names = new Set(policy.witnesses.map((w) => w.verifier.name));
    // Rounds, sizes and the quorum all go by witness name.
    if (names.size !== policy.witnesses.length) throw new Error('two witnesses share a key name');
    this.met = policy.quorum ?? ((cosigned) => cosigned.size >= (policy.threshold ?? policy.witnesses.length));
  }

  /** The cosigned note, or null while the policy is unmet; throws WitnessRollbackError (see there). */
  async cosign(
    checkpoint: SignedCheckpoint,
    consistencyFrom: (oldSize: number) => Promise<Uint8Array[]>,
  ): Promise<string | null> {
    const signal = AbortSignal.timeout(this.policy.timeoutMs ?? 5000);
    const results = await Promise.all(
      this.policy.witnesses.map((w) =>
        this.ask(w, checkpoint, consistencyFrom, signal).then(
          (line) => ({ name: w.verifier.name, ok: true, line, error: undefined }),
          (e: unknown) => ({ name: w.verifier.name, ok: false, line: '', error: e as Error }),
        ),
      ),
    );
    this.lastRound = results.map(({ name, ok, error }) => ({ name, ok, ...(error ? { reason: error.message } : {}) }));
    const rollback = results.find((r) => r.error instanceof WitnessRollbackError);
    if (rollback) throw rollback.error;
    const ok = results.filter((r) => r.ok);
    if (!this.met(new Set(ok.map((r) => r.name)))) return null;
    return checkpoint.note + ok.map((r) => r.line).join('');
  }

  /**
   * Asks every witness which size of this log it last cosigned (probeHeldSize, which moves no
   * witness), for a log starting up with `checkpoint` (its latest, already signed; size 0 for
   * a new log), and throws WitnessRollbackError if one holds more. The sizes learnt also save
   * the first cosign round its 409s.
   */
  async checkWitnessedSizes(checkpoint: SignedCheckpoint): Promise<WitnessedSize[]> {
    const signal = AbortSignal.timeout(this.policy.timeoutMs ?? 5000);
    const found = await Promise.all(this.policy.witnesses.map((w) => probeHeldSize(w, checkpoint, signal)));
    for (const [i, f] of found.entries())
      if (f.status === 'unknown') this.policy.onUnreachable?.(f.name, this.policy.witnesses[i]!.url, f.reason ?? '');
    for (const f of found) if (f.status === 'same' || f.status === 'behind') this.known.set(f.name, f.size!);
    const ahead = found.find((f) => f.status === 'ahead');
    if (ahead) throw new WitnessRollbackError(ahead.name, ahead.size!, checkpoint.size);
    return found;
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
      const { status, text, size } = await postAddCheckpoint(w.url, old, proof, cp.note, signal);
      if (size !== undefined) {
        if (size > cp.size) throw new WitnessRollbackError(w.verifier.name, size, cp.size);
        if (size === old) throw new Error(`witness refused size ${cp.size}: it cosigned a different root`);
        this.known.set(w.verifier.name, size);
        continue;
      }
      // The current tlog-witness text answers 422 where v1.0.0 answered 409 with the held size.
      if (status === 422 && old === cp.size)
        throw new Error(`witness refused size ${cp.size}: it cosigned a different root`);
      if (status !== 200) throw new Error(`witness answered ${status}: ${text.trim().slice(0, 200)}`);
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

/**
 * Which size of this log the cosigner at `w` (a witness or a mirror: both answer
 * add-checkpoint alike) holds, for a log presenting `cp`, its latest signed checkpoint. It
 * moves nobody: old size = the checkpoint's own size is accepted only by a party that already
 * holds exactly that checkpoint (it answers 200, its state unchanged); at any other size it
 * answers 409 with the size it holds, before looking at the tree. (Old size 0 would instead
 * make a party that never saw the log take this checkpoint, the one case where a rolled-back
 * log could bind it to its state.) Network failures come back as status unknown.
 */
export async function probeHeldSize(
  w: WitnessEndpoint,
  cp: SignedCheckpoint,
  signal: AbortSignal,
): Promise<WitnessedSize> {
  const name = w.verifier.name;
  let answer: Answer;
  try {
    answer = await postAddCheckpoint(w.url, cp.size, [], cp.note, signal);
  } catch (e) {
    return { name, status: 'unknown', reason: (e as Error).message };
  }
  if (answer.status === 200) return { name, status: 'same', size: cp.size };
  // The current tlog-witness text answers 422 for another root at the same size; v1.0.0 answered 409 with that size.
  if (answer.status === 422 || answer.size === cp.size)
    return { name, status: 'forked', size: cp.size, reason: answer.text.trim().slice(0, 200) };
  if (answer.size === undefined)
    return { name, status: 'unknown', reason: `answered ${answer.status}: ${answer.text.trim().slice(0, 200)}` };
  if (answer.size > cp.size) return { name, status: 'ahead', size: answer.size };
  return { name, status: 'behind', size: answer.size };
}

/** A 409 whose body is not a size: the party answered outside the protocol. */
export class MalformedSizeError extends Error {
  override name = 'MalformedSizeError';
}

/** POSTs one add-checkpoint to `url`; a 409 carrying the party's size (text/x.tlog.size) comes back as `size`. */
export async function postAddCheckpoint(
  url: string,
  oldSize: number,
  proof: Uint8Array[],
  note: string,
  signal?: AbortSignal,
): Promise<Answer> {
  const res = await fetch(`${url.replace(/\/$/, '')}/add-checkpoint`, {
    method: 'POST',
    body: formatAddCheckpoint({ oldSize, proof, checkpoint: note }),
    ...(signal ? { signal } : {}),
  });
  const text = await res.text();
  if (res.status !== 409 || !res.headers.get('content-type')?.startsWith(SIZE_CONTENT_TYPE))
    return { status: res.status, text };
  const size = Number(text.trim());
  if (!/^[0-9]+\n?$/.test(text) || !Number.isSafeInteger(size))
    throw new MalformedSizeError(`sent a malformed size ${JSON.stringify(text.slice(0, 40))}`);
  return { status: res.status, text, size };
}
