// The report of one verification and its verdict. The verdict cannot read PASS unless the
// rules that make the claim ran and passed: rules 1, 3 and 4 for an entry (its checkpoint
// is signed, the entry is the leaf, the leaf is in the signed tree), rule 1 for a
// checkpoint. Only two checks may be SKIPped with a PASS: rule 2, when no consistency proof
// can be had (offline, a copy older than the pin, a first visit), and rule 5, when the trust
// policy requires no cosignatures ("not witnessed"). Any other check that did not run —
// because an earlier one failed, or for any other reason — makes the result FAIL.
import { type Check, type Outcome, RULES, type RuleName, type Status, type StatusOutcome } from './rules.js';

/** What a report vouches for: an entry in the log, or only a checkpoint (and consistency). */
export type Subject = 'entry' | 'checkpoint';

const REQUIRED: Record<Subject, readonly number[]> = {
  entry: [RULES.signature.rule, RULES.leaf.rule, RULES.inclusion.rule],
  checkpoint: [RULES.signature.rule],
};

/** The checks that may be SKIP in a passing report, each for its stated benign reason. */
const MAY_SKIP: ReadonlySet<number> = new Set([RULES.consistency.rule, RULES.witnesses.rule]);

export class Report {
  readonly checks: Check[] = [];

  constructor(readonly subject: Subject = 'entry') {}

  add(key: RuleName, outcome: Outcome | StatusOutcome): Check {
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

  get(key: RuleName): Check | undefined {
    return this.checks.find((c) => c.rule === RULES[key].rule);
  }

  /** The checks that did not run although the verdict needs them (required, or not a benign SKIP). */
  get missing(): { rule: number; reason: string }[] {
    const others = this.checks.filter((c) => c.rule !== RULES.overall.rule);
    const absent = REQUIRED[this.subject]
      .filter((rule) => !others.some((c) => c.rule === rule))
      .map((rule) => ({ rule, reason: 'not run' }));
    const skipped = others
      .filter((c) => c.status === 'SKIP' && !MAY_SKIP.has(c.rule))
      .map((c) => ({ rule: c.rule, reason: c.reason ?? c.detail }));
    return [...absent, ...skipped];
  }

  /** A check failed, or one the verdict needs did not run. */
  get failed(): boolean {
    return this.checks.some((c) => c.status === 'FAIL') || this.missing.length > 0;
  }

  /** Adds rule 6: PASS only if every required check ran and passed and nothing failed. */
  finish(): boolean {
    const others = this.checks.filter((c) => c.rule !== RULES.overall.rule);
    const failed = others.filter((c) => c.status === 'FAIL').map((c) => `rule ${c.rule} failed`);
    const missing = this.missing.map((m) => `rule ${m.rule} not checked (${m.reason})`);
    if (failed.length > 0 || missing.length > 0) {
      const entry = this.subject === 'entry' && others.some((c) => c.rule === 3 || c.rule === 4) ? 'entry' : 'log view';
      this.add('overall', {
        ok: false,
        detail: `${[...failed, ...missing].join(', ')}: do not trust this ${entry}`,
      });
      return false;
    }
    const skipped = this.notChecked;
    // "Not witnessed" is said once, by rule 5's line and the verdict, not again here.
    this.add('overall', {
      ok: true,
      detail: `${skipped.length ? 'the checks that ran were' : 'every check was'} recomputed locally from the pinned key and checkpoint${skipped.length ? `; ${skipped.map((c) => `rule ${c.rule}`).join(', ')} not run, not counted as passed` : ''}`,
    });
    return true;
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
