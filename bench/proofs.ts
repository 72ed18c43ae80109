// The proof routes' own work, without HTTP: what a request to entry?hash= or consistency
// costs inside the server once its tiles are cached (the index lookup, the verified read of
// the entry and its audit path, the JSON), and the index's size. In one process these figures
// hold still to a few percent, where the HTTP ones (`bench api`) move by tens on this machine.
// The work runs in a child on the checkout's build (dist/, as the server runs it; tsx's
// wrappers would be measured too); BENCH_STELE_ROOT=<checkout> measures another build on a
// log that build writes itself.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QUICK, figure, note } from './util.js';

const LOG_SIZE = QUICK ? 100_000 : 1_000_000;
const ROOT = process.env.BENCH_STELE_ROOT ?? new URL('..', import.meta.url).pathname;
const CHILD = new URL('child/proofs-work.ts', import.meta.url).pathname;

/** Node's flag for running TypeScript, where it is not on by default (Node 22 before 22.18). */
const stripTypes = (): string[] =>
  (process.features as { typescript?: string | false }).typescript ? [] : ['--experimental-strip-types'];

/**
 * Runs the child on `root`'s build over a log of `size` entries it writes in `dataDir`, timing
 * `requests` random requests per round; its figures. The child is TypeScript run with its types
 * stripped (not through tsx, whose wrappers would be measured too).
 */
export function runProofsChild(
  root: string,
  dataDir: string,
  size: number,
  requests = 100_000,
): Record<string, number> {
  const json = execFileSync(process.execPath, [...stripTypes(), CHILD], {
    cwd: root,
    env: { ...process.env, STELE_ROOT: root, DATA_DIR: dataDir, LOG_SIZE: String(size), REQUESTS: String(requests) },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 1 << 20,
  });
  return JSON.parse(json.trim().split('\n').pop()!) as Record<string, number>;
}

export default async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stele-bench-proofs-'));
  try {
    note(`${LOG_SIZE} entries, build of ${ROOT}; median of five rounds of 100,000 random requests`);
    const f = runProofsChild(ROOT, join(dataDir, 'log'), LOG_SIZE);
    figure('proofs_lookup_by_digest', f.lookup_by_digest!, 'µs');
    figure('proofs_entry_with_proof', f.entry_with_proof!, 'µs');
    figure('proofs_entry_with_proof_and_json', f.entry_with_proof_and_json!, 'µs');
    figure('proofs_consistency', f.consistency!, 'µs');
    figure('proofs_consistency_and_json', f.consistency_and_json!, 'µs');
    figure('proofs_index_bytes_per_entry', Math.round(f.index_bytes_per_entry!), 'bytes');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
