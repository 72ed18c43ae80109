// The mirror (src/mirror) over real HTTP, fed a plain tlog-tiles log that is not Stele's
// (entries of any length): add-checkpoint, add-entries with each status of the C2SP
// tlog-mirror text, partial uploads resumed with the ticket, gzip, and the copy served as
// tlog-tiles under /<hex SHA-256(origin)>/ with the mirror's cosignature.
import { gzipSync } from 'node:zlib';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signCheckpoint } from '../../src/core/checkpoint.js';
import { HttpObjectReader } from '../../src/client/objects.js';
import { bytesEqual, leafHash, sha256 } from '../../src/core/hash.js';
import { MemoryHashReader, proveConsistency, treeHash } from '../../src/core/merkle.js';
import { type LogData, MirrorClient } from '../../src/mirror/client.js';
import { type RunningMirror, startMirror } from '../../src/mirror/host.js';
import {
  MIRROR_INFO_CONTENT_TYPE,
  type MirrorInfo,
  canonicalPackages,
  encodeHeader,
  encodePackage,
  parseMirrorInfo,
} from '../../src/mirror/protocol.js';
import { proveSubtree } from '../../src/core/subtree.js';
import { SIG_ED25519, SeedSigner, makeVerifier, openNote } from '../../src/core/note.js';
import { TILE_WIDTH, TileHashReader } from '../../src/core/tiles.js';
import { readBundle, storeTileFetcher } from '../../src/read/tilestore.js';
import { formatAddCheckpoint, originHash } from '../../src/witness/protocol.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'example.com/any-tlog';
const logKey = new SeedSigner(ORIGIN, new Uint8Array(32).fill(7));
const logVerifier = makeVerifier(ORIGIN, SIG_ED25519, logKey.publicKey);
const silent = pino({ level: 'silent' });

/** Entry i of a log that is not Stele's: 1 to 300 bytes. */
const entry = (i: number) => {
  const e = new Uint8Array(1 + ((i * 37) % 300)).fill(i & 255);
  e.set(sha256(new TextEncoder().encode(`e${i}`)).subarray(0, Math.min(e.length, 32)));
  return e;
};
const ENTRIES = Array.from({ length: 2000 }, (_, i) => entry(i));
const LEAVES = ENTRIES.map((e) => leafHash(e));

/** The log at `size`, as an uploader sees it, and its signed checkpoint. */
async function logAt(size: number, entries = ENTRIES): Promise<{ note: string; data: LogData; root: Uint8Array }> {
  const reader = new MemoryHashReader(
    entries === ENTRIES ? LEAVES.slice(0, size) : entries.slice(0, size).map((e) => leafHash(e)),
  );
  const root = await treeHash(size, reader);
  const { note } = await signCheckpoint({ origin: ORIGIN, size, root }, logKey);
  const data: LogData = {
    size,
    entries: async (s, e) => entries.slice(s, e),
    subtreeProof: (s, e) => proveSubtree(s, e, size, reader),
    consistencyProof: (old) => proveConsistency(old, size, reader),
    rootAt: (n) => treeHash(n, reader),
  };
  return { note, data, root };
}

let m: RunningMirror;
let resume: MirrorInfo;
let dir: string;

beforeAll(async () => {
  dir = scratchDir('mirror-proto-');
  m = await startMirror({
    dataDir: dir,
    name: 'mirror.test/m1',
    logs: [{ verifier: logVerifier }],
    host: '127.0.0.1',
    port: 0,
    logger: silent,
    fsync: false,
  });
});
afterAll(() => m.close());

async function addCheckpoint(old: number, size: number, oldReader?: LogData) {
  const { note, data } = await logAt(size);
  const proof = old === 0 || old === size ? [] : await (oldReader ?? data).consistencyProof(old);
  return fetch(`${m.url}/add-checkpoint`, {
    method: 'POST',
    body: formatAddCheckpoint({ oldSize: old, proof, checkpoint: note }),
  });
}

