// The embedded lookup index on LMDB. One write transaction per batch; idempotent, so a
// batch seen twice (recovery re-applying a staged batch) changes nothing.
import { mkdirSync } from 'node:fs';
import { type RootDatabase, open } from 'lmdb';
import type { IntegratedBatch } from '../sequencer/sequencer.js';
import type { LookupIndex } from './types.js';

const SIZE_KEY = 'meta:size';

export class IndexGapError extends Error {
  override name = 'IndexGapError';
}

export class LmdbIndex implements LookupIndex {
  private readonly db: RootDatabase<number, string>;

  constructor(path: string) {
    mkdirSync(path, { recursive: true });
    this.db = open<number, string>({ path, compression: false });
  }

  async onBatch(batch: IntegratedBatch): Promise<void> {
    const indexed = this.db.get(SIZE_KEY) ?? 0;
    const end = batch.fromSize + batch.entries.length;
    if (end <= indexed) return;
    if (batch.fromSize > indexed) throw new IndexGapError(`index holds ${indexed} leaves; batch starts at ${batch.fromSize}`);
    await this.db.transaction(() => {
      const counts = new Map<string, number>();
      for (let seq = indexed; seq < end; seq++) {
        const e = batch.entries[seq - batch.fromSize]!;
        const dk = `d:${e.digest}`;
        if (this.db.get(dk) === undefined) this.db.put(dk, seq);
        if (e.artifactId) this.db.put(`a:${e.artifactId}`, seq);
        counts.set(e.type, (counts.get(e.type) ?? 0) + 1);
      }
      for (const [type, n] of counts) this.db.put(`t:${type}`, (this.db.get(`t:${type}`) ?? 0) + n);
      this.db.put(SIZE_KEY, end);
    });
  }

  async findByDigest(digest: string): Promise<number | undefined> {
    return this.db.get(`d:${digest}`);
  }

  async findByArtifact(artifactId: string): Promise<number | undefined> {
    return this.db.get(`a:${artifactId}`);
  }

  async indexedSize(): Promise<number> {
    return this.db.get(SIZE_KEY) ?? 0;
  }

  async countsByType(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const { key, value } of this.db.getRange({ start: 't:', end: 't;' })) out[key.slice(2)] = value;
    return out;
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}
