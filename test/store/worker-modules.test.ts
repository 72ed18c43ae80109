// Every module src/ starts with startModuleWorker ends its top-level code with announceLoaded():
// terminateWhenLoaded waits for that flag before terminating (terminating a worker while a
// top-level await of its graph is pending aborted the process inside V8), so a module that
// forgot it would hold every stop for the whole 5 s wait. The checker is shown a module
// without the call, and refuses it.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = new URL('../../src/', import.meta.url).pathname;
const STARTED = /startModuleWorker\(\s*import\.meta\.url,\s*'([a-z0-9-]+)'/g;

/** The worker modules src/ starts, as paths relative to src/. */
function workerModules(): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(SRC, { recursive: true, encoding: 'utf8' })) {
    if (!entry.endsWith('.ts')) continue;
    const text = readFileSync(join(SRC, entry), 'utf8');
    for (const m of text.matchAll(STARTED)) out.push(relative(SRC, join(SRC, dirname(entry), `${m[1]}.ts`)));
  }
  return [...new Set(out)].sort();
}

/** Why a worker module's source does not announce its load as its last statement, or null if it does. */
function announcesLast(source: string): string | null {
  if (!/^import \{[^}]*\bannounceLoaded\b[^}]*\} from '[^']*threads\.js';$/m.test(source))
    return 'does not import announceLoaded';
  if (!/\nannounceLoaded\(\);\s*$/.test(source)) return 'does not end with announceLoaded();';
  return null;
}

describe('worker modules', () => {
  it('each module started with startModuleWorker announces its load at the end of its top-level code', () => {
    const modules = workerModules();
    expect(modules).toEqual([
      'index/rebuild-worker.ts',
      'read/bundle-check-worker.ts',
      'sequencer/sequencing-worker.ts',
      'store/fs-writer-thread.ts',
    ]);
    for (const m of modules) expect(announcesLast(readFileSync(join(SRC, m), 'utf8')), m).toBeNull();
  });

  it('the check refuses a module that announces too early or not at all', () => {
    const head = "import { announceLoaded } from '../store/threads.js';\n";
    expect(announcesLast(`${head}const x = 1;\nannounceLoaded();\n`)).toBeNull();
    expect(announcesLast(`${head}announceLoaded();\nawait import('./slow.js');\n`)).toBe(
      'does not end with announceLoaded();',
    );
    expect(announcesLast('const x = 1;\n')).toBe('does not import announceLoaded');
  });
});
