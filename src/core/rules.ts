// The six verification rules of spec §4.3, one home for the CLI and the explorer: their
// numbers and names, the check of each (1: the checkpoint signature by the pinned key;
// 2: consistency with the pinned checkpoint; 3: the leaf binds the entry and the file's
// digest; 4: the audit path rebuilds the signed root; 5: the witness cosignatures meet the
// C2SP tlog-policy quorum; 6: the client-side verdict over the others), and the report
// they make: PASS/FAIL/SKIP per check, a SKIP with its reason, and a verdict that never
// counts a check that did not run as passed. Pure and browser-safe (no node:*, no Buffer).
import { formatCheckpointBody, parseCheckpointBody } from './checkpoint.js';
import { canonicalEntryBytes, entryHash as computeEntryHash, entryId, type Entry } from './entry.js';
import { bytesEqual, fromBase64, hashFromHex, leafHash, toHex } from './hash.js';
import { rootFromInclusionProof, rootsFromConsistencyProof } from './merkle.js';
import { type NoteSignature, type NoteVerifier, parseNote, verifySignature } from './note.js';
import { type Policy, QUORUM_NONE, describeQuorum, quorumMet } from './tlog-policy.js';
import { type TlogProof, type TlogProofResult, verifyTlogProof } from './tlog-proof.js';

export type Status = 'PASS' | 'FAIL' | 'SKIP';

export interface Check {
  rule: number;
  name: string;
  status: Status;
  detail: string;
  /** Why a SKIP did not run, in a few words (e.g. "offline"): what the result line names. */
  reason?: string;
}

/** A check's outcome given by status: a SKIP says in `reason` why it did not run. */
export type StatusOutcome =
  | { status: Exclude<Status, 'SKIP'>; detail: string }
  | { status: 'SKIP'; detail: string; reason?: string };

export const RULES = {
  signature: { rule: 1, name: 'Checkpoint signature' },
  consistency: { rule: 2, name: 'Consistency with pinned checkpoint' },
  leaf: { rule: 3, name: 'Leaf hash' },
  inclusion: { rule: 4, name: 'Inclusion' },
  witnesses: { rule: 5, name: 'Witness cosignatures' },
  overall: { rule: 6, name: 'Client-side verification' },
} as const;

export type RuleKey = keyof typeof RULES;

export interface Outcome {
  ok: boolean;
  detail: string;
}

/** The PASS/FAIL report of one verification. */
export class Report {
  readonly checks: Check[] = [];

  add(key: RuleKey, outcome: Outcome | StatusOutcome): Check {
    return this.addCheck(RULES[key].rule, RULES[key].name, outcome);
  }

  /** A check outside the six rules (numbered 7 and up), e.g. a requested consistency proof. */
  addCheck(rule: number, name: string, outcome: Outcome | StatusOutcome): Check {
    const status: Status = 'status' in outcome ? outcome.status : outcome.ok ? 'PASS' : 'FAIL';
    const c: Check = { rule, name, status, detail: outcome.detail };
    if ('reason' in outcome && outcome.reason !== undefined) c.reason = outcome.reason;
    const at = this.checks.findIndex((x) => x.rule === c.rule);
    if (at >= 0) this.checks[at] = c;
    else this.checks.push(c);
    // Lines print in rule order (1 … 6, then a command's own checks 7, 8, …).
    this.checks.sort((a, b) => a.rule - b.rule);
    return c;
  }

  get(key: RuleKey): Check | undefined {
    return this.checks.find((c) => c.rule === RULES[key].rule);
  }

  get failed(): boolean {
    return this.checks.some((c) => c.status === 'FAIL');
  }

  /** Adds rule 6: PASS only if every other check ran and passed. */
  finish(): boolean {
    const others = this.checks.filter((c) => c.rule !== RULES.overall.rule);
    const failed = others.filter((c) => c.status === 'FAIL');
    const skipped = others.filter((c) => c.status === 'SKIP' && c.rule !== RULES.witnesses.rule);
    if (failed.length > 0) {
      this.add('overall', {
        ok: false,
        detail: `${failed.map((c) => `rule ${c.rule}`).join(', ')} failed: do not trust this ${failed.some((c) => c.rule === 3 || c.rule === 4) ? 'entry' : 'log view'}`,
      });
    } else {
      this.add('overall', {
        ok: true,
        detail: `${skipped.length ? 'the checks that ran were' : 'every check was'} recomputed locally from the pinned key and checkpoint${skipped.length ? `; ${skipped.map((c) => `rule ${c.rule}`).join(', ')} not run, not counted as passed` : ''}${
          this.unwitnessed
            ? '; NOT WITNESSED: no witness vouched for this checkpoint, so a split view would go unnoticed'
            : ''
        }`,
      });
    }
    return !this.failed;
  }

