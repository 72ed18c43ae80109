// Rules 1 and 5 for one checkpoint, whatever carries it: a signed note (the bucket's
// `checkpoint`, a tlog-proof, a mirror), or the API's JSON view with or without its note.
// The log signature must be by the pinned key; a line under any key the verifier knows (the
// log's or a policy witness's) that does not verify rejects the whole note (signed-note:
// "clients SHOULD reject the whole note"); cosignatures by policy witnesses are then counted
// against the quorum.
import { formatCheckpointBody, parseCheckpointBody } from '../checkpoint-body.js';
import { bytesEqual, fromBase64, hashFromHex, toHex, u64be } from '../hash.js';
import {
  type NoteSignature,
  type NoteVerifier,
  type SortedSignatures,
  parseNote,
  signatureLine,
  sortSignatures,
} from '../note.js';
import { type Outcome, short } from './rules.js';
import { type Quorum, type WitnessOutcome, checkWitnesses } from './witnesses.js';

/** The keys a verifier trusts: the log key, the witness keys and their quorum. */
export interface KeyTrust {
  readonly origin: string;
  readonly keyId: string;
  readonly log: NoteVerifier;
  readonly witnesses: readonly NoteVerifier[];
  readonly quorum: Quorum;
}

/** What the client pins: the keys, and a checkpoint (rule 2's reference). */
export interface Trust extends KeyTrust {
  readonly pin: { readonly size: number; readonly root: Uint8Array };
}

/** A witness cosignature in the JSON checkpoint (the API's `witnesses[]`). */
export interface JsonCosignature {
  readonly name: string;
  /** `ed25519:<base64>` */
  readonly signature: string;
  /** When the witness cosigned: ISO 8601 or unix seconds. */
  readonly timestamp?: string | number;
}

/** The JSON checkpoint (docs/interface.md §2.2) as the API serves it; `note` is the signed note when present. */
export interface JsonCheckpoint {
  readonly logId: string;
  readonly treeSize: number;
  readonly rootHash: string;
  readonly timestamp?: string;
  readonly keyId: string;
  readonly signature: string;
  readonly witnesses: readonly JsonCosignature[];
  readonly note?: string;
}

/** A checkpoint as read from the log, before or after verification. */
export interface CheckpointInput {
  readonly json?: JsonCheckpoint;
  readonly note?: string;
}

/** One signer of a checkpoint besides the log: a policy witness, or a key the trust does not know. */
export interface Cosigner {
  /** The policy's name for the witness (else the line's key name). */
  readonly name: string;
  /** `invalid`: a line under the witness's key that does not verify; `unknown`: not a trusted key (not counted). */
  readonly status: 'valid' | 'invalid' | 'missing' | 'unknown';
  /** The signed cosignature time (Unix seconds) of a valid cosignature. */
  readonly time?: number;
  /** For `unknown`: the line's key hash, hex. */
  readonly keyHash?: string;
}

export interface CheckedCheckpoint {
  readonly signature: Outcome;
  /** Rule 5: SKIP ("not witnessed") when the policy requires no cosignatures; `ok` unless it FAILs. */
  readonly witnesses: WitnessOutcome;
  /** Each policy witness's cosignature (policy order), then lines by keys the trust does not know. */
  readonly cosigners: readonly Cosigner[];
  /** The checkpoint's claims (from the note if present), whether or not they verified. */
  readonly origin: string;
  readonly size: number;
  readonly root: Uint8Array;
  /** The signed note as given, or rebuilt from a JSON checkpoint's body and signature fields. */
  readonly note?: string;
  /** The JSON's `timestamp`: served beside the note, signed by no one (docs/design.md §1.4). */
  readonly unsignedTimestamp?: string;
  /** The latest time a policy witness signed in a valid cosignature (tlog-cosignature), Unix seconds. */
  readonly cosignedAt?: number;
}

function decodeSig(s: string): Uint8Array | null {
  const m = /^ed25519:([A-Za-z0-9+/]+={0,2})$/.exec(s);
  if (!m) return null;
  const b = fromBase64(m[1]!);
  return b && b.length === 64 ? b : null;
}

function witnessSeconds(t: string | number | undefined): number | null {
  if (typeof t === 'number') return Number.isSafeInteger(t) && t >= 0 ? t : null;
  if (typeof t !== 'string') return null;
  if (/^\d+$/.test(t)) return Number(t);
  const ms = Date.parse(t);
  return Number.isFinite(ms) && ms % 1000 === 0 ? ms / 1000 : null;
}

