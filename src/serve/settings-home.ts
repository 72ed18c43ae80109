// Where a log keeps the settings it was started with (src/serve/log-settings.ts decides what
// they are and when a start may change them): a file in a local data directory, or an object
// in the private (never served) prefix of an S3 log. Each reads the stored text with a
// version and replaces it only if that version is still current, so two sequencers starting
// at once on one bucket cannot both store different settings.
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { dirname, join } from 'node:path';
import { isAbsent, replaceFile } from '../store/files.js';
import { type ObjectStore, VersionConflictError } from '../store/store.js';

/** The name of the stored settings: a file under a data directory's private/, a key under an S3 log's private prefix. */
export const LOG_SETTINGS_NAME = 'log-settings.json';

export interface StoredText {
  readonly text: string;
  /** Opaque token for write(): an ETag, a content hash. */
  readonly version: string;
}

export interface SettingsHome {
  /** Where the settings are, for messages: a path, or s3://bucket/key. */
  readonly where: string;
  read(): Promise<StoredText | null>;
  /**
   * Stores `text` if what is stored is still at version `expected` (null: nothing stored);
   * false if another writer stored something else in between.
   */
  write(text: string, expected: string | null): Promise<boolean>;
}

/** private/log-settings.json in a local data directory, whose lock keeps out any second writer. */
export function settingsFile(dataDir: string): SettingsHome {
  const path = join(dataDir, 'private', LOG_SETTINGS_NAME);
  return {
    where: path,
    async read() {
      try {
        const text = await fs.readFile(path, 'utf8');
        return { text, version: createHash('sha256').update(text).digest('hex') };
      } catch (e) {
        if (isAbsent(e)) return null;
        throw e;
      }
    },
    async write(text) {
      // The data directory's lock (src/store/dir-lock.ts) is held: nobody else writes here.
      await fs.mkdir(dirname(path), { recursive: true, mode: 0o700 });
      await replaceFile(path, text);
      return true;
    },
  };
}

/** An object of `store` (an S3 log's private prefix), replaced by compare-and-swap on its ETag. */
export function settingsObject(store: Pick<ObjectStore, 'getVersioned' | 'swap'>, where: string): SettingsHome {
  return {
    where,
    async read() {
      const obj = await store.getVersioned(LOG_SETTINGS_NAME);
      return obj && { text: Buffer.from(obj.data).toString('utf8'), version: obj.version };
    },
    async write(text, expected) {
      try {
        await store.swap(LOG_SETTINGS_NAME, Buffer.from(text), expected);
        return true;
      } catch (e) {
        if (e instanceof VersionConflictError) return false;
        throw e;
      }
    },
  };
}