  /**
   * The trust policy required no cosignatures (rule 5 SKIP, "not witnessed"): the result
   * then says so, and never reads as a witnessed PASS.
   */
  get unwitnessed(): boolean {
    return this.get('witnesses')?.status === 'SKIP';
  }

  /**
   * The checks that did not run (SKIP), rule 5 aside (its SKIP is "not witnessed"): a PASS
   * never counts them as passed. The reason is the check's own (else its detail).
   */
  get notChecked(): { rule: number; name: string; reason: string }[] {
    return this.checks
      .filter((c) => c.status === 'SKIP' && c.rule !== RULES.witnesses.rule)
      .map((c) => ({ rule: c.rule, name: c.name, reason: c.reason ?? c.detail }));
  }

  /**
   * The overall result: FAIL, PASS, or PASS qualified by what was not checked, e.g.
   * "PASS (rule 2 not checked: offline)", "PASS (not witnessed)", or both.
   */
  get verdict(): string {
    if (this.failed) return 'FAIL';
    const caveats = this.notChecked.map((c) => `rule ${c.rule} not checked: ${c.reason}`);
    if (this.unwitnessed) caveats.push('not witnessed');
    return caveats.length ? `PASS (${caveats.join('; ')})` : 'PASS';
  }

  get result(): 'PASS' | 'FAIL' {
    return this.failed ? 'FAIL' : 'PASS';
  }
}

/** Which sets of valid witness cosignatures are enough: the pinned tlog-policy's quorum. */
export interface Quorum {
  /** False for `quorum none`: no cosignature is required, and nothing is witnessed. */
  readonly required: boolean;
  /** The quorum in words, for the report. */
  readonly text: string;
  met(valid: ReadonlySet<NoteVerifier>): boolean;
  /** The policy's name for a witness key (what `text` uses). */
  label(witness: NoteVerifier): string;
  /** How to pin witnesses, said when nothing is witnessed (default: the CLI's command). */
  readonly hint?: string;
}

/** `quorum none` with no witnesses: a trust that witnesses nothing (fsck, audit --vkey, init's first look). */
export const NOT_WITNESSED: Quorum = { required: false, text: 'none', met: () => true, label: (w) => w.name };

/**
 * A tlog-policy's quorum over its witnesses' verifiers (`witnesses[i]` is the key of
 * `policy.witnesses[i]`): met when the policy names of the valid cosigners meet it.
 */
export function policyQuorum(policy: Policy, witnesses: readonly NoteVerifier[], hint?: string): Quorum {
  const label = new Map<NoteVerifier, string>(witnesses.map((v, i) => [v, policy.witnesses[i]?.name ?? v.name]));
  return {
    required: policy.quorum !== QUORUM_NONE,
    text: describeQuorum(policy),
    met: (valid) =>
      quorumMet(policy, new Set([...valid].map((v) => label.get(v)).filter((n): n is string => n !== undefined))),
    label: (v) => label.get(v) ?? v.name,
    ...(hint !== undefined ? { hint } : {}),
  };
}

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

/** The JSON checkpoint (spec §2.2) as the API serves it; `note` is the signed note when present. */
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

/** An entry as the API presents it (spec §2.3): its canonical fields, id and entry hash. */
export interface EntryClaim {
  readonly id: string;
  readonly digest: string;
  readonly proof: { readonly entryHash: string };
  readonly [field: string]: unknown;
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
  readonly witnesses: Outcome & { status: Status; valid: number; quorum: string; names: string[] };
  /** Each policy witness's cosignature (policy order), then lines by keys the trust does not know. */
  readonly cosigners: readonly Cosigner[];
  /** The checkpoint's claims (from the note if present), whether or not they verified. */
  readonly origin: string;
  readonly size: number;
  readonly root: Uint8Array;
  readonly note?: string;
  /** The JSON's `timestamp`: served beside the note, signed by no one (DESIGN.md §1.4). */
  readonly unsignedTimestamp?: string;
  /** The latest time a policy witness signed in a valid cosignature (tlog-cosignature), Unix seconds. */
  readonly cosignedAt?: number;
}

