// The proof routes' own work, without HTTP: what a request to entry?hash= or consistency
// costs inside the server once its tiles are cached (the index lookup, the verified read of
// the entry and its audit path, the JSON), and the index's size. In one process these figures
// hold still to a few percent, where the HTTP ones (`bench api`) move by tens on this machine.
// The work runs in a child on the checkout's build (dist/, as the server runs it; tsx's
// wrappers would be measured too); BENCH_STELE_ROOT=<checkout> measures another build on a
// log that build writes itself.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QUICK, figure, note } from './util.js';

const LOG_SIZE = QUICK ? 100_000 : 1_000_000;
const ROOT = process.env.BENCH_STELE_ROOT ?? new URL('..', import.meta.url).pathname;

// A module run with the checkout as its working directory (a file: the log's writer threads
// inherit the flags, and a worker cannot start under --input-type); prints one JSON object.
const WORK = `
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
const at = (p) => new URL(p, 'file://' + process.cwd() + '/').href;
const { anchorRequest } = await import(at('dist/src/core/anchor.js'));
const { LmdbIndex } = await import(at('dist/src/index/lmdb.js'));
const { openLocalLog } = await import(at('dist/src/log/local.js'));
const { LogReader } = await import(at('dist/src/reader.js'));
const { FsObjectStore } = await import(at('dist/src/store/fs.js'));
const { consistencyJson, entryProofJson } = await import(at('dist/src/api/views.js'));
const { JsonFragment } = await import(at('dist/src/api/json.js'));
const [dataDir, size] = [process.env.DATA_DIR, Number(process.env.LOG_SIZE)];
const digestOf = (i) => i.toString(16).padStart(64, '0');
const out = {};
const index = new LmdbIndex(join(dataDir, 'private', 'index'));
const { sequencer } = await openLocalLog({ dataDir, origin: 'bench.stele/proofs', fsync: false, batchInterval: 1, maxBatch: 65536, listeners: [index] });
for (let from = 0; from < size; from += 65536) {
  const n = Math.min(65536, size - from);
  await Promise.all(Array.from({ length: n }, (_, k) =>
    sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(from + k), { artifact: 'a' + (from + k) }))));
}
await sequencer.close();
await index.flush();
// What the index takes on disk (its tree, and the pages later transactions freed).
out.index_bytes_per_entry = statSync(join(dataDir, 'private', 'index', 'data.mdb')).size / size;
const note = readFileSync(join(dataDir, 'log', 'checkpoint'), 'utf8').split('\\n');
const head = { size: Number(note[1]), root: new Uint8Array(Buffer.from(note[2], 'base64')) };
const reader = new LogReader(new FsObjectStore(join(dataDir, 'log')));
// Warm: every tile and bundle in the cache, every entry checked once, as on a warm replica.
for (let n = 0; n < size; n++) await reader.entry(n, head);
const view = { treeSize: head.size, rootHash: Buffer.from(head.root).toString('hex') };
const checkpointJson = new JsonFragment({ note: note.join('\\n') });
const random = (n) => Math.floor(Math.random() * n);
const seqs = Array.from({ length: 100000 }, () => random(size));
const pairs = seqs.map(() => { const a = 1 + random(size - 1); return [a, a + random(size - a + 1)]; });
/** Median over five rounds of µs per call. */
async function time(f) {
  const rounds = [];
  for (let r = 0; r < 6; r++) {
    const t = performance.now();
    for (let i = 0; i < seqs.length; i++) await f(i);
    rounds.push(((performance.now() - t) * 1000) / seqs.length);
  }
  return rounds.slice(1).sort((a, b) => a - b)[2];
}
// The index's part only: its first candidate taken (the entry read that confirms it is timed below).
const first = async () => true;
out.lookup_by_digest = await time((i) => index.findByDigest(digestOf(seqs[i]), first));
out.entry_with_proof = await time((i) => reader.entryWithProof(seqs[i], head));
out.entry_with_proof_and_json = await time(async (i) => {
  const f = await reader.entryWithProof(seqs[i], head);
  return entryProofJson(seqs[i], f.canonical, f.entryHash, f.auditPath, view, checkpointJson, f.leafHash);
});
out.consistency = await time((i) => reader.consistency(pairs[i][0], pairs[i][1], head));
out.consistency_and_json = await time(async (i) => {
  const [a, b] = pairs[i];
  const f = await reader.consistency(a, b, head);
  return consistencyJson(a, b, f.firstRoot, f.secondRoot, f.proof);
});
await index.close();
console.log(JSON.stringify(out));
`;

export default async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stele-bench-proofs-'));
  try {
    note(`${LOG_SIZE} entries, build of ${ROOT}; median of five rounds of 100,000 random requests`);
    const script = join(dataDir, 'work.mjs');
    writeFileSync(script, WORK);
    const json = execFileSync(process.execPath, [script], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: join(dataDir, 'log'), LOG_SIZE: String(LOG_SIZE) },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 1 << 20,
    });
    const f = JSON.parse(json.trim().split('\n').pop()!) as Record<string, number>;
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