/**
 * The signature lines of a JSON checkpoint without a note, as note lines: the log's, and one
 * per JSON cosignature under a policy witness's name (whose key hash it must then carry).
 * A cosignature of a known witness that cannot be decoded is a line that does not verify.
 */
function linesFromJson(json: JsonCheckpoint, trust: KeyTrust, problems: string[]): NoteSignature[] {
  const sigs: NoteSignature[] = [];
  const sig = decodeSig(json.signature);
  if (!sig) problems.push('signature is not ed25519:<base64 of 64 bytes>');
  else sigs.push({ name: json.logId, keyHash: trust.log.keyHash, payload: sig, line: '' });
  for (const w of json.witnesses) {
    const v = trust.witnesses.find((x) => x.name === w.name);
    if (!v) continue;
    const s = decodeSig(w.signature);
    const t = witnessSeconds(w.timestamp);
    const payload = s && t !== null ? new Uint8Array([...u64be(t), ...s]) : new Uint8Array(0);
    sigs.push({ name: w.name, keyHash: v.keyHash, payload, line: '' });
  }
  return sigs;
}

/** What a checkpoint claims, read from its note (or rebuilt from its JSON), and what is wrong with it so far. */
interface Claims {
  origin: string;
  size: number;
  root: Uint8Array;
  /** The signed body; null when there is none to check signatures over. */
  body: string | null;
  sigs: NoteSignature[];
  problems: string[];
}

/** Reads the checkpoint's claims: the note's when there is one (the JSON must agree), else the JSON's. */
function readClaims(input: CheckpointInput, trust: KeyTrust): Claims {
  const json = input.json;
  const note = json?.note ?? input.note;
  const c: Claims = {
    origin: json?.logId ?? '',
    size: json?.treeSize ?? 0,
    root: json ? hashFromHex(json.rootHash) : new Uint8Array(32),
    body: null,
    sigs: [],
    problems: [],
  };
  if (note !== undefined) {
    try {
      const parsed = parseNote(note);
      const cb = parseCheckpointBody(parsed.body);
      c.body = parsed.body;
      c.sigs = parsed.signatures;
      if (json && (cb.origin !== json.logId || cb.size !== json.treeSize || !bytesEqual(cb.root, c.root)))
        c.problems.push('the JSON fields (logId, treeSize, rootHash) differ from the signed note');
      Object.assign(c, { origin: cb.origin, size: cb.size, root: cb.root });
    } catch (e) {
      c.problems.push(`malformed checkpoint note: ${(e as Error).message}`);
    }
  } else if (json) {
    try {
      c.body = formatCheckpointBody({ origin: json.logId, size: json.treeSize, root: c.root });
    } catch (e) {
      c.problems.push(`cannot rebuild the checkpoint body: ${(e as Error).message}`);
    }
    c.sigs = linesFromJson(json, trust, c.problems);
  } else {
    c.problems.push('no checkpoint');
  }
  if (json) {
    if (json.keyId !== trust.keyId)
      c.problems.push(`checkpoint names key id ${short(json.keyId)}, not the pinned ${short(trust.keyId)}`);
    if (note !== undefined && c.body !== null) {
      const jsonSig = decodeSig(json.signature);
      const noteSig = c.sigs.find((s) => s.name === trust.origin && bytesEqual(s.keyHash, trust.log.keyHash));
      if (!jsonSig || (noteSig && !bytesEqual(noteSig.payload, jsonSig)))
        c.problems.push('the JSON signature differs from the note signature');
    }
  }
  if (c.body !== null && c.origin !== trust.origin)
    c.problems.push(`checkpoint is for origin ${c.origin}, not the pinned log ${trust.origin}`);
  return c;
}

/**
 * Rule 1's signature lines: the log's must verify, and a line under any key the trust knows
 * that does not verify rejects the whole note. Adds what is wrong to `c.problems`.
 */