const short = (hex: string): string => `${hex.slice(0, 16)}…`;

function decodeSig(s: string): Uint8Array | null {
  const m = /^ed25519:([A-Za-z0-9+/]+={0,2})$/.exec(s);
  if (!m) return null;
  const b = fromBase64(m[1]!);
  return b && b.length === 64 ? b : null;
}

function u64(n: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
}

function witnessSeconds(t: string | number | undefined): number | null {
  if (typeof t === 'number') return Number.isSafeInteger(t) && t >= 0 ? t : null;
  if (typeof t !== 'string') return null;
  if (/^\d+$/.test(t)) return Number(t);
  const ms = Date.parse(t);
  return Number.isFinite(ms) && ms % 1000 === 0 ? ms / 1000 : null;
}

/**
 * Rule 1 and rule 5 for one checkpoint: the log signature must be by the pinned key (from
 * the note when there is one, else over the body rebuilt from the JSON fields), the JSON and
 * the note must agree, and cosignatures by pinned witnesses are counted against the threshold.
 */
export function checkCheckpoint(input: CheckpointInput, trust: KeyTrust | Trust): CheckedCheckpoint {
  const json = input.json;
  const note = json?.note ?? input.note;
  const problems: string[] = [];
  let origin = json?.logId ?? '';
  let size = json?.treeSize ?? 0;
  let root = json ? hashFromHex(json.rootHash) : new Uint8Array(32);
  let body: string | null = null;
  let sigs: NoteSignature[] = [];

  if (note !== undefined) {
    try {
      const parsed = parseNote(note);
      const cb = parseCheckpointBody(parsed.body);
      body = parsed.body;
      sigs = parsed.signatures;
      if (json && (cb.origin !== json.logId || cb.size !== json.treeSize || !bytesEqual(cb.root, root))) {
        problems.push('the JSON fields (logId, treeSize, rootHash) differ from the signed note');
      }
      ({ origin, size, root } = cb);
    } catch (e) {
      problems.push(`malformed checkpoint note: ${(e as Error).message}`);
    }
  } else if (json) {
    try {
      body = formatCheckpointBody({ origin: json.logId, size: json.treeSize, root });
    } catch (e) {
      problems.push(`cannot rebuild the checkpoint body: ${(e as Error).message}`);
    }
    const sig = decodeSig(json.signature);
    if (!sig) problems.push('signature is not ed25519:<base64 of 64 bytes>');
    else sigs.push({ name: json.logId, keyHash: trust.log.keyHash, payload: sig, line: '' });
    for (const w of json.witnesses) {
      const v = trust.witnesses.find((x) => x.name === w.name);
      const s = decodeSig(w.signature);
      const t = witnessSeconds(w.timestamp);
      if (v && s && t !== null)
        sigs.push({ name: w.name, keyHash: v.keyHash, payload: new Uint8Array([...u64(t), ...s]), line: '' });
    }
  } else {
    problems.push('no checkpoint');
  }

  if (json) {
    if (json.keyId !== trust.keyId)
      problems.push(`checkpoint names key id ${short(json.keyId)}, not the pinned ${short(trust.keyId)}`);
    if (note !== undefined && body !== null) {
      const jsonSig = decodeSig(json.signature);
      const noteSig = sigs.find((s) => s.name === trust.origin && bytesEqual(s.keyHash, trust.log.keyHash));
      if (!jsonSig || (noteSig && !bytesEqual(noteSig.payload, jsonSig)))
        problems.push('the JSON signature differs from the note signature');
    }
  }
  if (body !== null && origin !== trust.origin)
    problems.push(`checkpoint is for origin ${origin}, not the pinned log ${trust.origin}`);

  let logOk = false;
  if (body !== null) {
    const mine = sigs.filter((s) => s.name === trust.origin && bytesEqual(s.keyHash, trust.log.keyHash));
    logOk = mine.some((s) => verifySignature(body!, s, trust.log) !== null);
    if (mine.length === 0) {
      const others = [...new Set(sigs.map((s) => s.name))];
      problems.push(
        `no signature by the pinned key ${short(trust.keyId)}${others.length ? ` (signed by: ${others.join(', ')}, other keys)` : ''}`,
      );
    } else if (!logOk) {
      problems.push(
        `the signature does not verify under the pinned key ${short(trust.keyId)} (forged or altered checkpoint)`,
      );
    }
  }

  const valid = new Set<NoteVerifier>();
  let cosignedAt: number | undefined;
  const cosigners: Cosigner[] = [];
  if (body !== null) {
    for (const w of trust.witnesses) {
      const lines = sigs.filter((s) => s.name === w.name && bytesEqual(s.keyHash, w.keyHash));
      let time: number | undefined;
      let ok = false;
      for (const line of lines) {
        const v = verifySignature(body, line, w);
        if (!v) continue;
        ok = true;
        if (v.timestamp !== undefined && (time === undefined || v.timestamp > time)) time = v.timestamp;
      }
      const name = trust.quorum.label(w);
      cosigners.push({
        name,
        status: ok ? 'valid' : lines.length ? 'invalid' : 'missing',
        ...(time !== undefined ? { time } : {}),
      });
      // Cosignatures count only for a checkpoint the log itself signed.
      if (!ok || !logOk) continue;
      valid.add(w);
      // The cosignature's own time is signed; the JSON timestamp is not.
      if (time !== undefined && (cosignedAt === undefined || time > cosignedAt)) cosignedAt = time;
    }
    const known = [trust.log, ...trust.witnesses];
    for (const s of sigs) {
      if (!known.some((k) => k.name === s.name && bytesEqual(k.keyHash, s.keyHash)))
        cosigners.push({ name: s.name, status: 'unknown', keyHash: toHex(s.keyHash) });
    }
  }
  const signature: Outcome =
    problems.length === 0 && logOk
      ? {
          ok: true,
          detail: `signed by the pinned key ${short(trust.keyId)} (${trust.origin}); tree size ${size}, root ${short(toHex(root))}`,
        }
      : { ok: false, detail: problems.join('; ') || 'signature not recognised' };
  const otherSigs =
    note !== undefined ? sigs.filter((s) => s.name !== trust.origin).length : (json?.witnesses.length ?? 0);
  const witnesses = witnessRule(signature.ok, valid, otherSigs, trust);
  const out: CheckedCheckpoint = { signature, witnesses, cosigners, origin, size, root };
  return {
    ...out,
    ...(note !== undefined ? { note } : {}),
    ...(json?.timestamp ? { unsignedTimestamp: json.timestamp } : {}),
    ...(cosignedAt !== undefined ? { cosignedAt } : {}),
  };
}

