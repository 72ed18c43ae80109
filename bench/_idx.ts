import { LmdbIndex } from '../src/index/lmdb.js';
import { shortOf } from '../src/index/batch-rows.js';
import { sha256 } from '../src/core/hash.js';
const idx = new LmdbIndex('/tmp/h36c/log/1000000/private/index');
const salt = idx.saltBytes();
const N = 200_000;
const qs = Array.from({ length: N }, () => Math.floor(Math.random() * 1_000_000).toString(16).padStart(64, '0'));
const time = (name: string, f: (q: string) => unknown) => {
  for (let r = 0; r < 3; r++) {
    const t = process.hrtime.bigint();
    let x = 0;
    for (const q of qs) if (f(q) !== undefined) x++;
    const ns = Number(process.hrtime.bigint() - t) / N;
    if (r === 2) console.log(name, (ns / 1000).toFixed(2), 'µs', x);
  }
};
const buf = Buffer.alloc(80);
time('sha256_80', () => sha256(buf));
time('shortOf', (q) => shortOf(salt, q));
time('findByDigest', (q) => idx.findByDigest(q, () => true));
const rows = (idx as any).db.digests;
time('startingWith_first', (q) => { for (const r of rows.startingWith(shortOf(salt, q))) return r; });
await idx.close();
const idx2 = new LmdbIndex('/tmp/h36c/log/1000000/private/index');
const rs = (idx2 as any).db.digests;
const shorts = qs.map((q) => shortOf(salt, q));
let i = 0;
time('seek_raw_iter', () => { rs.seek.start = shorts[i++ % N]; const it = rs.seeking[Symbol.iterator](); const r = it.next(); it.return(); return r.value; });
i = 0;
time('startingWith_preshort', () => { for (const r of rs.startingWith(shorts[i++ % N])) return r; });
const db = rs.db;
i = 0;
time('getBinaryFast_ONE', () => db.getBinaryFast(Buffer.of(0)));
time('toLowerCase', (q) => q.toLowerCase());