function judgeSignatures(c: Claims, sorted: SortedSignatures, trust: KeyTrust): boolean {
  const logOk = sorted.valid.some((v) => v.verifier === trust.log);
  const isLog = (s: NoteSignature) => s.name === trust.log.name && bytesEqual(s.keyHash, trust.log.keyHash);
  const badLog = sorted.invalid.some(isLog);
  const badWitnesses = [...new Set(sorted.invalid.filter((s) => !isLog(s)).map((s) => s.name))];
  if (badLog)
    c.problems.push(
      `a signature does not verify under the pinned key ${short(trust.keyId)} (forged or altered checkpoint): the whole note is rejected`,
    );
  if (badWitnesses.length > 0)
    c.problems.push(
      `a cosignature by ${badWitnesses.join(', ')} (a witness you trust) does not verify: the whole note is rejected (signed-note)`,
    );
  if (!badLog && badWitnesses.length === 0 && !logOk) {
    const others = [...new Set(c.sigs.map((s) => s.name))];
    c.problems.push(
      `no signature by the pinned key ${short(trust.keyId)}${others.length ? ` (signed by: ${others.join(', ')}, other keys)` : ''}`,
    );
  }
  return logOk && c.problems.length === 0;
}

/**
 * Each policy witness's cosignature (valid, invalid or missing), then the lines of keys the
 * trust does not know; the valid ones count only for a checkpoint the log itself signed.
 */
function countCosigners(sorted: SortedSignatures, trust: KeyTrust, accepted: boolean) {
  const valid = new Set<NoteVerifier>();
  const cosigners: Cosigner[] = [];
  let cosignedAt: number | undefined;
  for (const w of trust.witnesses) {
    const v = sorted.valid.find((x) => x.verifier === w);
    const failed = sorted.invalid.some((s) => s.name === w.name && bytesEqual(s.keyHash, w.keyHash));
    cosigners.push({
      name: trust.quorum.label(w),
      status: failed ? 'invalid' : v ? 'valid' : 'missing',
      ...(v?.timestamp !== undefined ? { time: v.timestamp } : {}),
    });
    if (!v || !accepted) continue;
    valid.add(w);
    // The cosignature's own time is signed; the JSON timestamp is not.
    if (v.timestamp !== undefined && (cosignedAt === undefined || v.timestamp > cosignedAt)) cosignedAt = v.timestamp;
  }
  for (const s of sorted.unknown) cosigners.push({ name: s.name, status: 'unknown', keyHash: toHex(s.keyHash) });
  return { valid, cosigners, cosignedAt };
}

/**
 * Rules 1 and 5 for one checkpoint: the log signature must be by the pinned key (from the
 * note when there is one, else over the body rebuilt from the JSON fields), the JSON and the
 * note must agree, no line under a known key may fail, and cosignatures by policy witnesses
 * are counted against the quorum.
 */
export function checkCheckpoint(input: CheckpointInput, trust: KeyTrust | Trust): CheckedCheckpoint {
  const c = readClaims(input, trust);
  const note = input.json?.note ?? input.note;
  const sorted = c.body !== null ? sortSignatures(c.body, c.sigs, [trust.log, ...trust.witnesses]) : undefined;
  const accepted = sorted !== undefined && judgeSignatures(c, sorted, trust);
  const counted = sorted
    ? countCosigners(sorted, trust, accepted)
    : { valid: new Set<NoteVerifier>(), cosigners: [], cosignedAt: undefined };
  const signature: Outcome = accepted
    ? {
        ok: true,
        detail: `signed by the pinned key ${short(trust.keyId)} (${trust.origin}); tree size ${c.size}, root ${short(toHex(c.root))}`,
      }
    : { ok: false, detail: c.problems.join('; ') || 'signature not recognised' };
  const otherLines =
    note !== undefined ? c.sigs.filter((s) => s.name !== trust.origin).length : (input.json?.witnesses.length ?? 0);
  return {
    signature,
    witnesses: checkWitnesses(signature.ok, counted.valid, otherLines, trust.witnesses, trust.quorum),
    cosigners: counted.cosigners,
    origin: c.origin,
    size: c.size,
    root: c.root,
    ...(note !== undefined
      ? { note }
      : c.body !== null
        ? { note: `${c.body}\n${c.sigs.map((l) => signatureLine(l.name, l.keyHash, l.payload)).join('')}` }
        : {}),
    ...(input.json?.timestamp ? { unsignedTimestamp: input.json.timestamp } : {}),
    ...(counted.cosignedAt !== undefined ? { cosignedAt: counted.cosignedAt } : {}),
  };
}