/**
 * Rule 5: the policy's quorum over the cosignatures that verify under its witness keys
 * (tlog-policy: "cosigned by witnesses according to the defined quorum rule"). With
 * `quorum none` nothing is witnessed, and the check says so rather than pass.
 */
function witnessRule(
  checkpointOk: boolean,
  valid: ReadonlySet<NoteVerifier>,
  otherSigs: number,
  trust: KeyTrust,
): CheckedCheckpoint['witnesses'] {
  const names = [...valid].map((w) => trust.quorum.label(w));
  const base = { valid: valid.size, quorum: trust.quorum.text, names };
  const counted = `${valid.size} valid cosignature${valid.size === 1 ? '' : 's'} by policy witnesses${valid.size ? ` (${names.join(', ')})` : ''}`;
  if (!checkpointOk)
    return { ...base, ok: false, status: 'FAIL', detail: 'not counted: the checkpoint itself did not verify' };
  if (!trust.quorum.required) {
    const seen =
      trust.witnesses.length > 0
        ? `${counted}, none required`
        : `${otherSigs} cosignature line${otherSigs === 1 ? '' : 's'} not checked: no witness keys pinned`;
    return {
      ...base,
      ok: true,
      status: 'SKIP',
      detail: `not witnessed: the trust policy requires no cosignatures (quorum none; ${seen}); ${trust.quorum.hint ?? 'pin witnesses with `stele ledger trust-config --policy <file>`'}`,
    };
  }
  if (trust.quorum.met(valid))
    return { ...base, ok: true, status: 'PASS', detail: `${counted}; quorum met: ${trust.quorum.text}` };
  const missing = trust.witnesses.filter((w) => !valid.has(w)).map((w) => trust.quorum.label(w));
  return {
    ...base,
    ok: false,
    status: 'FAIL',
    detail: `${counted}; quorum not met: the policy requires ${trust.quorum.text}${missing.length ? ` (no valid cosignature from ${missing.join(', ')})` : ''}`,
  };
}

