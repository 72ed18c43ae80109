// The hammer's shared view (src/hammer/view.ts) over a real log: an anchor acknowledged with a
// checkpoint the view already holds is proved against it even if the log never grows again;
// one acknowledged with a hash the log does not hold is a failure, through the same shortcut.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCheckpoint } from '../../src/core/checkpoint.js';
import { SIG_ED25519, makeVerifier } from '../../src/core/note.js';
import { SharedView } from '../../src/hammer/view.js';
import { localPaths } from '../../src/serve/local-log.js';
import { LogReader } from '../../src/read/reader.js';
import { loadOrCreateKey } from '../../src/keys/local-signer.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { makeLog } from '../helpers/logs.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'hammer-view.test/log';

describe('SharedView', () => {
  it('proves an anchor acknowledged with a checkpoint already seen, with no later checkpoint to come', async () => {
    const dataDir = scratchDir('stele-hammer-view-');
    const { publicDir, keyFile } = localPaths(dataDir);
    const notes: string[] = [];
    await makeLog(
      dataDir,
      ORIGIN,
      [300, 50],
      () => void notes.push(readFileSync(join(publicDir, 'checkpoint'), 'utf8')),
    );
    const verifier = makeVerifier(ORIGIN, SIG_ED25519, (await loadOrCreateKey(keyFile, ORIGIN)).signer.publicKey);
    const last = notes[1]!;

    // The entry hashes the log answered with, read through a verifying reader.
    const trusted = new LogReader(new FsObjectStore(publicDir));
    const cp = openCheckpoint(last, verifier);
    trusted.trust({ size: cp.size, root: cp.root });
    const hashOf = async (seq: number) => (await trusted.entry(seq, { size: cp.size, root: cp.root })).entryHash;

    const view = new SharedView(new LogReader(new FsObjectStore(publicDir), { unverified: true }), verifier);
    expect((await view.observe(last, 'checkpoint'))?.size).toBe(350);
    // Two writers acknowledged with the same checkpoint, after the view verified it.
    view.expect(10, await hashOf(10));
    view.expect(320, await hashOf(320));
    expect(await view.observe(last, 'the answer for leaf 10')).toEqual({ size: cp.size, root: cp.root });
    expect(view.unverified).toBe(0);
    expect(view.counts.inclusionProofs).toBe(2);
    expect(view.failureCount).toBe(0);

    // A hash the log does not hold at that leaf fails, through the same path.
    view.expect(11, await hashOf(12));
    await view.observe(last, 'the answer for leaf 11');
    expect(view.unverified).toBe(0);
    expect(view.failureCount).toBe(1);
    expect(view.failures[0]).toMatch(/anchor at leaf 11 .* is not included in checkpoint 350/);
  });
});
