// The explorer's browser-side verification modules, run under Node: against the Go-computed
// vectors (note signatures, inclusion proofs, the entry chain), and against a live in-process
// log for the checkpoint, entry, consistency and scan logic (honest, wrong key, rollback, fork).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosignBody, SeedSigner, formatVkey, makeVerifier, SIG_COSIGNATURE_V1 } from '../../src/core/note.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { fromBase64, fromHex, toBase64, toHex, u64be } from '../../src/explorer/bytes.js';
import { LogClient } from '../../src/explorer/log.js';
import { parseNote, parseVkey } from '../../src/explorer/note.js';
import { sortSignatures } from '../../src/core/note.js';
import { leafHash } from '../../src/core/hash.js';
import { foldInclusion } from '../../src/explorer/proof.js';
import { apiLookup, apiSearch, classify, labelMatches, recordMatcher, scanRecords } from '../../src/explorer/search.js';
import { pin, readSeen, resolveTrust, toTrust, writeSeen } from '../../src/explorer/trust.js';
import { artifactId as artifactIdOf, entryHash as entryHashOf, entryId as entryIdOf } from '../../src/core/entry.js';
import { buildReport, verifyBundle, verifyPageCheckpoint, verifyEntry } from '../../src/explorer/page-checks.js';
import type { RunningServer } from '../../src/serve/log-server.js';
import { digestOf, postAnchor, startTestServer } from '../api/server.js';
import { loadVectors } from '../helpers/vectors.js';

const v = loadVectors();
const hex = (s: string) => fromHex(s)!;

class MemoryStorage {
  private m = new Map<string, string>();
  getItem(k: string) {
    return this.m.get(k) ?? null;
  }
  setItem(k: string, val: string) {
    this.m.set(k, val);
  }
  removeItem(k: string) {
    this.m.delete(k);
  }
}

