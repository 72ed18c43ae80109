// An independent C2SP tlog-proof verifier for the tests, written from the spec texts alone
// (tlog-proof, signed-note, tlog-checkpoint, RFC 6962/9162) and docs/design.md §1.1: node:crypto
// only, no Stele module, so it cannot share a bug with src/core/tlog-proof.ts.
import { createHash, createPublicKey, verify as edVerify } from 'node:crypto';

const sha = (...parts: Buffer[]): Buffer => createHash('sha256').update(Buffer.concat(parts)).digest();
const b64 = (s: string): Buffer | null =>
  /^[A-Za-z0-9+/]*={0,2}$/.test(s) && s.length % 4 === 0 ? Buffer.from(s, 'base64') : null;

export type IndependentResult = 'ok' | 'format' | 'signature' | 'inclusion' | 'digest';

/** The log key from a vkey string `<name>+<hex key hash>+<base64(0x01 ‖ key)>` (signed-note). */
function logKey(vkey: string): { name: string; type: number; key: Buffer } {
  // The key's base64 may itself contain '+': split at the first two only.
  const [name, , ...k] = vkey.split('+') as [string, string, ...string[]];
  const raw = Buffer.from(k.join('+'), 'base64');
  return { name, type: raw[0]!, key: raw.subarray(1) };
}

/** RFC 9162 §2.1.3.2, written out again. */
function rootFrom(index: number, size: number, leaf: Buffer, path: Buffer[]): Buffer | null {
  if (index >= size) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = sha(Buffer.from([1]), p, r);
      if (fn % 2 === 0)
        while (fn % 2 === 0 && fn !== 0) {
          fn >>= 1;
          sn >>= 1;
        }
    } else r = sha(Buffer.from([1]), r, p);
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 ? r : null;
}

export function independentVerify(text: string, vkey: string, fileDigestHex?: string): IndependentResult {
  const lines = text.split('\n');
  if (lines[0] !== 'c2sp.org/tlog-proof@v1') return 'format';
  let i = 1;
  let extra: Buffer | null = null;
  if (lines[i]!.startsWith('extra ')) extra = b64(lines[i++]!.slice(6));
  const m = /^index (0|[1-9][0-9]*)$/.exec(lines[i++] ?? '');
  if (!m || !extra || extra.length <= 32) return 'format';
  const index = Number(m[1]);
  const path: Buffer[] = [];
  while (i < lines.length && lines[i] !== '') {
    const h = b64(lines[i++]!);
    if (!h || h.length !== 32) return 'format';
    path.push(h);
  }
  const note = lines.slice(i + 1).join('\n');
  // signed-note: the body ends at the last blank line; then "— <name> <base64(keyhash ‖ sig)>".
  const split = note.lastIndexOf('\n\n');
  if (split < 0) return 'format';
  const body = note.slice(0, split + 1);
  const { name, type, key } = logKey(vkey);
  const keyId = sha(Buffer.from(`${name}\n`), Buffer.from([type]), key).subarray(0, 4);
  const signed = note
    .slice(split + 2, -1)
    .split('\n')
    .some((l) => {
      const [dash, who, sigB64] = l.split(' ');
      const raw = b64(sigB64 ?? '');
      if (dash !== '—' || who !== name || !raw || raw.length !== 68 || !raw.subarray(0, 4).equals(keyId)) return false;
      const spki = createPublicKey({
        key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), key]),
        format: 'der',
        type: 'spki',
      });
      return edVerify(null, Buffer.from(body), spki, raw.subarray(4));
    });
  // tlog-checkpoint: origin, size, base64 root.
  const [origin, sizeText, rootB64] = body.split('\n');
  if (!signed || origin !== name) return 'signature';
  const size = Number(sizeText);
  const root = b64(rootB64!)!;
  // docs/design.md §1.1: entry_hash = SHA-256("stele/entry/v1\n" ‖ u64be(seq) ‖ canonical ‖ prior); leaf input = entry_hash.
  const prior = extra.subarray(0, 32);
  const canonical = extra.subarray(32);
  const seq = Buffer.alloc(8);
  seq.writeBigUInt64BE(BigInt(index));
  const eh = sha(Buffer.from('stele/entry/v1\n'), seq, canonical, prior);
  const r = rootFrom(index, size, sha(Buffer.from([0]), eh), path);
  if (!r || !r.equals(root)) return 'inclusion';
  if (
    fileDigestHex !== undefined &&
    (JSON.parse(canonical.toString('utf8')) as { digest: string }).digest !== fileDigestHex
  )
    return 'digest';
  return 'ok';
}
