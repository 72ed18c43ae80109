// bench/proofs.ts's child: builds a log of LOG_SIZE entries in DATA_DIR with the build (dist/)
// of the checkout in STELE_ROOT, then times the proof routes' own work on it and prints one
// JSON object of figures. Node runs it with its types stripped, so the measured code is the
// build's and nothing else; each import is typed as the source module it was built from, so
// a module that moves or an export that changes fails the type check, not the next benchmark.
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

type Anchor = typeof import('../../src/core/anchor.js');
type Index = typeof import('../../src/index/lmdb.js');
type LocalLog = typeof import('../../src/serve/local-log.js');
type Reader = typeof import('../../src/read/reader.js');
type Fs = typeof import('../../src/store/fs.js');
type Views = typeof import('../../src/api/views.js');
type Json = typeof import('../../src/api/json.js');
type CheckpointView = import('../../src/api/wire.js').CheckpointView;

const root = process.env.STELE_ROOT!;
const built = <T>(path: string): Promise<T> => import(pathToFileURL(join(root, 'dist', path)).href) as Promise<T>;
const [{ anchorRequest }, { LmdbIndex }, { openLocalLog }, { LogReader }, { FsObjectStore }, views, { JsonFragment }] =
  await Promise.all([
    built<Anchor>('src/core/anchor.js'),
    built<Index>('src/index/lmdb.js'),
    built<LocalLog>('src/serve/local-log.js'),
    built<Reader>('src/read/reader.js'),
    built<Fs>('src/store/fs.js'),
    built<Views>('src/api/views.js'),
    built<Json>('src/api/json.js'),
  ]);

const dataDir = process.env.DATA_DIR!;
const size = Number(process.env.LOG_SIZE);
const requests = Number(process.env.REQUESTS ?? 100_000);
const digestOf = (i: number) => i.toString(16).padStart(64, '0');
const out: Record<string, number> = {};

const index = new LmdbIndex(join(dataDir, 'private', 'index'));
const { sequencer } = await openLocalLog({
  dataDir,
  origin: 'bench.stele/proofs',
  fsync: false,
  batchInterval: 1,
  maxBatch: 65_536,
  listeners: [index],
});
for (let from = 0; from < size; from += 65_536) {
  const n = Math.min(65_536, size - from);
  await Promise.all(
    Array.from({ length: n }, (_, k) =>
      sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(from + k), { artifact: `a${from + k}` })),
    ),
  );
}
await sequencer.close();
await index.flush();
// What the index takes on disk (its tree, and the pages later transactions freed).
out.index_bytes_per_entry = statSync(join(dataDir, 'private', 'index', 'data.mdb')).size / size;

const note = readFileSync(join(dataDir, 'log', 'checkpoint'), 'utf8').split('\n');
const head = { size: Number(note[1]), root: new Uint8Array(Buffer.from(note[2]!, 'base64')) };
const reader = new LogReader(new FsObjectStore(join(dataDir, 'log')));
// Warm: every tile and bundle in the cache, every entry checked once, as on a warm replica.
for (let n = 0; n < size; n++) await reader.entry(n, head);
// What the entry answer writes of the checkpoint's view: its size and root (the signed note is checkpointJson).
const view: CheckpointView = {
  logId: note[0]!,
  treeSize: head.size,
  rootHash: Buffer.from(head.root).toString('hex'),
  timestamp: '',
  keyId: '',
  signature: '',
  witnesses: [],
};
const checkpointJson = new JsonFragment({ note: note.join('\n') });
const random = (n: number) => Math.floor(Math.random() * n);
const seqs = Array.from({ length: requests }, () => random(size));
const pairs = seqs.map(() => {
  const a = 1 + random(size - 1);
  return [a, a + random(size - a + 1)] as const;
});

/** Median over five rounds (after one to warm up) of µs per call. */
async function time(f: (i: number) => unknown): Promise<number> {
  const rounds: number[] = [];
  for (let r = 0; r < 6; r++) {
    const t = performance.now();
    for (let i = 0; i < seqs.length; i++) await f(i);
    rounds.push(((performance.now() - t) * 1000) / seqs.length);
  }
  return rounds.slice(1).sort((a, b) => a - b)[2]!;
}

// The index's part only: its first candidate taken (the entry read that confirms it is timed below).
const first = async () => true;
out.lookup_by_digest = await time((i) => index.findByDigest(digestOf(seqs[i]!), first));
out.entry_with_proof = await time((i) => reader.entryWithProof(seqs[i]!, head));
out.entry_with_proof_and_json = await time(async (i) => {
  const f = await reader.entryWithProof(seqs[i]!, head);
  return views.entryProofJson(seqs[i]!, f.canonical, f.entryHash, f.auditPathBytes, view, checkpointJson, f.leafHash);
});
out.consistency = await time((i) => reader.consistency(pairs[i]![0], pairs[i]![1], head));
out.consistency_and_json = await time(async (i) => {
  const [a, b] = pairs[i]!;
  const f = await reader.consistency(a, b, head);
  return views.consistencyJson(a, b, f.firstRoot, f.secondRoot, f.proof);
});
await index.close();
console.log(JSON.stringify(out));