describe('explorer verification against the reference vectors', () => {
  it('encodes bytes without Buffer', () => {
    const b = new Uint8Array([0, 1, 2, 250, 251, 255]);
    expect(toHex(b)).toBe('000102fafbff');
    expect(fromHex('000102FAFBff')).toEqual(b);
    expect(fromBase64(toBase64(b))).toEqual(b);
    expect(fromBase64('AAECA/r7/w')).toBeNull(); // unpadded
    expect(fromHex('abc')).toBeNull();
  });

  it('parses the vkey and verifies the Go-signed note', () => {
    const log = parseVkey(v.note.vkey);
    expect(log.keyId).toBe(v.note.keyId);
    expect(toHex(log.publicKey)).toBe(v.note.publicKeyHex);
    const note = parseNote(v.note.signedNote);
    expect(note.body).toBe(v.note.body);
    expect(sortSignatures(note.body, note.signatures, [log]).valid.map((s) => s.verifier)).toEqual([log]);
    const altered = v.note.body.replace('\n8\n', '\n9\n');
    expect(sortSignatures(altered, note.signatures, [log]).invalid).toHaveLength(1);
    expect(() => parseVkey(v.note.vkey.replace(/\+[0-9a-f]{8}\+/, '+00000000+'))).toThrow(/key hash/);
  });

  it('verifies cosignature/v1 lines made by src/core/note.ts, with their time', async () => {
    const w = new SeedSigner('witness.example', new Uint8Array(32).fill(3));
    const line = await cosignBody(v.note.body, w, 1_700_000_000);
    const note = parseNote(`${v.note.signedNote}${line}`);
    const wv = parseVkey(formatVkey(makeVerifier(w.name, SIG_COSIGNATURE_V1, w.publicKey)));
    const sorted = sortSignatures(note.body, note.signatures, [wv]);
    expect(sorted.valid.map((s) => [s.verifier, s.timestamp])).toEqual([[wv, 1_700_000_000]]);
    const other = parseVkey(
      formatVkey(makeVerifier(w.name, SIG_COSIGNATURE_V1, new SeedSigner('x', new Uint8Array(32).fill(4)).publicKey)),
    );
    // Another key under the same name has another key hash: its line is unknown, not valid.
    expect(sortSignatures(note.body, note.signatures, [other]).valid).toHaveLength(0);
  });

  it('folds every RFC 6962 inclusion proof to the reference root, step by step', () => {
    const roots = new Map(v.rfc6962.roots.map((r) => [r.size, r.root]));
    for (const inc of v.rfc6962.inclusion) {
      const p = foldInclusion(inc.index, inc.size, leafHash(hex(v.rfc6962.leafInputs[inc.index]!)), inc.path.map(hex));
      expect(toHex(p.leaf.hash)).toBe(inc.leafHash);
      expect(toHex(p.steps.at(-1)?.node.hash ?? p.leaf.hash)).toBe(roots.get(inc.size));
      expect(p.steps.at(-1)?.node ?? { lo: inc.index, hi: inc.index + 1 }).toMatchObject({
        lo: 0,
        hi: inc.size === 1 ? 1 : inc.size,
      });
    }
    // The 70,000-leaf tree: leaf input i = SHA-256(u64be(i)).
    const large = new Map(v.large.roots.map((r) => [r.size, r.root]));
    for (const inc of v.large.inclusion) {
      if (!large.has(inc.size)) continue;
      const input = sha256(u64be(inc.index));
      const p = foldInclusion(inc.index, inc.size, leafHash(input), inc.path.map(hex));
      expect(toHex(p.steps.at(-1)?.node.hash ?? p.leaf.hash)).toBe(large.get(inc.size));
      expect(p.steps).toHaveLength(inc.path.length);
    }
    // A path of the wrong length draws nothing.
    const inc = v.rfc6962.inclusion.find((i) => i.path.length > 1)!;
    expect(
      foldInclusion(inc.index, inc.size, leafHash(hex(v.rfc6962.leafInputs[inc.index]!)), inc.path.slice(1).map(hex))
        .steps,
    ).toEqual([]);
  });

  it('recomputes the entry chain, ids and artifact ids', () => {
    for (const e of v.entries.chain) {
      const h = entryHashOf(e.seq, new TextEncoder().encode(e.canonicalEntry), hex(e.priorEntryHash));
      expect(toHex(h)).toBe(e.entryHash);
      expect(entryIdOf(e.seq, h)).toBe(e.id);
      const fields = JSON.parse(e.canonicalEntry) as { artifact?: string; scope?: string };
      if (e.artifactId) expect(artifactIdOf(fields.artifact!, fields.scope ?? '')).toBe(e.artifactId);
    }
  });

  it('classifies searches', () => {
    expect(classify('led_12_0123456789ab')).toMatchObject({ kind: 'id', seq: 12, prefix: '0123456789ab' });
    expect(classify(' 42 ')).toMatchObject({ kind: 'leaf', seq: 42 });
    expect(classify(`sha256:${'AB'.repeat(32)}`)).toMatchObject({ kind: 'digest', digest: 'ab'.repeat(32) });
    expect(classify(`art_${'c'.repeat(24)}`)).toMatchObject({ kind: 'artifact', artifactId: `art_${'c'.repeat(24)}` });
    expect(classify('release.tgz', 'prod')).toMatchObject({
      kind: 'artifact',
      artifactId: artifactIdOf('release.tgz', 'prod'),
      label: 'release.tgz',
    });
    // A label without a scope means every scope.
    expect(classify('release.tgz')).toEqual({ kind: 'label', label: 'release.tgz', text: 'release.tgz' });
    expect(classify('cafe\u0301.tgz')).toMatchObject({ kind: 'label', label: 'caf\u00e9.tgz' });
    expect(classify('led_x')).toMatchObject({ kind: 'invalid' });
    expect(classify('')).toMatchObject({ kind: 'invalid' });
  });

  it('prefers a pin over the site configuration and reports a changed key', () => {
    const store = new MemoryStorage();
    const site = { config: { vkey: v.note.vkey, witnesses: [], threshold: 0 }, source: 'site-config' as const };
    expect(resolveTrust(site, store)).toMatchObject({ source: 'site-config', mismatch: null });
    pin(store, site.config);
    expect(resolveTrust(site, store)).toMatchObject({ source: 'pin', mismatch: null });
    const other = new SeedSigner('example.com/stele-test', new Uint8Array(32).fill(9));
    const changed = {
      config: { vkey: formatVkey(makeVerifier(other.name, 1, other.publicKey)), witnesses: [], threshold: 0 },
      source: 'site-api' as const,
    };
    const r = resolveTrust(changed, store);
    expect(r.source).toBe('pin');
    expect(r.trust?.log.vkey).toBe(v.note.vkey);
    expect(r.mismatch).toMatch(/you pinned/);
    expect(resolveTrust(null, store).source).toBe('pin'); // a mirror with no configuration
    expect(resolveTrust(null, new MemoryStorage()).trust).toBeNull();
    writeSeen(store, 'o', { size: 3, rootHex: 'ab'.repeat(32), at: 'now' });
    expect(readSeen(store, 'o')?.size).toBe(3);
    expect(() => toTrust({ vkey: v.note.vkey, witnesses: [v.note.vkey], threshold: 1 })).toThrow(/type 0x04/);
  });
});

