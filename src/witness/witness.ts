// A tlog-witness cosigner. Per followed log (origin + vkey) it keeps the latest checkpoint it
// cosigned (size, root, and the note it serves at the monitoring path), and never cosigns a
// checkpoint inconsistent with it. Check-and-update is atomic: serialised per log in this
// process, and a compare-and-swap on the state file across processes, persisted before the
// cosignature is returned. The status of every refusal is chosen in protocol.ts (`refuse`).
import { type ExtendedCheckpointBody, parseExtendedCheckpointBody } from '../core/checkpoint.js';
import { EMPTY_ROOT, bytesEqual, toHex } from '../core/hash.js';
import { checkConsistencyProof } from '../core/verify/index.js';
import { type NoteSigner, type NoteVerifier, type NoteError, cosignBody, openNote, parseNote } from '../core/note.js';
import type { ObjectStore } from '../store/store.js';
import { VersionConflictError } from '../store/store.js';
import { type AddCheckpointRequest, originHash, refuse } from './protocol.js';

interface LogState {
  size: number;
  /** Hex root of `size`. */
  root: string;
  /**
   * The cosigned checkpoint as the monitoring path serves it: the body, the log's signature
   * line(s) the witness verified, and its own cosignature. Absent in state written before
   * the monitoring path existed (until the next cosignature).
   */
  checkpoint?: string;
}

export interface WitnessOptions {
  readonly signer: NoteSigner;
  /** The logs this witness follows, keyed by origin. */
  readonly logs: readonly NoteVerifier[];
  /** Durable state: one object per log. */
  readonly state: ObjectStore;
  readonly now?: () => number;
}

/** A checkpoint whose log signature verified, as add-checkpoint goes on with it. */
/** A checkpoint presented to a cosigner (a witness or a mirror), its log's signature checked. */
export interface OpenedCheckpoint extends ExtendedCheckpointBody {
  /** The note body, extension lines included: what the cosignature signs. */
  readonly body: string;
  /** The signature lines by the log's key (all verified), for the monitoring path. */
  readonly logLines: string;
}

/**
 * Parses a presented checkpoint (400), finds its log among those the cosigner knows (404) and
 * checks the log's signature (403). openNote applies signed-note's rule (one home): lines
 * under other keys are ignored, a line under the log's name and key ID must verify, and one
 * must be present.
 */
export function openPresentedCheckpoint(
  text: string,
  logFor: (origin: string) => NoteVerifier | undefined,
): OpenedCheckpoint {
  let note;
  let body;
  try {
    note = parseNote(text);
    body = parseExtendedCheckpointBody(note.body);
  } catch (e) {
    throw refuse.malformed(`malformed checkpoint: ${(e as NoteError).message}`);
  }
  const log = logFor(body.origin);
  if (!log) throw refuse.unknownLog(body.origin);
  try {
    openNote(text, log);
  } catch (e) {
    throw refuse.unsigned((e as NoteError).message);
  }
  const logLines = note.signatures
    .filter((s) => s.name === log.name && bytesEqual(s.keyHash, log.keyHash))
    .map((s) => s.line);
  return { ...body, body: note.body, logLines: logLines.join('') };
}

const stateKey = (origin: string) => `logs/${Buffer.from(origin).toString('hex')}.json`;

