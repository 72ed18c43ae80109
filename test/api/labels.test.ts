// The label rule (src/core/labels.ts) as the API, the CLI and the explorer apply it: no
// character that hides or rearranges text, NFC, sizes; and labels that were valid before
// are recorded byte for byte as before (the same artifact ids, the same entry hashes).
import { describe, expect, it } from 'vitest';
import { ValidationError, buildEntry, parseAnchorBody } from '../../src/core/anchor.js';
import { checkLabel } from '../../src/core/labels.js';
import { artifactId, canonicalEntryBytes } from '../../src/core/entry.js';
import { classify } from '../../src/explorer/search.js';
import { toHex, sha256 } from '../../src/core/hash.js';

const DIGEST = 'ab'.repeat(32);

describe('the label rule', () => {
  const refused = [
    ['NUL', '\u0000'],
    ['tab', '\t'],
    ['DEL', '\u007f'],
    ['NEL (C1)', '\u0085'],
    ['CSI (C1)', '\u009b'],
    ['LINE SEPARATOR', '\u2028'],
    ['PARAGRAPH SEPARATOR', '\u2029'],
    ['LRE', '\u202a'],
    ['RLE', '\u202b'],
    ['PDF', '\u202c'],
    ['LRO', '\u202d'],
    ['RLO', '\u202e'],
    ['LRI', '\u2066'],
    ['RLI', '\u2067'],
    ['FSI', '\u2068'],
    ['PDI', '\u2069'],
    ['LRM', '\u200e'],
    ['RLM', '\u200f'],
    ['ALM', '\u061c'],
    ['zero-width space', '\u200b'],
    ['zero-width joiner', '\u200d'],
    ['word joiner', '\u2060'],
    ['BOM', '\ufeff'],
    ['soft hyphen', '\u00ad'],
    ['tag LATIN CAPITAL A', '\u{e0041}'],
    ['interlinear annotation', '\ufff9'],
  ] as const;

  it.each(refused)('refuses %s in every label', (_name, ch) => {
    for (const field of ['artifact', 'scope', 'tenant'] as const) {
      const r = checkLabel(field, `a${ch}b`);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.reason).toContain(`U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`);
    }
  });

  it('refuses lone surrogates, non-strings and oversized labels (measured after NFC)', () => {
    expect(checkLabel('artifact', 'a\ud800').ok).toBe(false);
    expect(checkLabel('scope', 5).ok).toBe(false);
    expect(checkLabel('tenant', 't'.repeat(257)).ok).toBe(false);
    expect(checkLabel('tenant', 't'.repeat(256)).ok).toBe(true);
    expect(checkLabel('artifact', '\u00e9'.repeat(512)).ok).toBe(true); // 1,024 bytes
    expect(checkLabel('artifact', '\u00e9'.repeat(513)).ok).toBe(false);
  });

  it('normalises to NFC', () => {
    expect(checkLabel('artifact', 'Re\u0301sume\u0301.pdf')).toEqual({ ok: true, value: 'R\u00e9sum\u00e9.pdf' });
    expect(checkLabel('scope', '\u212b')).toEqual({ ok: true, value: '\u00c5' }); // ANGSTROM SIGN → Å
  });

  it('keeps labels that were valid before byte for byte: same artifact id, same canonical entry', () => {
    const before = [
      'release-1.2.3.tgz',
      'acme/ci',
      'R\u00e9sum\u00e9.pdf',
      '\u6587\u66f8.txt',
      'rocket \u{1f680}',
      'a b',
      '',
    ];
    for (const label of before) {
      const r = parseAnchorBody({ digest: DIGEST, artifact: label, scope: label, tenant: label });
      expect(r.artifact).toBe(label);
      const entry = buildEntry(r, '2026-01-01T00:00:00.000Z');
      expect(entry.artifactId).toBe(artifactId(label, label));
      // The canonical bytes are those of the labels as given: nothing rewritten.
      expect(Buffer.from(canonicalEntryBytes(entry)).toString('utf8')).toContain(JSON.stringify(label).slice(1, -1));
    }
    // A fixed vector: this entry's bytes hash as they did before the rule.
    const e = buildEntry(
      parseAnchorBody({ digest: DIGEST, artifact: 'pkg.tgz', scope: 'ci', tenant: 'acme' }),
      '2026-01-01T00:00:00.000Z',
    );
    expect(Buffer.from(canonicalEntryBytes(e)).toString()).toBe(
      `{"artifact":"pkg.tgz","artifactId":"${artifactId('pkg.tgz', 'ci')}","digest":"${DIGEST}","result":"Anchored","scope":"ci","tenant":"acme","timestamp":"2026-01-01T00:00:00.000Z","type":"ledger_anchor","v":1}`,
    );
    expect(toHex(sha256(canonicalEntryBytes(e)))).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is the API validation: the body is refused with the field named', () => {
    expect(() => parseAnchorBody({ digest: DIGEST, artifact: 'evil\u202egpj.exe' })).toThrow(ValidationError);
    try {
      parseAnchorBody({ digest: DIGEST, tenant: 'acme\u2028' });
    } catch (e) {
      expect((e as ValidationError).code).toBe('invalid_tenant');
    }
  });

  it('is the explorer search: a deceptive label is no search, an NFD one finds the NFC id', () => {
    expect(classify('evil\u202egpj.exe')).toMatchObject({ kind: 'invalid' });
    // Without a scope a label is searched in every scope, by its NFC form.
    expect(classify('pkg.tgz')).toMatchObject({ kind: 'label', label: 'pkg.tgz' });
    expect(classify('Re\u0301sume\u0301.pdf')).toMatchObject({ kind: 'label', label: 'R\u00e9sum\u00e9.pdf' });
    const q = classify('Re\u0301sume\u0301.pdf', 'docs');
    expect(q).toMatchObject({ kind: 'artifact', artifactId: artifactId('R\u00e9sum\u00e9.pdf', 'docs') });
  });
});