describe('explorer verification against a live log', () => {
  let server: RunningServer;
  let client: LogClient;
  /** digest → leaf index, from the anchor responses (a batch may be sequenced in any order). */
  const leafOf = new Map<string, number>();
  // Node's fetch has no HTTP cache; drop the browser cache modes.
  const fetchFn: typeof fetch = (input, init) => fetch(input, { ...init, cache: undefined });
  const trustOf = async () => {
    const key = (await (await fetch(`${server.url}/explorer.json`)).json()) as {
      vkey: string;
      witnesses: string[];
      witnessThreshold: number;
      policy?: string;
    };
    // The log publishes its witness policy as tlog-policy text; the explorer trusts that.
    expect(key.policy).toMatch(/^quorum /m);
    return toTrust({ vkey: key.vkey, witnesses: key.witnesses, threshold: key.witnessThreshold, policy: key.policy! });
  };

  beforeAll(async () => {
    server = await startTestServer({ origin: 'explorer.unit/log', demoWitnesses: 2 });
    for (let at = 0; at < 300; at += 50) {
      const batch = await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          postAnchor(server.url, { digest: digestOf(at + j + 1), artifact: `a-${at + j}`, scope: 's' }),
        ),
      );
      expect(batch.every((r) => r.status === 201)).toBe(true);
      batch.forEach((r) => leafOf.set(r.body.entry.digest as string, r.body.leafIndex as number));
    }
    client = new LogClient(new URL(`${server.url}/`), fetchFn);
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  it('verifies the checkpoint, an entry, a whole bundle, and builds the ledger-verify report', async () => {
    const trust = await trustOf();
    const cp = await verifyPageCheckpoint(await client.checkpoint(), trust, client, null);
    expect([cp.signature.status, cp.witnesses.status, cp.tiles.status, cp.consistency.status]).toEqual([
      'PASS',
      'PASS',
      'PASS',
      'SKIP',
    ]);
    expect(cp.size).toBe(300);
    expect(cp.witnessRows.filter((w) => w.status === 'PASS')).toHaveLength(2);
    const e = await verifyEntry(client, leafOf.get(digestOf(6))!, { size: cp.size, root: cp.root! });
    expect(e.ok).toBe(true);
    expect(e.fields?.digest).toBe(digestOf(6));
    const report = buildReport(cp, e, digestOf(6));
    expect(report.result).toBe('PASS');
    expect(buildReport(cp, e, digestOf(7)).result).toBe('FAIL');
    const rows = await verifyBundle(client, 1, { size: cp.size, root: cp.root! });
    expect(rows).toHaveLength(44);
    expect(rows.every((r) => r.ok)).toBe(true);
    // Immutable objects were fetched once each.
    const before = client.stats.requests;
    await verifyBundle(client, 1, { size: cp.size, root: cp.root! });
    expect(client.stats.requests).toBe(before);
  });

  it('checks consistency with the checkpoint seen before: growth passes, rollback and fork fail', async () => {
    const trust = await trustOf();
    const note = await client.checkpoint();
    const cp = await verifyPageCheckpoint(note, trust, client, null);
    const root = toHex(cp.root!);
    const older = (await (await fetch(`${server.url}/api/ledger/consistency?first=100&second=300`)).json()) as {
      firstRoot: string;
    };
    const grown = await verifyPageCheckpoint(note, trust, client, {
      size: 100,
      rootHex: older.firstRoot,
      at: 'earlier',
    });
    expect(grown.consistency.status).toBe('PASS');
    const forked = await verifyPageCheckpoint(note, trust, client, {
      size: 100,
      rootHex: 'ab'.repeat(32),
      at: 'earlier',
    });
    expect(forked.consistency.status).toBe('FAIL');
    const rolledBack = await verifyPageCheckpoint(note, trust, client, { size: 400, rootHex: root, at: 'earlier' });
    expect(rolledBack.consistency.detail).toMatch(/rolled back/);
    const same = await verifyPageCheckpoint(note, trust, client, {
      size: 300,
      rootHex: 'cd'.repeat(32),
      at: 'earlier',
    });
    expect(same.consistency.detail).toMatch(/forked/);
  });

  it('refuses a checkpoint under another key', async () => {
    const other = new SeedSigner('explorer.unit/log', new Uint8Array(32).fill(1));
    const trust = toTrust({
      vkey: formatVkey(makeVerifier(other.name, 1, other.publicKey)),
      witnesses: [],
      threshold: 0,
    });
    const cp = await verifyPageCheckpoint(await client.checkpoint(), trust, client, null);
    expect(cp.signature.status).toBe('FAIL');
    expect(cp.ok).toBe(false);
    expect(cp.remember).toBe(false);
  });

  it('looks up by digest and artifact through the API, and by scanning the bundles', async () => {
    const base = new URL(`${server.url}/`);
    const leaf10 = leafOf.get(digestOf(10))!;
    expect(await apiLookup(base, 'hash', digestOf(10), fetchFn)).toEqual({ found: leaf10 });
    expect(await apiLookup(base, 'hash', digestOf(9999), fetchFn)).toHaveProperty('notFound');
    expect(await apiLookup(new URL(`${server.url}/nothing/`), 'hash', digestOf(10), fetchFn)).toHaveProperty(
      'unavailable',
    );
    // A label across scopes: the search API, or a scan grouped by artifact.
    const search = await apiSearch(base, 'a-10', 100, fetchFn);
    expect(search).toEqual({
      matches: [{ artifactId: artifactIdOf('a-10', 's'), scope: 's', seq: expect.any(Number) }],
      more: false,
    });
    expect(await apiSearch(new URL(`${server.url}/nothing/`), 'a-10', 100, fetchFn)).toHaveProperty('unavailable');
    const found = new Map<number, Record<string, unknown>>();
    await scanRecords(client, 300, (e, seq) => {
      const hit = recordMatcher(classify('a-10'))!(e, seq);
      if (hit) found.set(seq, e);
      return hit;
    });
    expect(labelMatches(found)).toEqual((search as { matches: unknown[] }).matches);
    const progress: number[] = [];
    const q = classify(digestOf(10));
    const r = await scanRecords(client, 300, recordMatcher(q)!, { onProgress: (d) => progress.push(d) });
    expect(r.matches).toEqual([leaf10]);
    expect(progress.at(-1)).toBe(300);
    const label = classify('a-250', 's');
    const a = await scanRecords(client, 300, recordMatcher(label)!, { stopAtFirst: true });
    expect(a.matches).toEqual([leafOf.get(digestOf(251))]);
    const bounded = await scanRecords(client, 300, recordMatcher(q)!, { maxEntries: 10 });
    expect(bounded).toMatchObject({ matches: [], from: 256 });
  });
});