async function body(
  start: number,
  end: number,
  opts: { packages?: number; ticket?: Uint8Array; origin?: string; tamper?: number } = {},
) {
  const { data } = await logAt(end);
  const parts: Uint8Array[] = [
    encodeHeader({ origin: opts.origin ?? ORIGIN, start, end, ticket: opts.ticket ?? new Uint8Array(0) }),
  ];
  for (const p of canonicalPackages(start, end).slice(0, opts.packages ?? Infinity)) {
    const entries = (await data.entries(p.start, p.end)).map((e, j) =>
      p.start + j === opts.tamper ? Uint8Array.from(e, (b) => b ^ 1) : e,
    );
    parts.push(encodePackage(entries, await data.subtreeProof(p.subtreeStart, p.end)));
  }
  return new Uint8Array(Buffer.concat(parts));
}

const post = (b: Uint8Array, headers: Record<string, string> = {}) =>
  fetch(`${m.url}/add-entries`, {
    method: 'POST',
    body: new Uint8Array(b),
    headers: { 'Content-Type': 'application/octet-stream', ...headers },
  });

describe('tlog-mirror add-checkpoint and add-entries', () => {
  it('refuses add-entries before any checkpoint (422), for an unknown log (404), and a garbled header (400)', async () => {
    expect((await post(await body(0, 10))).status).toBe(422);
    expect((await post(await body(0, 10, { origin: 'other.example/log' }))).status).toBe(404);
    expect((await post(new Uint8Array([0, 40, 1, 2]))).status).toBe(400);
  });

  it('takes a checkpoint without cosigning it, and refuses a stale old size with the held size (409)', async () => {
    const res = await addCheckpoint(0, 600);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    const stale = await addCheckpoint(0, 600);
    expect(stale.status).toBe(409);
    expect(await stale.text()).toBe('600\n');
    // Nothing is served until entries are in: the mirror checkpoint is not the pending one.
    expect((await fetch(`${m.url}/${originHash(ORIGIN)}/checkpoint`)).status).toBe(404);
  });

  it('answers 409 with mirror-info for an unknown upload_end or a start beyond the next entry', async () => {
    const unknown = await post(await body(0, 599));
    expect(unknown.status).toBe(409);
    expect(unknown.headers.get('content-type')).toBe(MIRROR_INFO_CONTENT_TYPE);
    const info = parseMirrorInfo(await unknown.text());
    expect([info.size, info.next]).toEqual([600, 0]);
    expect(info.ticket.length).toBeGreaterThan(0);
    const ahead = await post(await body(256, 600));
    expect(ahead.status).toBe(409);
    expect(parseMirrorInfo(await ahead.text()).next).toBe(0);
  });

  it('refuses a tampered package with 422 and stores nothing of it', async () => {
    const res = await post(await body(0, 600, { tamper: 3 }));
    expect(res.status).toBe(422);
    expect(await res.text()).toMatch(/do not verify/);
    const probe = parseMirrorInfo(await (await post(await body(0, 599))).text());
    expect(probe.next).toBe(0);
    // A tampered second package: the first is kept (202 would need the body to end; here the
    // second fails, so the request is refused) and the next entry moved to 256.
    const second = await post(await body(0, 600, { tamper: 300 }));
    expect(second.status).toBe(422);
    expect(parseMirrorInfo(await (await post(await body(0, 599))).text()).next).toBe(256);
  });

  it('answers 400 for a first package cut short, and 202 with the next entry for a prefix', async () => {
    const whole = await body(256, 600);
    const partial = await post(whole.subarray(0, whole.length - 40)); // first package complete, second cut
    expect(partial.status).toBe(202);
    expect(partial.headers.get('content-type')).toBe(MIRROR_INFO_CONTENT_TYPE);
    resume = parseMirrorInfo(await partial.text());
    expect([resume.size, resume.next]).toEqual([600, 512]);
    const cut = await body(512, 600);
    expect((await post(cut.subarray(0, cut.length - 1))).status).toBe(400);
  });

  it('resumes a partial upload with its ticket after the pending checkpoint moved on', async () => {
    const first = await post(await body(512, 600, { packages: 0 }));
    // An empty prefix is no progress: the canonical sequence is not empty, so 400.
    expect(first.status).toBe(400);
    // The 202 of the previous test: resume at its next entry with its ticket.
    const { ticket, next } = resume;
    expect(next).toBe(512);
    // The log grows and the mirror learns 40 newer checkpoints: 600 leaves its history.
    let old = 600;
    for (let s = 610; s <= 1000; s += 10) {
      const { data } = await logAt(s);
      expect((await addCheckpoint(old, s, data)).status).toBe(200);
      old = s;
    }
    expect((await post(await body(512, 600))).status).toBe(409); // without the ticket: unknown
    const forged = Uint8Array.from(ticket);
    forged[forged.length - 5]! ^= 1;
    expect((await post(await body(512, 600, { ticket: forged }))).status).toBe(409);
    const done = await post(gzipSync(await body(512, 600, { ticket })), { 'Content-Encoding': 'gzip' });
    expect(done.status).toBe(200);
    const line = await done.text();
    const { note } = await logAt(600);
    const opened = openNote(note + line, logVerifier, [m.verifier]);
    expect(opened.cosignatures.map((c) => c.verifier.name)).toEqual(['mirror.test/m1']);
  });

  it('serves the copy as tlog-tiles: the cosigned checkpoint, hash tiles that give the root, entry bundles', async () => {
    const src = new HttpObjectReader(`${m.url}/${originHash(ORIGIN)}/`);
    const note = Buffer.from((await src.get('checkpoint'))!).toString();
    const opened = openNote(note, logVerifier, [m.verifier]);
    expect(opened.cosignatures).toHaveLength(1);
    expect(opened.body.split('\n')[1]).toBe('600');
    const { root } = await logAt(600);
    expect(bytesEqual(await treeHash(600, new TileHashReader(600, storeTileFetcher(src))), root)).toBe(true);
    expect(await readBundle(src, 'entries', 2, 600 - 512)).toEqual(ENTRIES.slice(512, 600));
    expect((await fetch(`${m.url}/${originHash(ORIGIN)}/tile/../../state`)).status).toBe(404);
    expect((await fetch(`${m.url}/${'0'.repeat(64)}/checkpoint`)).status).toBe(404);
  });

  it('a MirrorClient brings the mirror to the latest checkpoint across many packages, then keeps it current', async () => {
    const client = new MirrorClient({ verifier: m.verifier, url: m.url }, { packagesPerRequest: 2 });
    const to1000 = await logAt(1000);
    const line = await client.push(to1000.note, to1000.data);
    expect(openNote(to1000.note + line, logVerifier, [m.verifier]).cosignatures).toHaveLength(1);
    const to1999 = await logAt(1999);
    await client.push(to1999.note, to1999.data);
    const src = new HttpObjectReader(`${m.url}/${originHash(ORIGIN)}/`);
    expect(bytesEqual(await treeHash(1999, new TileHashReader(1999, storeTileFetcher(src))), to1999.root)).toBe(true);
    expect(Buffer.from((await src.get('checkpoint'))!).toString()).toContain('\n1999\n');
    // An upload for a size below the mirror checkpoint is refused: the mirror never rewinds.
    const res = await post(await body(900, 1000));
    expect(res.status).toBe(409);
  });

  it('refuses a checkpoint inconsistent with the pending one (422) and keeps its branch', async () => {
    const forkEntries = ENTRIES.map((e, i) => (i === 5 ? new Uint8Array([9, 9, 9]) : e));
    const fork = await logAt(2000, forkEntries);
    const res = await fetch(`${m.url}/add-checkpoint`, {
      method: 'POST',
      body: formatAddCheckpoint({
        oldSize: 1999,
        proof: await fork.data.consistencyProof(1999),
        checkpoint: fork.note,
      }),
    });
    expect(res.status).toBe(422);
    expect(TILE_WIDTH).toBe(256);
  });
});
