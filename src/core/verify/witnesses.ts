// Rule 5: the witness cosignatures meet the C2SP tlog-policy quorum of the trust.
import type { NoteVerifier } from '../note.js';
import { type Policy, QUORUM_NONE, describeQuorum, quorumMet } from '../tlog-policy.js';
import type { Outcome, Status } from './rules.js';

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

export type WitnessOutcome = Outcome & { status: Status; valid: number; quorum: string; names: string[] };

/**
 * Rule 5: the policy's quorum over the cosignatures that verify under its witness keys
 * (tlog-policy: "cosigned by witnesses according to the defined quorum rule"). With
 * `quorum none` nothing is witnessed, and the check says so rather than pass. Cosignatures
 * count only for a checkpoint the log itself signed (`checkpointOk`).
 */
export function checkWitnesses(
  checkpointOk: boolean,
  valid: ReadonlySet<NoteVerifier>,
  otherLines: number,
  witnesses: readonly NoteVerifier[],
  quorum: Quorum,
): WitnessOutcome {
  const names = [...valid].map((w) => quorum.label(w));
  const base = { valid: valid.size, quorum: quorum.text, names };
  const counted = `${valid.size} valid cosignature${valid.size === 1 ? '' : 's'} by policy witnesses${valid.size ? ` (${names.join(', ')})` : ''}`;
  if (!checkpointOk)
    return { ...base, ok: false, status: 'FAIL', detail: 'not counted: the checkpoint itself did not verify' };
  if (!quorum.required) {
    const seen =
      witnesses.length > 0
        ? `${counted}, none required`
        : `${otherLines} cosignature line${otherLines === 1 ? '' : 's'} not checked: no witness keys pinned`;
    return {
      ...base,
      ok: true,
      status: 'SKIP',
      detail: `not witnessed: the trust policy requires no cosignatures (quorum none; ${seen}); ${quorum.hint ?? 'pin witnesses with `stele ledger trust-config --policy <file>`'}`,
    };
  }
  if (quorum.met(valid)) return { ...base, ok: true, status: 'PASS', detail: `${counted}; quorum met: ${quorum.text}` };
  const missing = witnesses.filter((w) => !valid.has(w)).map((w) => quorum.label(w));
  return {
    ...base,
    ok: false,
    status: 'FAIL',
    detail: `${counted}; quorum not met: the policy requires ${quorum.text}${missing.length ? ` (no valid cosignature from ${missing.join(', ')})` : ''}`,
  };
}
