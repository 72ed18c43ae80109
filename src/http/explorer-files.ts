// Where the built explorer (dist/explorer, see vite.config.ts) is: for `stele serve`, which
// serves it, and `stele ledger mirror --with-explorer`, which copies it into a mirror.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * `dir` if given, else $STELE_EXPLORER_DIR, else dist/explorer of this checkout, whether this
 * module runs compiled (dist/src) or from source (src); null when none holds an index.html.
 */
export function findExplorerDir(dir?: string): string | null {
  const candidates = [
    dir,
    process.env.STELE_EXPLORER_DIR,
    fileURLToPath(new URL('../../explorer/', import.meta.url)),
    fileURLToPath(new URL('../../dist/explorer/', import.meta.url)),
  ].filter((d): d is string => typeof d === 'string' && d !== '');
  return candidates.find((d) => existsSync(join(d, 'index.html'))) ?? null;
}