/** A consistency proof as some source supplies it (the API adds its claimed roots). */
export interface ConsistencyInput {
  readonly proof: readonly Uint8Array[];
  readonly firstRoot?: Uint8Array;
  readonly secondRoot?: Uint8Array;
}

export type ProveConsistency = (first: number, second: number) => Promise<ConsistencyInput>;

/**
 * Rule 2: proves that `older` (size, root) is a prefix of `newer` by recomputing both roots
 * from one consistency proof. `label` names the older tree in messages ("pinned", …). A
 * proof that cannot be had is a FAIL, unless `rethrow` says the error is the caller's to
 * report (e.g. the network is down: no verdict on the log at all).
 */
export async function checkConsistency(
  older: { size: number; root: Uint8Array },
  newer: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  label = 'pinned',
  rethrow: (e: unknown) => boolean = () => false,
): Promise<Outcome & { proofLength?: number }> {
  if (newer.size < older.size) {
    return {
      ok: false,
      detail: `checkpoint size ${newer.size} is smaller than the ${label} size ${older.size}: the log rolled back (or serves a stale view)`,
    };
  }
  if (newer.size === older.size) {
    return bytesEqual(newer.root, older.root)
      ? { ok: true, detail: `same tree as the ${label} checkpoint (size ${older.size})` }
      : {
          ok: false,
          detail: `size ${older.size} has root ${short(toHex(newer.root))} but the ${label} root is ${short(toHex(older.root))}: the log forked`,
        };
  }
  if (older.size === 0)
    return {
      ok: true,
      detail: `the ${label} tree is empty, a prefix of every tree (size 0 → ${newer.size})`,
      proofLength: 0,
    };
  if (!prove) return { ok: false, detail: `no consistency proof available for ${older.size} → ${newer.size}` };
  let input: ConsistencyInput;
  try {
    input = await prove(older.size, newer.size);
  } catch (e) {
    if (rethrow(e)) throw e;
    return {
      ok: false,
      detail: `no valid consistency proof for ${older.size} → ${newer.size}: ${(e as Error).message}`,
    };
  }
  if (input.firstRoot && !bytesEqual(input.firstRoot, older.root)) {
    return {
      ok: false,
      detail: `the log claims root ${short(toHex(input.firstRoot))} at the ${label} size ${older.size}, not the ${label} ${short(toHex(older.root))}: the log forked`,
    };
  }
  if (input.secondRoot && !bytesEqual(input.secondRoot, newer.root)) {
    return {
      ok: false,
      detail: `the consistency proof is for root ${short(toHex(input.secondRoot))} at size ${newer.size}, not the checkpoint's`,
    };
  }
  const roots = rootsFromConsistencyProof(older.size, newer.size, input.proof, older.root);
  if (!roots)
    return {
      ok: false,
      detail: `malformed consistency proof (${input.proof.length} hashes) for ${older.size} → ${newer.size}`,
    };
  if (!bytesEqual(roots.first, older.root) || !bytesEqual(roots.second, newer.root)) {
    return {
      ok: false,
      detail: `the ${input.proof.length}-hash proof does not reconcile the ${label} root of size ${older.size} with the checkpoint root of size ${newer.size}: the log is not append-only (fork)`,
    };
  }
  return {
    ok: true,
    detail: `${label} size ${older.size} → ${newer.size}: both roots recomputed from the ${input.proof.length}-hash consistency proof`,
    proofLength: input.proof.length,
  };
}

