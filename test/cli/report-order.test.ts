// The §4.3 report of src/core/rules.ts, as every CLI command prints it: rule lines in rule
// order (issue 20 found `ledger consistency` printing 1, 2, 5, 7, 8, 6), whatever order the
// checks were added in; a SKIP is never counted as passed.
import { describe, expect, it } from 'vitest';
import { Report } from '../../src/core/verify/index.js';

describe('the core report', () => {
  it('keeps its lines in rule order, rule 6 among them', () => {
    const r = new Report();
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
    r.add('consistency', { status: 'SKIP', reason: 'offline', detail: 'not checked offline' });
    r.add('signature', { ok: true, detail: 'signed' });
    r.finish();
    expect(r.checks.map((c) => c.rule)).toEqual([1, 2, 4, 6]);
    expect(r.verdict).toBe('PASS (rule 2 not checked: offline)');
    r.add('leaf', { ok: false, detail: 'wrong digest' });
    r.finish();
    expect(r.verdict).toBe('FAIL');
    expect(r.get('overall')?.detail).toMatch(/^rule 3 failed: do not trust this entry/);
  });
});
