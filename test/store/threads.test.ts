// Worker threads are terminated only once their modules are evaluated (src/store/threads.ts):
// terminating one while a top-level await in its graph is still pending aborts the process
// in V8, which a server stopped right after it started did (SIGTRAP, 3 runs in 8).
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startModuleWorker, terminateWhenLoaded } from '../../src/store/threads.js';

const dir = mkdtempSync(join(tmpdir(), 'stele-threads-'));
// The worker modules below are ES modules (top-level await), as this package's are.
writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const threads = pathToFileURL(join(import.meta.dirname, '../../src/store/threads.ts')).href;

/** A worker module next to `dir` that waits `ms` at its top level, marks `flag`, then announces (or not). */
function workerModule(name: string, ms: number, flag: string, announce: boolean): string {
  writeFileSync(
    join(dir, `${name}.ts`),
    [
      `import { writeFileSync } from 'node:fs';`,
      `import { announceLoaded } from ${JSON.stringify(threads)};`,
      `await new Promise((r) => setTimeout(r, ${ms}));`,
      `writeFileSync(${JSON.stringify(flag)}, '');`,
      announce ? 'announceLoaded();' : '',
    ].join('\n'),
  );
  return pathToFileURL(join(dir, 'from.ts')).href;
}

describe('terminateWhenLoaded', () => {
  it('waits for a worker still in its top-level await to announce itself, then terminates it', async () => {
    const flag = join(dir, 'slow-loaded');
    const worker = startModuleWorker(workerModule('slow', 300, flag, true), 'slow');
    expect(existsSync(flag)).toBe(false);
    await terminateWhenLoaded(worker);
    // Terminated only after its module ran to its end.
    expect(existsSync(flag)).toBe(true);
    expect(worker.threadId).toBe(-1);
  });

  it('terminates a worker that never announces itself once the wait is over', async () => {
    const flag = join(dir, 'silent-loaded');
    const worker = startModuleWorker(workerModule('silent', 10_000, flag, false), 'silent');
    await terminateWhenLoaded(worker, 200);
    expect(worker.threadId).toBe(-1);
    expect(existsSync(flag)).toBe(false);
  });
});
