// C2SP tlog-proof files: Stele's codec round-trips, and a proof the API serves verifies with
// an independent verifier (test/helpers/tlog-proof.ts, from the C2SP texts alone: tlog-proof, signed-note,
// tlog-checkpoint, RFC 6962, and docs/design.md §1.1) — not Stele's parser. Tampering with each
// part fails on the check that covers it, in both verifiers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Report, type Trust, trustFromPolicy, verifyTlogProof } from '@stele/verify';
import type { RunningServer } from '../../src/serve/log-server.js';
import { TLOG_PROOF_HEADER, TlogProofError, formatTlogProof, parseTlogProof } from '../../src/core/tlog-proof.js';
import { digestOf, getJson, postAnchor, startTestServer } from '../api/server.js';
import { type IndependentResult, independentVerify } from '../helpers/tlog-proof.js';

/** The first of rules 1, 3 and 4 that did not pass (null: all three passed). */
const firstFailed = (r: Report): string | null =>
  (['signature', 'leaf', 'inclusion'] as const).find((k) => r.get(k)?.status !== 'PASS') ?? null;

// ---- Tampering, one part at a time --------------------------------------------------------

/** Replaces line `n` (0-based) of a proof file. */
const withLine = (text: string, n: number, f: (l: string) => string): string =>
  text
    .split('\n')
    .map((l, i) => (i === n ? f(l) : l))
    .join('\n');
const flipB64 = (s: string): string =>
  Buffer.from(Buffer.from(s, 'base64').map((b, i) => (i === 0 ? b ^ 1 : b))).toString('base64');
const editExtra = (text: string, f: (b: Buffer) => Buffer): string =>
  withLine(text, 1, (l) => `extra ${f(Buffer.from(l.slice(6), 'base64')).toString('base64')}`);

describe('tlog-proof codec', () => {
  const h = (n: number): Uint8Array => new Uint8Array(32).fill(n);
  const note = 'example.com/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— example.com/log AAAAAA==\n';

  it('formats the spec layout and parses it back', () => {
    const text = formatTlogProof({ extra: Uint8Array.of(1, 2, 3), index: 2, proof: [h(1), h(2)], checkpoint: note });
    expect(text).toBe(
      `${TLOG_PROOF_HEADER}\nextra AQID\nindex 2\n${Buffer.from(h(1)).toString('base64')}\n${Buffer.from(h(2)).toString('base64')}\n\n${note}`,
    );
    expect(parseTlogProof(text)).toEqual({
      extra: Uint8Array.of(1, 2, 3),
      index: 2,
      proof: [h(1), h(2)],
      checkpoint: note,
    });
  });

  it('omits the extra line when there is none, and allows an empty inclusion proof', () => {
    const text = formatTlogProof({ index: 0, proof: [], checkpoint: note });
    expect(text).toBe(`${TLOG_PROOF_HEADER}\nindex 0\n\n${note}`);
    expect(parseTlogProof(text)).toEqual({ index: 0, proof: [], checkpoint: note });
  });

  it.each([
    ['a wrong header', (t: string) => withLine(t, 0, () => 'c2sp.org/tlog-proof@v2')],
    ['a leading zero in the index', (t: string) => withLine(t, 2, () => 'index 02')],
    ['no index line', (t: string) => withLine(t, 2, () => 'idx 2')],
    ['a short hash', (t: string) => withLine(t, 3, () => 'AAAA')],
    ['non-canonical base64 extra', (t: string) => withLine(t, 1, () => 'extra AQI')],
    ['no blank line before the checkpoint', (t: string) => t.slice(0, t.indexOf('\n\n') + 1)],
  ])('refuses %s', (_what, tamper) => {
    const text = formatTlogProof({ extra: Uint8Array.of(1, 2, 3), index: 2, proof: [h(1), h(2)], checkpoint: note });
    expect(() => parseTlogProof(tamper(text))).toThrow(TlogProofError);
  });
});

