import { readFileSync } from 'node:fs';
import { LogReader } from './dist/src/reader.js';
import { FsObjectStore } from './dist/src/store/fs.js';
import { consistencyJson } from './dist/src/api/views.js';
const dir = '/work/bench-data/prof6/log/log';
const note = readFileSync(`${dir}/checkpoint`, 'utf8').split('\n');
const head = { size: Number(note[1]), root: new Uint8Array(Buffer.from(note[2], 'base64')) };
const N = head.size;
const reader = new LogReader(new FsObjectStore(dir));
for (let n = 0; n < N; n += 256) await reader.entryWithProof(n, head);
const pairs = Array.from({ length: 50000 }, () => { const a = 1 + Math.floor(Math.random() * (N - 1)); return [a, a + Math.floor(Math.random() * (N - a + 1))]; });
for (let r = 0; r < 3; r++) {
  let t = performance.now(); let s = 0;
  for (const [a, b] of pairs) s += (await reader.consistency(a, b, head)).proof.length;
  const x = (performance.now() - t) * 1000 / pairs.length;
  t = performance.now();
  for (const [a, b] of pairs) { const f = await reader.consistency(a, b, head); s += consistencyJson(a, b, f.firstRoot, f.secondRoot, f.proof).length; }
  console.log(`consistency ${x.toFixed(2)} µs, +json ${((performance.now() - t) * 1000 / pairs.length).toFixed(2)} µs`);
}
