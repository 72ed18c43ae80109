// The C2SP tlog-witness add-checkpoint wire format: request body and status codes.
//   old <size>\n  <base64 proof hash>\n …  \n  <checkpoint note>
import { HASH_SIZE, toBase64 } from '../hash.js';

/** The protocol allows at most 63 consistency proof lines. */
export const MAX_PROOF_LINES = 63;
/** Request bodies beyond this are refused before parsing. */
export const MAX_REQUEST_BYTES = 64 * 1024;
export const SIZE_CONTENT_TYPE = 'text/x.tlog.size';

export class WitnessError extends Error {
  override name = 'WitnessError';
  constructor(
    /** 400 malformed, 403 bad log signature, 404 unknown log, 409 stale old size or root mismatch, 422 bad proof. */
    readonly status: 400 | 403 | 404 | 409 | 422,
    message: string,
    /** For a stale old size: the size the witness holds (sent as text/x.tlog.size). */
    readonly knownSize?: number,
  ) {
    super(message);
  }
}

export interface AddCheckpointRequest {
  readonly oldSize: number;
  readonly proof: Uint8Array[];
  readonly checkpoint: string;
}

const DECIMAL = /^(0|[1-9][0-9]{0,15})$/;

export function parseAddCheckpoint(body: string): AddCheckpointRequest {
  const bad = (m: string) => new WitnessError(400, m);
  const nl = body.indexOf('\n');
  if (nl < 0) throw bad('missing old size line');
  const first = body.slice(0, nl);
  const m = /^old (.*)$/.exec(first);
  if (!m || !DECIMAL.test(m[1]!) || !Number.isSafeInteger(Number(m[1]))) throw bad('old size line must be "old <decimal>"');
  const proof: Uint8Array[] = [];
  let at = nl + 1;
  for (;;) {
    const end = body.indexOf('\n', at);
    if (end < 0) throw bad('missing empty line before the checkpoint');
    const line = body.slice(at, end);
    at = end + 1;
    if (line === '') break;
    const h = Buffer.from(line, 'base64');
    if (h.length !== HASH_SIZE || h.toString('base64') !== line) throw bad('consistency proof lines must be base64 of 32 bytes');
    if (proof.length === MAX_PROOF_LINES) throw bad(`more than ${MAX_PROOF_LINES} consistency proof lines`);
    proof.push(new Uint8Array(h));
  }
  const checkpoint = body.slice(at);
  if (checkpoint.length === 0) throw bad('missing checkpoint');
  return { oldSize: Number(m[1]), proof, checkpoint };
}

export function formatAddCheckpoint(r: AddCheckpointRequest): string {
  return `old ${r.oldSize}\n${r.proof.map((h) => `${toBase64(h)}\n`).join('')}\n${r.checkpoint}`;
}
