// Citations stay inside the repository: every `docs/<file>.md §N` a comment or document cites
// names a file of docs/ and a section heading it has, and nothing cites the design or the
// specification outside the repository (by the names the shared design and spec files go by).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/vectors.js';

const SKIP = new Set(['node_modules', 'dist', '.git', '.scratch', 'cdk.out', 'vectors']);

function* sources(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* sources(p);
    else if (/\.(ts|go|md|css|html)$/.test(name)) yield p;
  }
}

/** The section numbers a document defines: `## 1.`, `### 1.4`, and numbered items under a `## 3.` heading. */
function sections(doc: string): Set<string> {
  const found = new Set<string>();
  let top = '';
  for (const line of doc.split('\n')) {
    const h = /^#{2,4} (\d+(?:\.\d+)*)\.?\s/.exec(line);
    if (h) {
      found.add(h[1]!);
      top = h[1]!.split('.')[0]!;
      continue;
    }
    const item = /^(\d+)\. /.exec(line);
    if (item && top) found.add(`${top}.${item[1]}`);
  }
  return found;
}

describe('citations', () => {
  const files = [
    join(repoRoot, 'README.md'),
    ...['src', 'cli', 'packages', 'infra', 'bench', 'test', 'docs'].flatMap((d) => [...sources(join(repoRoot, d))]),
  ];

  it('cite only documents of this repository', () => {
    const outside = files.flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .map((line, i) => ({ where: `${relative(repoRoot, f)}:${i + 1}`, line }))
        .filter(({ line }) => /\bDESIGN(\.md)?\b|\.\.\/shared\/spec|\bspec §/.test(line)),
    );
    // The interop check names ../shared/tlogcheck as the outside checker CI also runs.
    expect(outside.map((o) => o.where)).toEqual([]);
  });

  it('resolve: each docs/<name>.md §N names a file and a section it has', () => {
    const docs = new Map(
      readdirSync(join(repoRoot, 'docs'))
        .filter((n) => n.endsWith('.md'))
        .map((n) => [n, sections(readFileSync(join(repoRoot, 'docs', n), 'utf8'))]),
    );
    const broken: string[] = [];
    for (const f of files) {
      const text = readFileSync(f, 'utf8');
      for (const m of text.matchAll(/docs\/([a-z-]+\.md) §(\d+(?:\.\d+)*)/g)) {
        const have = docs.get(m[1]!);
        if (!have?.has(m[2]!)) broken.push(`${relative(repoRoot, f)}: docs/${m[1]} §${m[2]}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('name files that exist: every `src/…`, `test/…`, `cli/…` path in docs/ and the README', () => {
    const docs = [join(repoRoot, 'README.md'), ...sources(join(repoRoot, 'docs'))];
    const missing = docs.flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/`((?:src|test|cli|infra|bench|packages)\/[A-Za-z0-9_./-]+?)`/g)]
        .map((m) => m[1]!.replace(/[.,:;]$/, ''))
        .filter((p) => !p.includes('*') && !existsSync(join(repoRoot, p)))
        .map((p) => `${relative(repoRoot, f)}: ${p}`),
    );
    expect(missing).toEqual([]);
  });
});
