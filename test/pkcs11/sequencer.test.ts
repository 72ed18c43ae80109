// The sequencer signing through SoftHSM2 when the token fails: the batch whose sign fails
// publishes nothing, the pool reopens a session, the sequencer retries the anchors, and the
// log carries on with checkpoints that verify under the token's key (checked by openNote).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { SIG_ED25519, makeVerifier, openNote } from '../../src/core/note.js';
import { Pkcs11Signer, generateEd25519, keyUri } from '../../src/pkcs11/signer.js';
import { Token } from '../../src/pkcs11/token.js';
import { scratchDir } from '../helpers/tmp.js';
import { softHsm } from './softhsm.js';

const ORIGIN = 'hsm-seq.test/log';
const req = (i: number) =>
  anchorRequest('ledger_anchor', 'Anchored', createHash('sha256').update(`hsm/${i}`).digest('hex'));

describe('the sequencer with a token key that fails', () => {
  let signer: Pkcs11Signer;
  beforeAll(async () => {
    const uri = softHsm().token('seq').uri('log');
    const token = Token.open({ uri: keyUri(uri) });
    await generateEd25519(token, keyUri(uri)).finally(() => token.close());
    signer = await Pkcs11Signer.open({ uri, name: ORIGIN });
  });
  afterAll(() => signer?.close());

  it('retries the failed batch on a fresh session; every published checkpoint verifies', async () => {
    const dataDir = scratchDir('stele-hsm-seq-');
    const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 5, signer });
    const verifier = makeVerifier(ORIGIN, SIG_ED25519, signer.publicKey);
    const published = () => openNote(readFileSync(join(dataDir, 'log', 'checkpoint'), 'utf8'), verifier).body;
    try {
      await log.sequencer.submit(req(0));
      const before = published();
      expect(before).toContain('\n1\n');

      // The token drops the pooled session (as a reset would): the next sign fails.
      await signer.token.withSession((s) => signer.token.lib.C_CloseSession(s.handle));
      const failures = signer.stats.failures;
      // The batch whose sign failed was not published; its anchor was sequenced again and
      // signed on a fresh session, so it is acknowledged under a checkpoint that verifies.
      await log.sequencer.submit(req(1));
      expect(signer.stats.failures).toBe(failures + 1);
      expect(signer.token.stats.sessionErrors).toBeGreaterThan(0);
      const after = published();
      expect(after.split('\n')[1]).toBe('2');
      await log.sequencer.submit(req(2));
      expect(published().split('\n')[1]).toBe('3');
    } finally {
      await log.sequencer.close();
    }
  });
});
