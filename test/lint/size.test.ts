// Size limits of product code (docs/architecture.md, "Size"): Biome refuses a function over
// 80 lines and a file over 500 (blank lines not counted) under src/, cli/, infra/ and
// packages/*/src/, leaves tests alone, and exempts only the files the doc's table lists —
// the table and biome.jsonc's exceptions are the same list.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/vectors.js';
import { lintErrors } from './scratch-lint.js';

const longFunction = (name: string, lines: number) =>
  `export function ${name}(): number {\n  let n = 0;\n${'  n += 1;\n'.repeat(lines)}  return n;\n}\n`;
const longFile = (lines: number) =>
  Array.from({ length: lines }, (_, i) => `export const c${i} = ${i};`).join('\n') + '\n';

/** The exceptions the doc's table lists: file → rule (function or file). */
function documented(): Map<string, string> {
  const doc = readFileSync(path.join(repoRoot, 'docs/architecture.md'), 'utf8');
  const table = doc.slice(doc.indexOf('<!-- size:exceptions -->'), doc.indexOf('<!-- size:end -->'));
  return new Map([...table.matchAll(/^\| `([^`]+)` \| (function|file) \|/gm)].map((m) => [m[1]!, m[2]!]));
}

/** The exceptions biome.jsonc makes: file → rule switched off. */
function configured(): Map<string, string> {
  const text = readFileSync(path.join(repoRoot, 'biome.jsonc'), 'utf8').replace(/^\s*\/\/.*$/gm, '');
  const config = JSON.parse(text.replace(/,(\s*[}\]])/g, '$1')) as {
    overrides: { includes: string[]; linter?: { rules?: Record<string, Record<string, unknown>> } }[];
  };
  const out = new Map<string, string>();
  for (const o of config.overrides) {
    const rules = o.linter?.rules ?? {};
    for (const f of o.includes) {
      if (rules.complexity?.noExcessiveLinesPerFunction === 'off') out.set(f, 'function');
      if (rules.style?.noExcessiveLinesPerFile === 'off') out.set(f, 'file');
    }
  }
  return out;
}

describe('size limits', () => {
  it('refuse a long function and a long file in product code, and leave tests alone', async () => {
    const r = await lintErrors({
      'src/core/long-function.ts': longFunction('tooLong', 90),
      'cli/commands/long-function.ts': longFunction('tooLong', 90),
      'src/store/long-file.ts': longFile(520),
      'src/core/fine.ts': longFunction('fine', 60),
      'test/core/long.test.ts': longFunction('helper', 200),
    });
    const rule = (ms: string[] | undefined, name: string) => (ms ?? []).filter((m) => m.includes(name));
    expect(rule(r.get('src/core/long-function.ts'), 'noExcessiveLinesPerFunction')).toHaveLength(1);
    expect(rule(r.get('cli/commands/long-function.ts'), 'noExcessiveLinesPerFunction')).toHaveLength(1);
    expect(rule(r.get('src/store/long-file.ts'), 'noExcessiveLinesPerFile')).toHaveLength(1);
    expect(r.get('src/core/fine.ts') ?? []).toEqual([]);
    expect(r.get('test/core/long.test.ts') ?? []).toEqual([]);
  });

  it('exempt only the files docs/architecture.md lists, each for the rule it names', async () => {
    expect(configured()).toEqual(documented());
    const r = await lintErrors({ 'src/control/openapi.ts': longFunction('exempt', 120) });
    expect(r.get('src/control/openapi.ts') ?? []).toEqual([]);
  });
});
