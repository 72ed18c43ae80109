// The C2SP tlog-witness wire format: the add-checkpoint request body
//   old <size>\n  <base64 proof hash>\n …  \n  <checkpoint note>
// the status of each refusal (`refuse`), and the monitoring path.
import { HASH_SIZE, sha256, toBase64, toHex } from '../core/hash.js';

/** The protocol allows at most 63 consistency proof lines. */
export const MAX_PROOF_LINES = 63;
/**
 * Request bodies beyond this are refused before parsing. signed-note: verifiers "MUST accept
 * at least up to 16 signatures ... post-quantum signatures can be up to nearly 5kB", so a
 * checkpoint carrying other witnesses' ML-DSA cosignatures must fit: 16 such lines in base64
 * plus 63 proof lines stay under 128 KiB.
 */
export const MAX_REQUEST_BYTES = 128 * 1024;
export const SIZE_CONTENT_TYPE = 'text/x.tlog.size';

/**
 * The monitoring path is "GET <monitoring prefix>/<origin hash>/checkpoint", where "The origin
 * hash is the SHA-256 hash of the log's origin, hex encoded, in lowercase" (Monitor Retrieval
 * Mechanism). This witness uses its one URL as both submission and monitoring prefix.
 */
export function originHash(origin: string): string {
  return toHex(sha256(new TextEncoder().encode(origin)));
}

/** Matches a monitoring path; group 1 is the origin hash. */
export const MONITORING_PATH = /^\/([0-9a-f]{64})\/checkpoint$/;

export type WitnessStatus = 400 | 403 | 404 | 409 | 422;

export class WitnessError extends Error {
  override name = 'WitnessError';
  constructor(
    /** One of the statuses of `refuse` below. */
    readonly status: WitnessStatus,
    message: string,
    /** For a stale old size: the size the witness holds (sent as text/x.tlog.size). */
    readonly knownSize?: number,
  ) {
    super(message);
  }
}

/**
 * Every refusal of add-checkpoint and its status, as the current tlog-witness text fixes
 * them (the one place the codes are chosen). The request grammar is the same as in v1.0.0,
 * so what v1.0.0 clients send is read alike; the codes that moved since (a second root for
 * the held size, and proof lines after `old 0`, were 409 and 400) are 422 now.
 */
export const refuse = {
  /**
   * A body outside the request grammar, or a checkpoint that is not a checkpoint note: 400
   * Bad Request, the code the text gives an invalid sign-subtree request and an old size
   * above the checkpoint's (add-checkpoint names no code for a garbled body).
   */
  malformed: (why: string) => new WitnessError(400, why),
  /** "If the checkpoint origin is unknown, the witness MUST respond with a "404 Not Found"". */
  unknownLog: (origin: string) => new WitnessError(404, `unknown log ${origin}`),
  /**
   * "403 Forbidden ... if either no signature from a trusted key for the origin is present, or
   * a signature line's key name and ID match a trusted key but the signature itself fails to
   * verify (such a note is malformed per signed-note)".
   */
  unsigned: (why: string) => new WitnessError(403, why),
  /** "The old size MUST be equal to or lower than the checkpoint size. Otherwise ... 400". */
  oldSizeAbove: (old: number, size: number) => new WitnessError(400, `old size ${old} exceeds checkpoint size ${size}`),
  /**
   * "If it doesn't match, the witness MUST respond with a "409 Conflict" ... The response body
   * MUST consist of the tree size of the latest cosigned checkpoint in decimal, followed by a
   * newline ... Content-Type of text/x.tlog.size".
   */
  staleOldSize: (held: number, why: string) => new WitnessError(409, why, held),
  /** "A checkpoint of size zero MUST have the root hash of the empty tree ... Otherwise ... 422". */
  nonEmptyRootAtZero: () =>
    new WitnessError(422, 'a checkpoint of size 0 must have the empty-tree root (SHA-256 of the empty string)'),
  /** "If the proof is not empty when the old size is zero ... 422 Unprocessable Entity". */
  proofAfterZero: () => new WitnessError(422, 'the consistency proof must be empty when the old size is 0'),
  /** "... or if a Merkle Consistency Proof doesn't verify, the witness MUST respond with a "422"". */
  badProof: (old: number, size: number) =>
    new WitnessError(422, `consistency proof from ${old} to ${size} does not verify`),
  /** "If the old size matches the checkpoint size ... root hashes ... If they don't match ... 422". */
  otherRoot: (size: number) => new WitnessError(422, `a different root for size ${size} was already cosigned`),
} as const;

export interface AddCheckpointRequest {
  readonly oldSize: number;
  readonly proof: Uint8Array[];
  readonly checkpoint: string;
}

const DECIMAL = /^(0|[1-9][0-9]{0,15})$/;

export function parseAddCheckpoint(body: string): AddCheckpointRequest {
  const bad = refuse.malformed;
  const nl = body.indexOf('\n');
  if (nl < 0) throw bad('missing old size line');
  const first = body.slice(0, nl);
  const m = /^old (.*)$/.exec(first);
  if (!m || !DECIMAL.test(m[1]!) || !Number.isSafeInteger(Number(m[1])))
    throw bad('old size line must be "old <decimal>"');
  const proof: Uint8Array[] = [];
  let at = nl + 1;
  for (;;) {
    const end = body.indexOf('\n', at);
    if (end < 0) throw bad('missing empty line before the checkpoint');
    const line = body.slice(at, end);
    at = end + 1;
    if (line === '') break;
    const h = Buffer.from(line, 'base64');
    if (h.length !== HASH_SIZE || h.toString('base64') !== line)
      throw bad('consistency proof lines must be base64 of 32 bytes');
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
