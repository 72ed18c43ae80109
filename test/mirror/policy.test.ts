// The policy a log publishes with its mirrors (withCosigners): each mirror a witness line;
// k of them required beside the witnesses' quorum, or listed only with k = 0; the text
// reads back to the same policy and its quorum needs exactly what it says.
import { describe, expect, it } from 'vitest';
import { SIG_COSIGNATURE_V1, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import {
  type PolicyWitness,
  formatPolicy,
  minimumCosigners,
  parsePolicy,
  quorumMet,
  thresholdPolicy,
  withCosigners,
} from '../../src/core/tlog-policy.js';

const cosigner = (name: string, fill: number): PolicyWitness => ({
  name,
  vkey: formatVkey(
    makeVerifier(name, SIG_COSIGNATURE_V1, new SeedSigner(name, new Uint8Array(32).fill(fill)).publicKey),
  ),
});
const LOG = {
  vkey: formatVkey(
    makeVerifier('p.test/log', 0x01, new SeedSigner('p.test/log', new Uint8Array(32).fill(1)).publicKey),
  ),
};
const W = [cosigner('w1', 2), cosigner('w2', 3)];
const M = [cosigner('m1', 4), cosigner('m2', 5)];

describe('a published policy with mirrors', () => {
  it('requires k mirrors and the witness quorum, and reads back the same', () => {
    const p = withCosigners(thresholdPolicy([LOG], W, 1), M, 1, 'mirrors');
    expect(parsePolicy(formatPolicy(p))).toEqual(p);
    expect(p.witnesses.map((w) => w.name)).toEqual(['w1', 'w2', 'm1', 'm2']);
    expect(minimumCosigners(p)).toBe(2);
    expect(quorumMet(p, new Set(['w1']))).toBe(false);
    expect(quorumMet(p, new Set(['m2']))).toBe(false);
    expect(quorumMet(p, new Set(['w2', 'm2']))).toBe(true);
  });

  it('with no witness quorum, the mirrors are the quorum; with k = 0 they are only listed', () => {
    const none = thresholdPolicy([LOG], [], 0);
    const required = withCosigners(none, M, 2, 'mirrors');
    expect(formatPolicy(required)).toContain('group mirrors all m1 m2\nquorum mirrors\n');
    expect(quorumMet(required, new Set(['m1']))).toBe(false);
    expect(quorumMet(required, new Set(['m1', 'm2']))).toBe(true);
    const listed = withCosigners(thresholdPolicy([LOG], W, 2), M, 0, 'mirrors');
    expect(listed.quorum).toBe(thresholdPolicy([LOG], W, 2).quorum);
    expect(quorumMet(listed, new Set(['w1', 'w2']))).toBe(true);
    expect(minimumCosigners(listed)).toBe(2);
  });

  it('refuses a mirror named as a witness, and more mirrors required than listed', () => {
    expect(() => withCosigners(thresholdPolicy([LOG], W, 1), [cosigner('w1', 9)], 1, 'mirrors')).toThrow(
      /already a witness/,
    );
    expect(() => withCosigners(thresholdPolicy([LOG], W, 1), M, 3, 'mirrors')).toThrow(/only 2 listed/);
  });
});
