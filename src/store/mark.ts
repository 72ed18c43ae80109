// A number kept in an object store that only ever grows (the tree size up to which partial
// tiles were swept), for a log that keeps its lock in the bucket and has no DynamoDB. Raised
// by compare-and-swap, so two writers never lower it.
import { type ObjectStore, VersionConflictError } from './store.js';

export class StoreMark {
  constructor(
    private readonly store: ObjectStore,
    private readonly key: string,
  ) {}

  async get(): Promise<number> {
    const obj = await this.store.get(this.key);
    if (!obj) return 0;
    const n = Number(Buffer.from(obj).toString('utf8'));
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  }

  /** Raises the mark to `value` (no-op if it is already there or beyond). */
  async advance(value: number): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await this.store.getVersioned(this.key);
      const n = current ? Number(Buffer.from(current.data).toString('utf8')) : 0;
      if (Number.isSafeInteger(n) && n >= value) return;
      try {
        await this.store.swap(this.key, Buffer.from(String(value)), current?.version ?? null, { durable: false });
        return;
      } catch (e) {
        if (!(e instanceof VersionConflictError)) throw e;
      }
    }
  }
}
