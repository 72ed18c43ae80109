// The §4.3 report of src/core/verify/report.ts, as every CLI command prints it: rule lines in
// rule order (issue 20 found `ledger consistency` printing 1, 2, 5, 7, 8, 6), whatever order
// the checks were added in; a SKIP is never counted as passed, and a PASS needs the rules that
// make its claim (1, 3 and 4 for an entry; 1 for a checkpoint) to have run and passed.
import { describe, expect, it } from 'vitest';
import { Report } from '../../src/core/verify/index.js';

describe('the core report', () => {
  it('keeps its lines in rule order, rule 6 among them', () => {
    const r = new Report('checkpoint');
    r.add('signature', { ok: true, detail: 'signed' });
    r.add('consistency', { ok: true, detail: 'consistent' });
    r.add('witnesses', { ok: true, detail: 'cosigned' });
    r.addCheck(7, 'Consistency 1 → 2', { ok: true, detail: 'proved' });
    r.addCheck(8, 'Anchored to the verified checkpoint', { ok: true, detail: 'anchored' });
    r.finish();
    expect(r.checks.map((c) => c.rule)).toEqual([1, 2, 5, 6, 7, 8]);
    expect(r.verdict).toBe('PASS');
  });

  it('names a SKIP in the verdict and fails when any check failed', () => {
    const r = new Report();
    r.add('inclusion', { ok: true, detail: 'included' });
    r.add('leaf', { ok: true, detail: 'the leaf' });
    r.add('consistency', { status: 'SKIP', reason: 'offline', detail: 'not checked offline' });
    r.add('signature', { ok: true, detail: 'signed' });
    r.finish();
    expect(r.checks.map((c) => c.rule)).toEqual([1, 2, 3, 4, 6]);
    expect(r.verdict).toBe('PASS (rule 2 not checked: offline)');
    r.add('leaf', { ok: false, detail: 'wrong digest' });
    r.finish();
    expect(r.verdict).toBe('FAIL');
    expect(r.get('overall')?.detail).toMatch(/^rule 3 failed: do not trust this entry/);
  });

  it('is FAIL, never PASS, when a rule the claim needs did not run', () => {
    const ok = { ok: true, detail: 'fine' };
    // An entry without rule 4, or with rule 3 SKIPped: not a PASS with a caveat, a FAIL.
    const noInclusion = new Report('entry');
    noInclusion.add('signature', ok);
    noInclusion.add('leaf', ok);
    expect(noInclusion.finish()).toBe(false);
    expect(noInclusion.verdict).toBe('FAIL');
    expect(noInclusion.get('overall')?.detail).toMatch(/rule 4 not checked \(not run\)/);
    const skipped = new Report('entry');
    skipped.add('signature', ok);
    skipped.add('leaf', { status: 'SKIP', reason: 'the checkpoint did not verify', detail: 'not checked' });
    skipped.add('inclusion', ok);
    expect(skipped.finish()).toBe(false);
    expect(skipped.result).toBe('FAIL');
    // Only rules 2 and 5 may be SKIPped in a PASS, and the verdict names them.
    const benign = new Report('entry');
    for (const k of ['signature', 'leaf', 'inclusion'] as const) benign.add(k, ok);
    benign.add('consistency', { status: 'SKIP', reason: 'offline', detail: 'offline' });
    benign.add('witnesses', { status: 'SKIP', detail: 'not witnessed' });
    expect(benign.finish()).toBe(true);
    expect(benign.verdict).toBe('PASS (rule 2 not checked: offline; not witnessed)');
    // A checkpoint needs rule 1 only; without it, FAIL.
    const empty = new Report('checkpoint');
    empty.add('witnesses', ok);
    expect(empty.finish()).toBe(false);
  });
});
