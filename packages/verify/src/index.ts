/**
 * `@stele/verify`: verify what a Stele log (or any C2SP tlog-tiles log with Stele's entry
 * format) says, in Node or a browser, with nothing but `@noble/*` and `canonicalize`.
 *
 * Every check is one of docs/interface.md §4.3's rules, each implemented once (the log's own
 * `src/core/verify/`), and every result is a {@link Report} whose verdict is PASS only when
 * the rules that make the claim ran and passed. Inputs that cannot be read throw a
 * {@link VerifyError} with a machine-readable {@link VerifyErrorCode}.
 *
 * @example
 * ```ts
 * import { readFileSync } from 'node:fs';
 * import { trustFromPolicy, verifyTlogProof } from '@stele/verify';
 *
 * const trust = trustFromPolicy(readFileSync('ledger.policy', 'utf8'));
 * const proof = readFileSync('release-1.2.3.tgz.tlog-proof', 'utf8');
 * const digest = createHash('sha256').update(readFileSync('release-1.2.3.tgz')).digest('hex');
 * const { report } = await verifyTlogProof(proof, trust, { digest });
 * console.log(report.verdict); // "PASS (rule 2 not checked: offline)" or "FAIL"
 * if (report.result !== 'PASS') process.exit(1);
 * ```
 * @packageDocumentation
 */
import { parseCheckpointBody } from '../../../src/core/checkpoint-body.js';
import { EMPTY_ROOT, fromHex, sha256 as sha256Bytes } from '../../../src/core/hash.js';
import {
  type NoteVerifier,
  type ParsedNote,
  SIG_ED25519,
  NoteError,
  parseCosignerVkey,
  parseNote as parseCoreNote,
  parseVkey as parseCoreVkey,
  keyIdOf,
} from '../../../src/core/note.js';
import { type Policy, PolicyError, parsePolicy as parseCorePolicy } from '../../../src/core/tlog-policy.js';
import { type TlogProof, TlogProofError, parseTlogProof as parseCoreTlogProof } from '../../../src/core/tlog-proof.js';
import {
  type Check,
  type Outcome,
  type ProveConsistency,
  RULES,
  Report,
  type RuleName,
  type Status,
  type Trust,
  checkCheckpoint,
  checkConsistency,
  checkConsistencyProof,
  checkInclusion,
  checkTlogProof,
  policyQuorum,
} from '../../../src/core/verify/index.js';

export { RULES, Report };
export type { Check, NoteVerifier, Outcome, ParsedNote, Policy, ProveConsistency, RuleName, Status, TlogProof, Trust };

/** What went wrong with an input, for programs: the message says it for people. */
export type VerifyErrorCode = 'bad_vkey' | 'bad_policy' | 'bad_note' | 'bad_proof' | 'bad_digest' | 'bad_trust';

/** An input that cannot be read (a malformed vkey, policy, note, proof file or digest). */
export class VerifyError extends Error {
  override name = 'VerifyError';
  constructor(
    readonly code: VerifyErrorCode,
    message: string,
  ) {
    super(message);
  }
}

function reading<T>(code: VerifyErrorCode, read: () => T): T {
  try {
    return read();
  } catch (e) {
    if (e instanceof NoteError || e instanceof PolicyError || e instanceof TlogProofError || e instanceof RangeError)
      throw new VerifyError(code, e.message);
    throw e;
  }
}

/** Parses a signed-note verifier key (`<name>+<key hash>+<base64 key>`): a log's or a witness's. */
export function parseVkey(vkey: string): NoteVerifier {
  return reading('bad_vkey', () => {
    const v = parseCoreVkey(vkey);
    return v.type === SIG_ED25519 ? v : parseCosignerVkey(vkey);
  });
}

/** Parses a C2SP tlog-policy text (errors name the line). */
export function parsePolicy(text: string): Policy {
  return reading('bad_policy', () => parseCorePolicy(text));
}

/** Parses a signed note into its body and signature lines (nothing is verified yet). */
export function parseNote(text: string): ParsedNote {
  return reading('bad_note', () => parseCoreNote(text));
}

/** Parses a C2SP tlog-proof file (`c2sp.org/tlog-proof@v1`). */
export function parseTlogProof(text: string): TlogProof {
  return reading('bad_proof', () => parseCoreTlogProof(text));
}

/**
 * The keys to verify against, from a tlog-policy (`stele ledger init` writes one as
 * `ledger.policy`; a log serves its own at `/api/ledger/key`): its one Ed25519 log line, its
 * witnesses and their quorum. `pin` is the checkpoint rule 2 compares with (default: the
 * empty tree, so a proof's checkpoint is never compared offline and rule 2 says so).
 */
