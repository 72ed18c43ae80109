// IndexFollower (src/index/follower.ts) over a real log written by the sequencer: a replica's
// own LMDB index fed from the published checkpoint and the record bundles. It serves a
// checkpoint only once every entry under it is indexed from bundles that pass the reader's
// checks; a corrupt bundle leaves it on the last good checkpoint, reporting the lag.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { IndexFollower } from '../../src/index/follower.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { localPaths } from '../../src/serve/local-log.js';
import { SIG_ED25519, makeVerifier } from '../../src/core/note.js';
import { LogReader } from '../../src/read/reader.js';
import { type PublishedCheckpoint, decodePublishedCheckpoint } from '../../src/sequencer/contract.js';
import { loadOrCreateKey } from '../../src/keys/local-signer.js';
import { CHECKPOINT_JSON_KEY } from '../../src/store/layout.js';
import { FsObjectStore } from '../../src/store/fs.js';
import { tilePath } from '../../src/core/tiles.js';
import { digestOf, makeLog } from '../helpers/logs.js';
import { scratchDir } from '../helpers/tmp.js';
import { firstCandidate } from '../helpers/index-rows.js';

const ORIGIN = 'follower.test/log';

describe('IndexFollower', () => {
  it('serves a checkpoint only once its entries are indexed from verified bundles; catches up from empty', async () => {
    const dataDir = scratchDir('stele-follower-');
    const { publicDir, keyFile } = localPaths(dataDir);
    const published: Uint8Array[] = [];
    await makeLog(
      dataDir,
      ORIGIN,
      [300, 50],
      () => void published.push(readFileSync(join(publicDir, CHECKPOINT_JSON_KEY))),
    );
    const verifier = makeVerifier(ORIGIN, SIG_ED25519, (await loadOrCreateKey(keyFile, ORIGIN)).signer.publicKey);

    const follow = (dir: string) => {
      const reader = new LogReader(new FsObjectStore(publicDir));
      const index = new LmdbIndex(join(dir, 'index'));
      let next: Uint8Array = published[0]!;
      const follower = new IndexFollower(index, reader, async () => {
        const cp: PublishedCheckpoint = decodePublishedCheckpoint(next, verifier);
        reader.trust(cp);
        return cp;
      });
      return { follower, index, publish: (bytes: Uint8Array) => void (next = bytes) };
    };

    const a = follow(scratchDir('stele-follower-a-'));
    expect(a.follower.checkpoint()).toBeUndefined();
    expect((await a.follower.poll())?.size).toBe(300);
    expect(a.follower.status()).toMatchObject({ published: 300, indexed: 300, served: 300, lag: 0 });
    expect(await a.index.findByDigest(digestOf(ORIGIN, 299), firstCandidate)).toBe(299);

    // The bundle holding leaves 256..349 is corrupted: the next checkpoint is not served.
    const bundle = join(publicDir, tilePath({ kind: 'records', index: 1, width: 94 }));
    const good = readFileSync(bundle);
    const bad = Buffer.from(good);
    bad[bad.length - 1]! ^= 1;
    writeFileSync(bundle, bad);
    a.publish(published[1]!);
    await expect(a.follower.poll()).rejects.toThrow();
    expect(a.follower.checkpoint()?.size).toBe(300);
    expect(a.follower.status()).toMatchObject({ published: 350, served: 300, lag: 50 });
    expect(await a.index.findByDigest(digestOf(ORIGIN, 320), firstCandidate)).toBeUndefined();

    // Repaired: it catches up and serves 350.
    writeFileSync(bundle, good);
    expect((await a.follower.poll())?.size).toBe(350);
    expect(a.follower.status()).toMatchObject({ served: 350, lag: 0 });
    expect(await a.index.findByDigest(digestOf(ORIGIN, 320), firstCandidate)).toBe(320);

    // A replica from an empty directory reaches the same index.
    const b = follow(scratchDir('stele-follower-b-'));
    b.publish(published[1]!);
    expect((await b.follower.poll())?.size).toBe(350);
    for (const i of [0, 1, 255, 256, 299, 349])
      expect(await b.index.findByDigest(digestOf(ORIGIN, i), firstCandidate)).toBe(
        await a.index.findByDigest(digestOf(ORIGIN, i), firstCandidate),
      );
    expect(await b.index.countsByType()).toEqual(await a.index.countsByType());
    await Promise.all([a.index.close(), b.index.close()]);
  });

  it('stopped part way (a shutdown), it serves no checkpoint it has not indexed, and a restart goes on from there', async () => {
    const dataDir = scratchDir('stele-follower-stop-');
    const { publicDir, keyFile } = localPaths(dataDir);
    await makeLog(dataDir, ORIGIN, [600]);
    const verifier = makeVerifier(ORIGIN, SIG_ED25519, (await loadOrCreateKey(keyFile, ORIGIN)).signer.publicKey);
    const indexDir = join(scratchDir('stele-follower-stop-index-'), 'index');
    const follow = () => {
      const reader = new LogReader(new FsObjectStore(publicDir));
      const index = new LmdbIndex(indexDir);
      const follower = new IndexFollower(index, reader, async () => {
        const cp = decodePublishedCheckpoint(readFileSync(join(publicDir, CHECKPOINT_JSON_KEY)), verifier);
        reader.trust(cp);
        return cp;
      });
      return { follower, index, reader };
    };

    // The shutdown comes as the first bundle is indexed.
    const first = follow();
    const onBatch = first.index.onBatch.bind(first.index);
    first.index.onBatch = async (batch) => {
      void first.follower.stop();
      await onBatch(batch);
    };
    expect(await first.follower.poll()).toBeUndefined();
    expect(first.follower.checkpoint()).toBeUndefined();
    expect(await first.index.indexedSize()).toBe(256);
    expect(await first.follower.poll()).toBeUndefined(); // stopped: no further round
    await first.index.close();

    const again = follow();
    expect((await again.follower.poll())?.size).toBe(600);
    expect(await again.index.findByDigest(digestOf(ORIGIN, 599), firstCandidate)).toBe(599);
    expect(await again.index.countsByType()).toEqual({ ledger_anchor: 600 });
    await again.index.close();
  });
});