describe('tlog-proof files from the API', () => {
  let srv: RunningServer;
  let vkey: string;
  let trust: Trust;
  const ids: string[] = [];
  const verify = (text: string, digest?: string) =>
    verifyTlogProof(text, trust, digest !== undefined ? { digest } : {}).then((r) => r.report);

  beforeAll(async () => {
    srv = await startTestServer();
    for (let i = 0; i < 11; i++) {
      const res = await postAnchor(srv.url, { digest: digestOf(i), artifact: `pkg-${i}.tgz` });
      expect(res.status).toBe(201);
      ids.push(res.body.entry.id as string);
    }
    vkey = (await getJson(`${srv.url}/api/ledger/key`)).body.vkey as string;
    trust = trustFromPolicy(`log ${vkey}\nquorum none\n`);
  });
  afterAll(() => srv?.close());

  const fetchProof = async (query: string, accept?: string): Promise<Response> =>
    fetch(`${srv.url}/api/ledger/entry?${query}`, accept ? { headers: { Accept: accept } } : {});

  it('answers a proof file for Accept: text/x.tlog-proof and for format=tlog-proof, JSON otherwise', async () => {
    const byAccept = await fetchProof(`id=${ids[5]}`, 'text/x.tlog-proof');
    expect(byAccept.status).toBe(200);
    expect(byAccept.headers.get('content-type')).toMatch(/^text\/x\.tlog-proof/);
    const byParam = await fetchProof(`id=${ids[5]}&format=tlog-proof`);
    const text = await byAccept.text();
    expect(await byParam.text()).toBe(text);
    expect(text.startsWith(`${TLOG_PROOF_HEADER}\nextra `)).toBe(true);
    expect((await fetchProof(`id=${ids[5]}`)).headers.get('content-type')).toMatch(/^application\/json/);
    expect((await fetchProof(`id=${ids[5]}&format=json`, 'text/x.tlog-proof')).headers.get('content-type')).toMatch(
      /^application\/json/,
    );
    expect((await fetchProof(`id=${ids[5]}&format=xml`)).status).toBe(400);
  });

  it.each([0, 5, 10])(
    'the proof of leaf %i verifies independently and with Stele, with the file digest',
    async (leaf) => {
      const text = await (await fetchProof(`leaf=${leaf}&format=tlog-proof`)).text();
      expect(independentVerify(text, vkey, digestOf(leaf))).toBe('ok');
      const r = await verify(text, digestOf(leaf));
      expect(firstFailed(r)).toBeNull();
      expect(r.result).toBe('PASS');
      // Offline with nothing pinned: rule 2 is SKIPped and says so; nothing witnessed under `quorum none`.
      expect(r.verdict).toBe('PASS (rule 2 not checked: offline; not witnessed)');
      // The codec gives back the served bytes exactly.
      expect(formatTlogProof(parseTlogProof(text))).toBe(text);
    },
  );

  const tamperings: [string, (t: string) => string, IndependentResult, string][] = [
    ['the index line', (t) => withLine(t, 2, (l) => `index ${Number(l.slice(6)) + 1}`), 'inclusion', 'inclusion'],
    ['the first inclusion hash', (t) => withLine(t, 3, flipB64), 'inclusion', 'inclusion'],
    ['the last inclusion hash', (t) => withLine(t, t.split('\n').indexOf('') - 1, flipB64), 'inclusion', 'inclusion'],
    [
      'the checkpoint size',
      (t) => withLine(t, t.split('\n').indexOf('') + 2, (l) => String(Number(l) + 1)),
      'signature',
      'signature',
    ],
    ['the checkpoint root', (t) => withLine(t, t.split('\n').indexOf('') + 3, flipB64), 'signature', 'signature'],
    [
      'the log signature',
      // A character well inside the base64: the last one before the padding also holds
      // padding bits, so changing it can leave the decoded signature as it was.
      (t) =>
        withLine(t, t.split('\n').length - 2, (l) => {
          const at = l.length - 10;
          return l.slice(0, at) + (l[at] === 'A' ? 'B' : 'A') + l.slice(at + 1);
        }),
      'signature',
      'signature',
    ],
    [
      'the prior hash in extra',
      (t) => editExtra(t, (b) => Buffer.concat([Buffer.from([b[0]! ^ 1]), b.subarray(1)])),
      'inclusion',
      'inclusion',
    ],
    [
      'the entry digest in extra',
      (t) => editExtra(t, (b) => Buffer.from(b.toString('latin1').replace(/"digest":"0/, '"digest":"1'), 'latin1')),
      'inclusion',
      'leaf',
    ],
  ];

  it.each(tamperings)('tampering with %s fails on the right check', async (_what, tamper, independent, stele) => {
    const text = await (await fetchProof(`leaf=5&format=tlog-proof`)).text();
    const bad = tamper(text);
    expect(bad).not.toBe(text);
    expect(independentVerify(bad, vkey, digestOf(5))).toBe(independent);
    const r = await verify(bad, digestOf(5));
    expect(r.result).toBe('FAIL');
    expect(firstFailed(r)).toBe(stele);
  });

  it('an extra that is not a canonical entry fails the entry check; a different file fails the digest check', async () => {
    const text = await (await fetchProof(`leaf=5&format=tlog-proof`)).text();
    const spaced = editExtra(text, (b) => Buffer.concat([b.subarray(0, 32), Buffer.from(' '), b.subarray(32)]));
    expect(firstFailed(await verify(spaced))).toBe('leaf');
    const notJson = editExtra(text, (b) => Buffer.concat([b.subarray(0, 32), Buffer.from('nope')]));
    expect(firstFailed(await verify(notJson))).toBe('leaf');
    expect(independentVerify(text, vkey, digestOf(6))).toBe('digest');
    const other = await verify(text, digestOf(6));
    expect(firstFailed(other)).toBe('leaf');
    // The proof itself still holds: only the file is not the one recorded.
    expect(other.get('inclusion')?.status).toBe('PASS');
  });
});
