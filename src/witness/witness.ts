// A tlog-witness cosigner. Per followed log (origin + vkey) it keeps the latest size and
// root it cosigned, and never cosigns a checkpoint inconsistent with them. Check-and-update
// is atomic: serialised per log in this process, and a compare-and-swap on the state file
// across processes, persisted before the cosignature is returned.
import { parseCheckpointBody } from '../checkpoint.js';
import { toHex } from '../hash.js';
import { verifyConsistency } from '../merkle.js';
import { type NoteSigner, type NoteVerifier, NoteError, cosignBody, parseNote, verifySignature } from '../note.js';
import type { ObjectStore } from '../store/store.js';
import { VersionConflictError } from '../store/store.js';
import { type AddCheckpointRequest, WitnessError } from './protocol.js';

interface LogState {
  size: number;
  root: string;
}

export interface WitnessOptions {
  readonly signer: NoteSigner;
  /** The logs this witness follows, keyed by origin. */
  readonly logs: readonly NoteVerifier[];
  /** Durable state: one object per log. */
  readonly state: ObjectStore;
  readonly now?: () => number;
}

const stateKey = (origin: string) => `logs/${Buffer.from(origin).toString('hex')}.json`;

export class Witness {
  private readonly logs = new Map<string, NoteVerifier>();
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(private readonly o: WitnessOptions) {
    for (const v of o.logs) this.logs.set(v.name, v);
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

  /** Verifies and cosigns; returns the cosignature line(s), or throws WitnessError. */
  async addCheckpoint(req: AddCheckpointRequest): Promise<string> {
    let note;
    let body;
    try {
      note = parseNote(req.checkpoint);
      body = parseCheckpointBody(note.body);
    } catch (e) {
      throw new WitnessError(400, `malformed checkpoint: ${(e as NoteError).message}`);
    }
    const log = this.logs.get(body.origin);
    if (!log) throw new WitnessError(404, `unknown log ${body.origin}`);
    const signed = note.signatures.some((s) => verifySignature(note.body, s, log) !== null);
    if (!signed) throw new WitnessError(403, `no valid signature by ${log.name}`);
    if (req.oldSize > body.size) throw new WitnessError(400, `old size ${req.oldSize} exceeds checkpoint size ${body.size}`);
    if (req.oldSize === 0 && req.proof.length > 0) throw new WitnessError(400, 'the proof must be empty when old size is 0');

    // One request per log at a time in this process; the swap guards across processes.
    const prev = this.queues.get(body.origin) ?? Promise.resolve();
    const run = prev.then(
      () => this.advance(body.origin, req, body.size, body.root, note.body),
      () => this.advance(body.origin, req, body.size, body.root, note.body),
    );
    this.queues.set(body.origin, run.catch(() => undefined));
    return run;
  }

  private async advance(origin: string, req: AddCheckpointRequest, size: number, root: Uint8Array, noteBody: string): Promise<string> {
    const held = await this.stateOf(origin);
    if (req.oldSize !== held.size) throw new WitnessError(409, `witness holds size ${held.size}, not ${req.oldSize}`, held.size);
    if (held.size === size && held.version !== null) {
      if (held.root !== toHex(root)) throw new WitnessError(409, `a different root for size ${size} was already cosigned`, held.size);
    } else if (held.size > 0) {
      if (!verifyConsistency(held.size, size, req.proof, Buffer.from(held.root, 'hex'), root)) {
        throw new WitnessError(422, `consistency proof from ${held.size} to ${size} does not verify`);
      }
    }
    try {
      await this.o.state.swap(stateKey(origin), Buffer.from(JSON.stringify({ size, root: toHex(root) })), held.version);
    } catch (e) {
      if (e instanceof VersionConflictError) {
        const now = await this.stateOf(origin);
        throw new WitnessError(409, `witness state moved to size ${now.size}`, now.size);
      }
      throw e;
    }
    const seconds = Math.floor((this.o.now ?? Date.now)() / 1000);
    return cosignBody(noteBody, this.o.signer, seconds);
  }
}

