// The embedded-defaults log: everything under one data directory.
//   <data>/log/        public objects (tiles, bundles, checkpoint), served as the CDN would
//   <data>/private/    log.key (0600), lock.json, staging/ — never served
import { join } from 'node:path';
import type { Logger } from 'pino';
import { loadOrCreateKey } from '../signer.js';
import type { BatchListener, CheckpointWitnessing } from '../sequencer/contract.js';
import { Sequencer } from '../sequencer/sequencer.js';
import { FsObjectStore } from '../store/fs.js';
import { StoreLock } from '../store/lock.js';

export interface LocalLogOptions {
  readonly dataDir: string;
  readonly origin: string;
  readonly batchInterval?: number;
  readonly maxBatch?: number;
  readonly maxPending?: number;
  readonly fsync?: boolean;
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

export async function openLocalLog(o: LocalLogOptions) {
  const paths = localPaths(o.dataDir);
  const { signer, created } = await loadOrCreateKey(paths.keyFile, o.origin);
  const store = new FsObjectStore(paths.publicDir, { fsync: o.fsync ?? true });
  const privateStore = new FsObjectStore(paths.privateDir, { fsync: o.fsync ?? true });
  await Promise.all([store.removeTempFiles(), privateStore.removeTempFiles()]);
  const sequencer = await Sequencer.open({
    origin: o.origin,
    signer,
    store,
    staging: privateStore,
    lock: new StoreLock(privateStore),
    batchInterval: o.batchInterval,
    maxBatch: o.maxBatch,
    maxPending: o.maxPending,
    listeners: o.listeners,
    witnessing: o.witnessing,
    logger: o.logger,
  });
  return { sequencer, store, signer, keyCreated: created, paths };
}
