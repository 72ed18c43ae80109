// Property: for random trees, a random entry's real tlog-proof, and a random change of one
// byte anywhere in the proof file (or in the file's digest), every entry point of the
// verifier gives the same result — the package's API (`@stele/verify`), the CLI's
// `--proof` path (src/client/tlog-proof-file.ts, reading the file from disk) and the
// explorer's drop-a-proof path (src/explorer/page-checks.ts) — and no change yields PASS unless it
// left the proof's meaning untouched (a base64 padding bit, for one). fast-check shrinks any
// counterexample to the smallest tree and change.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { trustFromPolicy, verifyTlogProof } from '@stele/verify';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { signCheckpoint } from '../../../src/core/checkpoint.js';
import { ZERO_HASH, canonicalEntryBytes, entryHash } from '../../../src/core/entry.js';
import { leafHash, toHex } from '../../../src/core/hash.js';
import { MemoryHashReader, proveInclusion, treeHash } from '../../../src/core/merkle.js';
import { SIG_COSIGNATURE_V1, SeedSigner, cosignBody, formatVkey, makeVerifier } from '../../../src/core/note.js';
import { formatTlogProof, parseTlogProof, steleTlogProof } from '../../../src/core/tlog-proof.js';
import type { Session } from '../../../src/client/session.js';
import { verifyFileWithTlogProof } from '../../../src/client/tlog-proof-file.js';
import { LogClient } from '../../../src/explorer/log.js';
import { toTrust } from '../../../src/explorer/trust.js';
import { verifyTlogProofFile } from '../../../src/explorer/page-checks.js';
import { scratchDir } from '../../helpers/tmp.js';

const log = new SeedSigner('property.test/log', new Uint8Array(32).fill(1));
const witness = new SeedSigner('witness.property.test', new Uint8Array(32).fill(2));
const logVkey = formatVkey(makeVerifier(log.name, 0x01, log.publicKey));
const witnessVkey = formatVkey(makeVerifier(witness.name, SIG_COSIGNATURE_V1, witness.publicKey));
const policy = `log ${logVkey}\nwitness w ${witnessVkey}\nquorum w\n`;
const trust = trustFromPolicy(policy);
const pageTrust = toTrust({ vkey: logVkey, witnesses: [], threshold: 0, policy });
// The explorer never fetches here: with no verified checkpoint, rule 2 is not proved from tiles.
const offlineClient = new LogClient(new URL('http://unreachable.invalid/'), () => {
  throw new Error('the explorer must not fetch during this check');
});
const dir = scratchDir('stele-verify-property-');

/** A log of `size` entries, its signed and cosigned checkpoint, and the proof file of entry `index`. */
async function proofOf(size: number, index: number, digests: string[]) {
  const hashes: Uint8Array[] = [];
  const canonicals: Uint8Array[] = [];
  for (let i = 0; i < size; i++) {
    const canonical = canonicalEntryBytes({
      v: 1,
      type: 'ledger_anchor',
      result: 'anchored',
      digest: digests[i % digests.length]!,
      timestamp: '2026-11-27T00:00:00.000Z',
      artifact: `release-${i}.tgz`,
    });
    canonicals.push(Uint8Array.from(canonical));
    hashes.push(entryHash(i, canonical, i === 0 ? ZERO_HASH : hashes[i - 1]!));
  }
  const reader = new MemoryHashReader(hashes.map(leafHash));
  const cp = await signCheckpoint({ origin: log.name, size, root: await treeHash(size, reader) }, log);
  const note = cp.note + (await cosignBody(cp.note.slice(0, cp.note.indexOf('\n\n') + 1), witness, 1_800_000_000));
  const path = await proveInclusion(index, size, reader);
  const prior = index === 0 ? ZERO_HASH : hashes[index - 1]!;
  return {
    text: steleTlogProof(index, canonicals[index]!, prior, path, note),
    digest: digests[index % digests.length]!,
  };
}

/** The three entry points' results for one proof text and digest. */
async function verdicts(text: string, digest: string): Promise<string[]> {
  const pkg = await verifyTlogProof(text, trust, { digest }).then(
    (r) => r.report.result,
    (e: { code?: string }) => (e.code?.startsWith('bad_') ? 'FAIL' : `threw ${String(e)}`),
  );
  const file = join(dir, 'entry.tlog-proof');
  writeFileSync(file, text);
  const session = { trust: { ...trust, pin: { size: 0, root: trust.pin.root } } } as unknown as Session;
  const cli = await verifyFileWithTlogProof(session, 'file', digest, 0, file).then(
    (r) => r.report.result,
    (e: { kind?: string }) => (e.kind === 'verify' ? 'FAIL' : `threw ${String(e)}`),
  );
  const page = (await verifyTlogProofFile(text, pageTrust, offlineClient, null, digest)).report.result;
  return [pkg, cli, page];
}

/** The proof's meaning: what a verifier reads from it (null when it does not parse). */
function meaning(text: string): string | null {
  try {
    return formatTlogProof(parseTlogProof(text));
  } catch {
    return null;
  }
}

const digestArb = fc.uint8Array({ minLength: 32, maxLength: 32 }).map(toHex);

describe('the verifier, under random single-byte changes', () => {
  it('every entry point agrees, and only an unchanged meaning passes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 300 }).chain((size) =>
          fc.record({
            size: fc.constant(size),
            index: fc.integer({ min: 0, max: size - 1 }),
            digests: fc.array(digestArb, { minLength: 1, maxLength: 4 }),
            target: fc.constantFrom('proof', 'digest'),
            at: fc.nat(),
            xor: fc.integer({ min: 1, max: 255 }),
          }),
        ),
        async ({ size, index, digests, target, at, xor }) => {
          const { text, digest } = await proofOf(size, index, digests);
          expect(await verdicts(text, digest)).toEqual(['PASS', 'PASS', 'PASS']);
          let changedText = text;
          let changedDigest = digest;
          if (target === 'proof') {
            const bytes = Buffer.from(text, 'utf8');
            bytes[at % bytes.length]! ^= xor;
            changedText = bytes.toString('utf8');
          } else {
            const bytes = Buffer.from(digest, 'hex');
            bytes[at % 32]! ^= xor;
            changedDigest = bytes.toString('hex');
          }
          const got = await verdicts(changedText, changedDigest);
          const unchanged = changedDigest === digest && meaning(changedText) === meaning(text);
          const want = unchanged ? 'PASS' : 'FAIL';
          expect(got).toEqual([want, want, want]);
        },
      ),
      { numRuns: 300, seed: Number(process.env.STELE_PROPERTY_SEED ?? Date.now() % 2 ** 31) },
    );
  }, 300_000);
});