/** Rule 4: the audit path must rebuild the checkpoint's root from the leaf. */
export function checkInclusion(
  leafIndex: number,
  treeSize: number,
  leaf: Uint8Array,
  path: readonly Uint8Array[],
  checkpoint: { size: number; root: Uint8Array },
): Outcome {
  const where = `leaf index ${leafIndex}, tree size ${treeSize}`;
  if (treeSize !== checkpoint.size)
    return {
      ok: false,
      detail: `${where}: the proof is for tree size ${treeSize}, the checkpoint has ${checkpoint.size}`,
    };
  const root = rootFromInclusionProof(leafIndex, treeSize, leaf, path);
  if (!root) return { ok: false, detail: `${where}: malformed audit path (${path.length} hashes is the wrong length)` };
  if (!bytesEqual(root, checkpoint.root)) {
    return {
      ok: false,
      detail: `${where}: the ${path.length}-hash audit path rebuilds root ${short(toHex(root))}, not the checkpoint root ${short(toHex(checkpoint.root))}`,
    };
  }
  return {
    ok: true,
    detail: `${where}: the ${path.length}-hash audit path rebuilds the checkpoint root ${short(toHex(checkpoint.root))}`,
  };
}

/** Rule 3 (API view): the leaf commits to the entry hash, the id matches, the digest is the file's. */
export function checkLeaf(
  entry: EntryClaim,
  leafIndex: number,
  leafHashHex: string,
  fileDigest?: string,
): Outcome & { entryHash?: Uint8Array } {
  const eh = hashFromHex(entry.proof.entryHash);
  const expectedLeaf = leafHash(eh);
  const problems: string[] = [];
  if (fileDigest !== undefined && entry.digest !== fileDigest)
    problems.push(`the entry's digest ${short(entry.digest)} is not the file's ${short(fileDigest)}`);
  if (toHex(expectedLeaf) !== leafHashHex)
    problems.push(`leaf hash ${short(leafHashHex)} is not SHA-256(0x00 ‖ entry hash) = ${short(toHex(expectedLeaf))}`);
  if (entry.id !== entryId(leafIndex, eh))
    problems.push(`entry id ${entry.id} does not match leaf index ${leafIndex} and its entry hash`);
  if (problems.length > 0) return { ok: false, detail: problems.join('; ') };
  return {
    ok: true,
    entryHash: eh,
    detail: `entry ${entry.id}${fileDigest !== undefined ? ` records the file's digest ${short(fileDigest)}` : ''}; leaf = SHA-256(0x00 ‖ entry hash ${short(entry.proof.entryHash)})`,
  };
}

export const hashes = (hex: readonly string[]): Uint8Array[] => hex.map(hashFromHex);

/**
 * Rule 3, second half: the entry's fields must hash, with the previous entry's hash, to its
 * entry hash (DESIGN.md §1.1). The previous hash needs no authentication of its own: the
 * entry hash is fixed by the leaf, so no other (fields, prior) pair can produce it.
 */
export function checkEntryBinding(entry: EntryClaim, seq: number, prior: Uint8Array): Outcome {
  let canonical: Uint8Array;
  try {
    canonical = canonicalEntryBytes(entry as unknown as Entry);
  } catch (e) {
    return { ok: false, detail: `entry ${entry.id} cannot be canonicalised: ${(e as Error).message}` };
  }
  const eh = computeEntryHash(seq, canonical, prior);
  return bytesEqual(eh, hashFromHex(entry.proof.entryHash))
    ? { ok: true, detail: `its fields hash (RFC 8785, with entry ${seq - 1}'s hash) to the entry hash` }
    : {
        ok: false,
        detail: `the entry's fields do not hash to its entry hash ${short(entry.proof.entryHash)}: the entry shown is not the one in the log`,
      };
}

/**
 * Rule 2 for a checkpoint that may be older than the pin (a stored or exported proof): the
 * older of the two must be a prefix of the newer. Without a way to prove it (`prove` null),
 * only the same tree can be checked; otherwise the rule is SKIPped with `offline` as detail.
 */
export async function checkConsistencyWithPin(
  pin: { size: number; root: Uint8Array },
  cp: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  offline: { reason: string; detail: string },
  rethrow?: (e: unknown) => boolean,
): Promise<Outcome | StatusOutcome> {
  if (!prove && cp.size !== pin.size) return { status: 'SKIP', ...offline };
  if (cp.size >= pin.size) return checkConsistency(pin, cp, prove, 'pinned', rethrow);
  const older = await checkConsistency(cp, pin, prove, "proof's", rethrow);
  return older.ok
    ? {
        ok: true,
        detail: `the proof's checkpoint (size ${cp.size}) is a prefix of the pinned one (size ${pin.size}): ${older.detail}`,
      }
    : older;
}

