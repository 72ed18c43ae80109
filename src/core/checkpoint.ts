// The signed checkpoint the log publishes (its JSON view is in src/api/views.ts); the body
// format itself is in checkpoint-body.ts, re-exported here.
import { type CheckpointBody, formatCheckpointBody, parseCheckpointBody } from './checkpoint-body.js';
import { NoteError, type NoteSigner, type NoteVerifier, openNote, signBody } from './note.js';

export {
  type CheckpointBody,
  type ExtendedCheckpointBody,
  formatCheckpointBody,
  parseCheckpointBody,
  parseExtendedCheckpointBody,
} from './checkpoint-body.js';

/** A checkpoint whose log signature has been made or checked. */
export interface SignedCheckpoint extends CheckpointBody {
  /** The whole signed note, as published at `checkpoint`. */
  readonly note: string;
  /** The 64-byte log signature over the body. */
  readonly signature: Uint8Array;
}

export async function signCheckpoint(c: CheckpointBody, signer: NoteSigner): Promise<SignedCheckpoint> {
  if (c.origin !== signer.name) throw new NoteError(`signer ${signer.name} cannot sign for origin ${c.origin}`);
  const body = formatCheckpointBody(c);
  const { line, signature } = await signBody(body, signer);
  return { ...c, note: `${body}\n${line}`, signature };
}

/** Opens a checkpoint note: log signature required, origin must be the key's name. */
export function openCheckpoint(note: string, logKey: NoteVerifier, witnesses: readonly NoteVerifier[] = []) {
  const opened = openNote(note, logKey, witnesses);
  const body = parseCheckpointBody(opened.body);
  if (body.origin !== logKey.name)
    throw new NoteError(`checkpoint origin ${body.origin} is not the pinned log ${logKey.name}`);
  return { ...body, note, signature: opened.log.signature, cosignatures: opened.cosignatures };
}
