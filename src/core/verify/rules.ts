// The rules of docs/interface.md §4.3 by one set of names: every verifier path (the CLI over the API,
// `--tiles` and `--proof`, mirror and audit, the explorer, the monitor, the hammer, and the
// `stele-verify` package) reports its checks under these keys and numbers.
export const RULES = {
  signature: { rule: 1, name: 'Checkpoint signature' },
  consistency: { rule: 2, name: 'Consistency with pinned checkpoint' },
  leaf: { rule: 3, name: 'Leaf hash' },
  inclusion: { rule: 4, name: 'Inclusion' },
  witnesses: { rule: 5, name: 'Witness cosignatures' },
  overall: { rule: 6, name: 'Client-side verification' },
} as const;

export type RuleName = keyof typeof RULES;

export type Status = 'PASS' | 'FAIL' | 'SKIP';

/** What a check found: passed or not, and why in words. */
export interface Outcome {
  ok: boolean;
  detail: string;
}

/** A check's outcome given by status: a SKIP says in `reason` why it did not run. */
export type StatusOutcome =
  | { status: Exclude<Status, 'SKIP'>; detail: string }
  | { status: 'SKIP'; detail: string; reason?: string };

/** One line of a report. */
export interface Check {
  rule: number;
  name: string;
  status: Status;
  detail: string;
  /** Why a SKIP did not run, in a few words (e.g. "offline"): what the result line names. */
  reason?: string;
}

export const short = (hex: string): string => `${hex.slice(0, 16)}…`;
