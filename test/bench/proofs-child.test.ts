// `npm run bench -- proofs` runs bench/child/proofs-work.ts under Node's type stripping against
// the checkout's build. It once went stale unnoticed (it named modules that had moved, inside a
// string no compiler read); now the type check reads it, and this runs it on a small log, so a
// benchmark that no longer runs fails the suite instead of the next measurement.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runProofsChild } from '../../bench/proofs.js';
import { ensureBuilt } from '../helpers/cli.js';

beforeAll(ensureBuilt, 180_000);
const dir = mkdtempSync(join(tmpdir(), 'stele-proofs-child-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ROOT = new URL('../../', import.meta.url).pathname;

it('the proofs benchmark runs on the build and reports every figure', () => {
  const figures = runProofsChild(ROOT, join(dir, 'log'), 700, 50);
  expect(Object.keys(figures).sort()).toEqual([
    'consistency',
    'consistency_and_json',
    'entry_with_proof',
    'entry_with_proof_and_json',
    'index_bytes_per_entry',
    'lookup_by_digest',
  ]);
  for (const [name, value] of Object.entries(figures)) expect(value, name).toBeGreaterThan(0);
});
