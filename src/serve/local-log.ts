// The embedded-defaults log: everything under one data directory.
//   <data>/log/        public objects (tiles, bundles, checkpoint), served as the CDN would
//   <data>/private/    log.key (0600), lock.json, staging/ — never served
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { NoteSigner, SeedSigner } from '../core/note.js';
import { loadOrCreateKey } from '../keys/local-signer.js';
import type { BatchListener, CheckpointWitnessing } from '../sequencer/contract.js';
import { FsObjectStore } from '../store/fs.js';
import { StoreLock } from '../store/lock.js';
import { type BatchSettings, type SequencerParts, openSequencer } from './open-sequencer.js';

export interface LocalLogOptions extends BatchSettings {
  readonly dataDir: string;
  readonly origin: string;
  readonly fsync?: boolean;
  /** Delete a tile's partials once its full tile is durable (default true; see FsStoreOptions). */
  readonly sweepPartials?: boolean;
  readonly index?: SequencerParts['index'];
  readonly listeners?: readonly BatchListener[];
  readonly witnessing?: CheckpointWitnessing;
  readonly logger?: Logger;
}

export function localPaths(dataDir: string) {
  return {
    publicDir: join(dataDir, 'log'),
    privateDir: join(dataDir, 'private'),
    keyFile: join(dataDir, 'private', 'log.key'),
  };
}

/** `signer`: the checkpoint key, if not the data directory's key file (e.g. a key in an HSM). */
export async function openLocalLog<S extends NoteSigner = SeedSigner>(o: LocalLogOptions & { readonly signer?: S }) {
  const paths = localPaths(o.dataDir);
  const { signer, created } = o.signer
    ? { signer: o.signer, created: false }
    : ((await loadOrCreateKey(paths.keyFile, o.origin)) as unknown as { signer: S; created: boolean });
  // A tile's partials go once its full tile is durable: under a trickle of small batches they were most of the bytes.
  const store = new FsObjectStore(paths.publicDir, { fsync: o.fsync ?? true, sweepPartials: o.sweepPartials ?? true });
  const privateStore = new FsObjectStore(paths.privateDir, { fsync: o.fsync ?? true });
  await Promise.all([store.removeTempFiles(), privateStore.removeTempFiles()]);
  const { sequencer, indexReady, stopIndexCatchUp } = await openSequencer({
    origin: o.origin,
    signer,
    store,
    staging: privateStore,
    lock: new StoreLock(privateStore),
    batchInterval: o.batchInterval,
    maxBatch: o.maxBatch,
    minBatchSpacing: o.minBatchSpacing,
    maxPending: o.maxPending,
    index: o.index,
    listeners: o.listeners,
    witnessing: o.witnessing,
    logger: o.logger,
  });
  return { sequencer, indexReady, stopIndexCatchUp, store, signer, keyCreated: created, paths };
}