export class Witness {
  private readonly logs = new Map<string, NoteVerifier>();
  /** Origin by lowercase hex SHA-256(origin), for the monitoring path. */
  private readonly byHash = new Map<string, string>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly o: WitnessOptions) {
    for (const v of o.logs) {
      this.logs.set(v.name, v);
      this.byHash.set(originHash(v.name), v.name);
    }
  }

  get name(): string {
    return this.o.signer.name;
  }

  /** The state held for a log (size 0 if it never cosigned one). */
  async stateOf(origin: string): Promise<LogState & { version: string | null }> {
    const obj = await this.o.state.getVersioned(stateKey(origin));
    if (!obj) return { size: 0, root: '', version: null };
    const s = JSON.parse(Buffer.from(obj.data).toString('utf8')) as LogState;
    return { ...s, version: obj.version };
  }

  /**
   * The latest cosigned checkpoint of the followed log whose origin hashes to `hash`, with the
   * log's signature and this witness's cosignature; null if it never cosigned one (or the log
   * is not followed): tlog-witness answers 404 then.
   */
  async latestCheckpoint(hash: string): Promise<string | null> {
    const origin = this.byHash.get(hash);
    return origin === undefined ? null : ((await this.stateOf(origin)).checkpoint ?? null);
  }

  /** Verifies and cosigns; returns the cosignature line(s), or throws WitnessError. */
  async addCheckpoint(req: AddCheckpointRequest): Promise<string> {
    const cp = openPresentedCheckpoint(req.checkpoint, (origin) => this.logs.get(origin));
    checkRequest(req, cp);
    // One request per log at a time in this process; the swap guards across processes.
    const prev = this.queues.get(cp.origin) ?? Promise.resolve();
    const step = () => this.advance(req, cp);
    const run = prev.then(step, step);
    this.queues.set(
      cp.origin,
      run.catch(() => undefined),
    );
    return run;
  }

  private async advance(req: AddCheckpointRequest, cp: OpenedCheckpoint): Promise<string> {
    const held = await this.stateOf(cp.origin);
    if (req.oldSize !== held.size)
      throw refuse.staleOldSize(held.size, `witness holds size ${held.size}, not ${req.oldSize}`);
    checkAgainstHeld(held, req, cp);
    const line = await cosignBody(cp.body, this.o.signer, this.timestamp());
    // The checkpoint it already holds (a log asking which size it holds, at start-up): the
    // state stays as it is, so asking moves nothing, not even the stored cosignature's time.
    if (held.version !== null && held.size === cp.size) return line;
    // The cosignature is made first so the monitoring path can serve it, and is returned only
    // once the state that includes it is persisted ("MUST persist ... before responding").
    const state: LogState = { size: cp.size, root: toHex(cp.root), checkpoint: `${cp.body}\n${cp.logLines}${line}` };
    try {
      await this.o.state.swap(stateKey(cp.origin), Buffer.from(JSON.stringify(state)), held.version);
    } catch (e) {
      if (e instanceof VersionConflictError) {
        const now = await this.stateOf(cp.origin);
        throw refuse.staleOldSize(now.size, `witness state moved to size ${now.size}`);
      }
      throw e;
    }
    return line;
  }

  /** "The cosignature MUST NOT omit the timestamp, i.e. the timestamp MUST NOT be zero." */
  private timestamp(): number {
    const seconds = Math.floor((this.o.now ?? Date.now)() / 1000);
    if (!(seconds > 0)) throw new Error(`refusing to cosign at time ${seconds}: the clock is wrong`);
    return seconds;
  }
}

/** The checks that need no state (shared with the mirror's add-checkpoint): old size against the checkpoint's, proof after `old 0`, the empty tree. */
export function checkRequest(req: AddCheckpointRequest, cp: ExtendedCheckpointBody): void {
  if (req.oldSize > cp.size) throw refuse.oldSizeAbove(req.oldSize, cp.size);
  // "If the old size is zero, the consistency proof MUST be empty, because the empty tree is
  // consistent with any tree".
  if (req.oldSize === 0 && req.proof.length > 0) throw refuse.proofAfterZero();
  // RFC 6962 §2.1: MTH({}) = SHA-256(). Without this a first checkpoint of size 0 would bind
  // the witness to an arbitrary root.
  if (cp.size === 0 && !bytesEqual(cp.root, EMPTY_ROOT)) throw refuse.nonEmptyRootAtZero();
}

/** The checks against what the witness holds (old size already equal to the held size). */
export function checkAgainstHeld(
  held: { size: number; root: string; version: string | null },
  req: AddCheckpointRequest,
  cp: ExtendedCheckpointBody,
): void {
  if (held.version !== null && held.size === cp.size) {
    if (held.root !== toHex(cp.root)) throw refuse.otherRoot(cp.size);
    // The proof from a size to itself is empty (RFC 9162 §2.1.4.1); anything else does not verify.
    if (req.proof.length > 0) throw refuse.badProof(held.size, cp.size);
  } else if (
    held.size > 0 &&
    !checkConsistencyProof({ size: held.size, root: Buffer.from(held.root, 'hex') }, cp, req.proof).ok
  ) {
    throw refuse.badProof(held.size, cp.size);
  }
}