/**
 * Rule 2 for a copy of the log (a mirror directory, a CDN) that may lag behind the pin. A
 * copy at or past the pin is checked as any checkpoint (same size, other root: a fork). A
 * smaller one is a stale copy, not a rollback, unless a proof from a tree that reaches the
 * pin (`proveToPin`, e.g. the log's own API) shows it is no prefix of the pinned tree: then
 * it FAILs. Without such a proof (none given, or `unavailable` says it could not be had) the
 * rule is SKIPped: "older than your pin (N < M): update the mirror".
 */
export async function checkCopyConsistency(
  pin: { size: number; root: Uint8Array },
  cp: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  proveToPin: ProveConsistency | null,
  rethrow: (e: unknown) => boolean = () => false,
  unavailable: (e: unknown) => boolean = () => false,
): Promise<Outcome | StatusOutcome> {
  if (cp.size >= pin.size) return checkConsistency(pin, cp, prove, 'pinned', rethrow);
  const stale = `older than your pin (${cp.size} < ${pin.size}): update the mirror`;
  let input: ConsistencyInput | undefined;
  if (proveToPin && cp.size > 0) {
    try {
      input = await proveToPin(cp.size, pin.size);
    } catch (e) {
      if (!unavailable(e)) {
        if (rethrow(e)) throw e;
        return {
          ok: false,
          detail: `no valid consistency proof for ${cp.size} → ${pin.size} (the mirror's size to the pinned one): ${(e as Error).message}`,
        };
      }
    }
  }
  if (cp.size === 0) input = { proof: [] };
  if (input === undefined)
    return {
      status: 'SKIP',
      reason: stale,
      detail: `the mirror's checkpoint is ${stale}; whether it is a prefix of the pinned tree is not checked`,
    };
  const given = input;
  const older = await checkConsistency(cp, pin, async () => given, "mirror's", rethrow);
  return older.ok ? { ok: true, detail: `the mirror's checkpoint is ${stale}; ${older.detail}` } : older;
}

/** The report of a C2SP tlog-proof, and what it verified. */
export interface TlogProofReport {
  readonly report: Report;
  readonly checkpoint: CheckedCheckpoint;
  readonly result: TlogProofResult;
}

/**
 * The §4.3 report from a tlog-proof alone (src/core/tlog-proof.ts): rules 1 and 5 on its
 * checkpoint note as on any checkpoint; rule 3 the entry bound to its leaf by the extra
 * data (entry hash from index, entry and prior hash) and, given `fileDigest`, recording that
 * digest; rule 4 its inclusion proof to the signed root; rule 2 through `prove` when the
 * caller has one (else only if the proof's checkpoint is the pinned one, and otherwise
 * SKIPped as `offline` says).
 */
export async function checkTlogProof(
  proof: TlogProof,
  trust: Trust,
  opts: {
    fileDigest?: Uint8Array;
    prove?: ProveConsistency | null;
    offline: (proofSize: number) => { reason: string; detail: string };
  },
): Promise<TlogProofReport> {
  const report = new Report();
  const cc = checkCheckpoint({ note: proof.checkpoint }, trust);
  report.add('signature', cc.signature);
  report.add(
    'consistency',
    await checkConsistencyWithPin(
      trust.pin,
      { size: cc.size, root: cc.root },
      opts.prove ?? null,
      opts.offline(cc.size),
    ),
  );
  report.add('witnesses', cc.witnesses);
  const r = verifyTlogProof(proof, trust.log, trust.witnesses, opts.fileDigest);
  const { entry: entryCheck, digest: digestCheck, inclusion } = r.checks;
  const notRun = (why: string): StatusOutcome => ({ status: 'SKIP', reason: why, detail: `not checked: ${why}` });
  if (r.failed === 'signature') {
    report.add('leaf', notRun('the checkpoint did not verify'));
    report.add('inclusion', notRun('the checkpoint did not verify'));
  } else {
    report.add('leaf', entryCheck?.ok === false || !digestCheck ? (entryCheck ?? notRun('no entry')) : digestCheck);
    report.add('inclusion', inclusion ?? notRun('the extra data holds no entry'));
  }
  report.finish();
  return { report, checkpoint: cc, result: r };
}
