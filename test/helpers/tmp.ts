// Scratch directories for a test file, removed when the file's tests are done (vitest
// evaluates this module once per test file, so each file cleans up after itself).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';

const made: string[] = [];

afterAll(() => {
  for (const dir of made.splice(0)) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // A server still winding down may hold it: leftover scratch, not a test failure.
    }
  }
});

/** A fresh directory under the system's temporary directory, named `<prefix>XXXXXX`. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