export function trustFromPolicy(
  policy: string | Policy,
  opts: { log?: string; pin?: { size: number; root: Uint8Array } } = {},
): Trust {
  const p = typeof policy === 'string' ? parsePolicy(policy) : policy;
  const logs = p.logs.map((l) => parseVkey(l.vkey)).filter((v) => v.type === SIG_ED25519);
  const log = opts.log !== undefined ? parseVkey(opts.log) : logs[0];
  if (!log || log.type !== SIG_ED25519)
    throw new VerifyError('bad_trust', 'the policy names no Ed25519 log key (a `log <vkey>` line), and none was given');
  if (logs.length > 0 && !logs.some((l) => keyIdOf(l.publicKey) === keyIdOf(log.publicKey)))
    throw new VerifyError('bad_trust', `the log key ${log.name} is not one of the policy's log lines`);
  const witnesses = p.witnesses.map((w) => parseVkey(w.vkey));
  return {
    origin: log.name,
    keyId: keyIdOf(log.publicKey),
    log,
    witnesses,
    quorum: policyQuorum(p, witnesses, 'add witnesses and a quorum to the policy'),
    pin: opts.pin ?? { size: 0, root: EMPTY_ROOT },
  };
}

function digestBytes(digest: string | Uint8Array): Uint8Array {
  const b = typeof digest === 'string' ? fromHex(digest) : digest;
  if (!b || b.length !== 32) throw new VerifyError('bad_digest', 'a SHA-256 digest is 32 bytes (64 hex digits)');
  return b;
}

/** The SHA-256 of some bytes: a file's digest, as the log records it. */
export function sha256(data: Uint8Array): Uint8Array {
  return sha256Bytes(data);
}

export interface ProofVerification {
  /** Rules 1–6; `report.result` is the answer. */
  readonly report: Report;
  /** The entry's leaf index and the tree size of the proof's checkpoint. */
  readonly index: number;
  readonly treeSize: number;
  /** The entry the proof carries (its fields as the log recorded them), once rule 3 could read it. */
  readonly entry?: Readonly<Record<string, unknown>>;
  /** Its entry hash, recomputed from the proof (the leaf is SHA-256(0x00 ‖ entry hash)). */
  readonly entryHash?: Uint8Array;
}

/**
 * Verifies a C2SP tlog-proof against a trust (rules 1, 3, 4 and 5; rule 2 when `prove`
 * supplies consistency proofs or the proof's checkpoint is the pinned one). With `digest`
 * (the file's SHA-256), rule 3 also requires the entry to record it.
 */
export async function verifyTlogProof(
  proof: string | TlogProof,
  trust: Trust,
  opts: { digest?: string | Uint8Array; prove?: ProveConsistency } = {},
): Promise<ProofVerification> {
  const p = typeof proof === 'string' ? parseTlogProof(proof) : proof;
  const r = await checkTlogProof(p, trust, {
    ...(opts.digest !== undefined ? { fileDigest: digestBytes(opts.digest) } : {}),
    ...(opts.prove ? { prove: opts.prove } : {}),
  });
  return {
    report: r.report,
    index: p.index,
    treeSize: r.checkpoint.size,
    ...(r.entry ? { entry: r.entry } : {}),
    ...(r.entryHash ? { entryHash: r.entryHash } : {}),
  };
}

export interface CheckpointVerification {
  /** Rules 1, 2 (against the trust's pin, when `prove` or the same size allows) and 5. */
  readonly report: Report;
  readonly origin: string;
  readonly treeSize: number;
  readonly root: Uint8Array;
}

/** Verifies a checkpoint note: the log's signature, every known key's line, and the witness quorum. */
export async function verifyCheckpoint(
  note: string,
  trust: Trust,
  opts: { prove?: ProveConsistency } = {},
): Promise<CheckpointVerification> {
  const report = new Report('checkpoint');
  const cc = checkCheckpoint({ note }, trust);
  report.add('signature', cc.signature);
  if (trust.pin.size === 0)
    report.add('consistency', {
      status: 'SKIP',
      reason: 'nothing pinned',
      detail: 'no checkpoint is pinned to compare with',
    });
  else if (opts.prove || cc.size === trust.pin.size)
    report.add('consistency', await checkConsistency(trust.pin, cc, opts.prove ?? null));
  else
    report.add('consistency', {
      status: 'SKIP',
      reason: 'offline',
      detail: 'no consistency proof to the pinned checkpoint',
    });
  report.add('witnesses', cc.witnesses);
  report.finish();
  return { report, origin: cc.origin, treeSize: cc.size, root: cc.root };
}

/** Rule 4 alone: the audit path of leaf `index` in the tree of `treeSize` rebuilds `root`. */
export function verifyInclusion(
  index: number,
  treeSize: number,
  leafHash: Uint8Array,
  path: readonly Uint8Array[],
  root: Uint8Array,
): Outcome {
  return checkInclusion(index, treeSize, leafHash, path, { size: treeSize, root });
}

/** Rule 2 alone: `proof` shows the tree (size1, root1) is a prefix of (size2, root2). */
export function verifyConsistency(
  first: { size: number; root: Uint8Array },
  second: { size: number; root: Uint8Array },
  proof: readonly Uint8Array[],
): Outcome {
  return checkConsistencyProof(first, second, proof);
}

/** Reads a checkpoint body's claims (origin, size, root) without verifying anything. */
export function readCheckpoint(note: string): { origin: string; treeSize: number; root: Uint8Array } {
  return reading('bad_note', () => {
    const b = parseCheckpointBody(parseCoreNote(note).body);
    return { origin: b.origin, treeSize: b.size, root: b.root };
  });
}
