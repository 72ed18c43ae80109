// Lints probe files with the repository's biome.jsonc in a scratch copy: what a lint rule
// test plants, and the errors the linter reports for each file, as `<category>: <message>`.
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { scratchDir } from '../helpers/tmp.js';
import { repoRoot } from '../helpers/vectors.js';

const BIOME = path.join(repoRoot, 'node_modules', '.bin', 'biome');

interface Diagnostic {
  readonly category: string;
  readonly severity: string;
  readonly message: string;
  readonly location: { readonly path: string };
}

/** Lints `files` (path → source); returns each file's error diagnostics. */
export async function lintErrors(files: Record<string, string>): Promise<Map<string, string[]>> {
  const dir = scratchDir('stele-lint-');
  copyFileSync(path.join(repoRoot, 'biome.jsonc'), path.join(dir, 'biome.jsonc'));
  for (const [name, source] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), source);
  }
  const out = await promisify(execFile)(BIOME, ['lint', '--vcs-enabled=false', '--reporter=json', '.'], {
    cwd: dir,
  }).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  const report = JSON.parse(out.stdout) as { diagnostics: Diagnostic[] };
  const byFile = new Map<string, string[]>(Object.keys(files).map((f) => [f, []]));
  for (const d of report.diagnostics)
    if (d.severity === 'error') byFile.get(d.location.path)?.push(`${d.category}: ${d.message}`);
  return byFile;
}
