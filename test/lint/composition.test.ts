// The log's parts are composed once (docs/architecture.md, "Composition"): outside
// src/sequencer, only src/serve/open-sequencer.ts builds a Sequencer — the local log, the AWS
// log and every command that opens a log go through it — and only src/serve/backends.ts
// calls a sequencer's submit for the server (the ledger's duplicate rule and the control
// plane's records both reach it through Backend.append).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/vectors.js';
import { execFileSync } from 'node:child_process';

/** What in `source` builds a Sequencer: a value import of the class, or a call of Sequencer.open. */
function sequencerBuilds(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(/import\s+(type\s+)?\{([^}]*)\}\s+from\s+'[^']*sequencer\/sequencer\.js'/g)) {
    const names = m[2]!.split(',').map((n) => n.trim());
    if (!m[1] && names.includes('Sequencer')) found.push('imports the Sequencer class');
  }
  if (/\bSequencer\.open\(/.test(source)) found.push('calls Sequencer.open');
  return found;
}

/** Calls of a sequencer's submit in `source`. */
function sequencerSubmits(source: string): number {
  return [...source.matchAll(/\bsequencer\.submit\(/g)].length;
}

const productFiles = execFileSync(
  'git',
  ['ls-files', '--cached', '--others', '--exclude-standard', 'src', 'cli', 'bench'],
  { cwd: repoRoot, encoding: 'utf8' },
)
  .split('\n')
  .filter((f) => f.endsWith('.ts') && !f.startsWith('src/sequencer/'));
const read = (f: string) => readFileSync(path.join(repoRoot, f), 'utf8');

describe('composition', () => {
  it('outside src/sequencer, only src/serve/open-sequencer.ts builds a Sequencer', () => {
    const builders = productFiles.filter((f) => sequencerBuilds(read(f)).length > 0);
    expect(builders).toEqual(['src/serve/open-sequencer.ts']);
  });

  it('the check sees a planted builder, and lets a type import pass', () => {
    expect(sequencerBuilds("import { Sequencer } from '../sequencer/sequencer.js';\n")).toEqual([
      'imports the Sequencer class',
    ]);
    expect(sequencerBuilds('const s = await Sequencer.open(opts);')).toEqual(['calls Sequencer.open']);
    expect(sequencerBuilds("import type { Sequencer } from '../sequencer/sequencer.js';\n")).toEqual([]);
  });

  it("the server's submit is composed once, in src/serve/backends.ts", () => {
    const submitters = productFiles.filter((f) => f.startsWith('src/') && sequencerSubmits(read(f)) > 0);
    expect(submitters).toEqual(['src/serve/backends.ts']);
  });
});
