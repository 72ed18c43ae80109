// C2SP tlog-proof (`c2sp.org/tlog-proof@v1`, https://c2sp.org/tlog-proof): an
// offline-verifiable proof that an entry is in the log — index, inclusion proof, and the
// checkpoint note verbatim with its cosignatures — plus Stele's `extra` data, which takes a
// verifier from a package's SHA-256 to the leaf (docs/design.md §1.1).
//
// `extra` (the spec: "opaque extra data ... additional data necessary to reconstruct the
// record hash") is, in Stele, the bytes
//     prior_entry_hash (32 bytes) ‖ canonical_entry (RFC 8785 JSON, UTF-8)
// base64-encoded. The prior hash has a fixed length, so the split is unambiguous; the
// canonical entry is exactly what entry_hash commits to, so nothing is re-serialised.
// It is "not authenticated" (spec): it is trusted only once the entry hash recomputed from
// it is the leaf that the inclusion proof binds to the signed root (src/core/verify/tlog-proof.ts).
import { HASH_SIZE, fromBase64, toBase64 } from './hash.js';

export const TLOG_PROOF_HEADER = 'c2sp.org/tlog-proof@v1';
/** The media type Stele serves a proof file as (the spec names none; its suggested extension is `.tlog-proof`). */
export const TLOG_PROOF_MEDIA_TYPE = 'text/x.tlog-proof';
export const TLOG_PROOF_EXTENSION = '.tlog-proof';

export class TlogProofError extends Error {
  override name = 'TlogProofError';
}

export interface TlogProof {
  /** The opaque `extra` bytes; absent when the line is omitted. */
  readonly extra?: Uint8Array;
  readonly index: number;
  /** Inclusion proof, "starting from the leaf's sibling hash up to the root's child hash". */
  readonly proof: readonly Uint8Array[];
  /** The checkpoint note, verbatim (signature lines included, final newline included). */
  readonly checkpoint: string;
}

/** Formats a proof file exactly as tlog-proof §Format lays it out. */
export function formatTlogProof(p: TlogProof): string {
  if (!Number.isSafeInteger(p.index) || p.index < 0) throw new RangeError('index must be a non-negative integer');
  if (!p.proof.every((h) => h.length === HASH_SIZE)) throw new RangeError('inclusion proof hashes must be 32 bytes');
  if (!p.checkpoint.endsWith('\n')) throw new RangeError('checkpoint note must end with a newline');
  const lines = [TLOG_PROOF_HEADER];
  // "If no extra data is present, this line is omitted."
  if (p.extra !== undefined && p.extra.length > 0) lines.push(`extra ${toBase64(p.extra)}`);
  lines.push(`index ${p.index}`, ...p.proof.map(toBase64), '');
  return `${lines.join('\n')}\n${p.checkpoint}`;
}

/** Parses a proof file; throws TlogProofError (one line) on anything the spec does not allow. */
export function parseTlogProof(text: string): TlogProof {
  const bad = (what: string): never => {
    throw new TlogProofError(`not a ${TLOG_PROOF_HEADER} proof: ${what}`);
  };
  const lines = text.split('\n');
  // "The first line MUST be the string `c2sp.org/tlog-proof@v1`."
  if (lines[0] !== TLOG_PROOF_HEADER) bad('the first line is not the header');
  let i = 1;
  let extra: Uint8Array | undefined;
  // "The second line MAY start with the string `extra` followed by a space ... and base64".
  if (lines[i]?.startsWith('extra ')) {
    const b = fromBase64(lines[i]!.slice('extra '.length));
    if (!b || b.length === 0) bad('the extra line is not base64 of some bytes');
    extra = b!;
    i++;
  }
  // "`index` followed by a space ... ASCII decimal with no leading zeroes (unless ... `0`)".
  const m = /^index (0|[1-9][0-9]{0,15})$/.exec(lines[i] ?? '');
  if (!m || !Number.isSafeInteger(Number(m[1]))) bad('no canonical "index <n>" line');
  const index = Number(m![1]);
  i++;
  // "The next zero or more non-empty lines are the base64-encoded Merkle inclusion proof ...
  // one SHA-256 hash per line".
  const proof: Uint8Array[] = [];
  for (; i < lines.length && lines[i] !== ''; i++) {
    const h = fromBase64(lines[i]!);
    if (!h || h.length !== HASH_SIZE) bad(`inclusion proof line ${proof.length + 1} is not base64 of 32 bytes`);
    proof.push(h!);
  }
  // "After the inclusion proof lines and an empty line, the checkpoint ... verbatim".
  if (i >= lines.length) bad('no empty line before the checkpoint');
  const checkpoint = lines.slice(i + 1).join('\n');
  if (checkpoint === '' || !checkpoint.endsWith('\n')) bad('the checkpoint is missing or does not end with a newline');
  return { ...(extra ? { extra } : {}), index, proof, checkpoint };
}

/** Stele's extra data: prior_entry_hash ‖ canonical_entry (see the file comment). */
export function steleExtra(prior: Uint8Array, canonical: Uint8Array): Uint8Array {
  if (prior.length !== HASH_SIZE) throw new RangeError('prior entry hash must be 32 bytes');
  const out = new Uint8Array(HASH_SIZE + canonical.length);
  out.set(prior, 0);
  out.set(canonical, HASH_SIZE);
  return out;
}

/** Splits Stele's extra data; null if it is too short to hold a prior hash and an entry. */
export function parseSteleExtra(extra: Uint8Array | undefined): { prior: Uint8Array; canonical: Uint8Array } | null {
  if (!extra || extra.length <= HASH_SIZE) return null;
  return { prior: extra.subarray(0, HASH_SIZE), canonical: extra.subarray(HASH_SIZE) };
}

/** A Stele proof file for the entry at `index` (canonical bytes as the log stores them). */
export function steleTlogProof(
  index: number,
  canonical: Uint8Array,
  prior: Uint8Array,
  proof: readonly Uint8Array[],
  note: string,
): string {
  return formatTlogProof({ extra: steleExtra(prior, canonical), index, proof, checkpoint: note });
}
