// The size of @stele/verify as users meet it: the `npm pack` tarball, and the verifier in a
// browser bundle (the package with its dependencies, minified, then gzipped) — what a page
// that verifies proofs downloads. Figures only; no threshold is asserted.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'vite';
import { repoRoot } from '../test/helpers/vectors.js';

export default async function run(): Promise<void> {
  const pkg = join(repoRoot, 'packages', 'verify');
  execFileSync('npm', ['run', '-s', 'build'], { cwd: pkg, stdio: 'ignore' });
  const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: pkg, encoding: 'utf8' })) as {
    size: number;
    unpackedSize: number;
  }[];
  const out = mkdtempSync(join(tmpdir(), 'stele-verify-size-'));
  try {
    await build({
      root: pkg,
      configFile: false,
      logLevel: 'silent',
      publicDir: false,
      build: {
        outDir: out,
        target: 'es2022',
        minify: true,
        lib: { entry: join(pkg, 'src', 'index.ts'), formats: ['es'], fileName: () => 'bundle.js' },
      },
    });
    const bundle = readFileSync(join(out, 'bundle.js'));
    console.log(`packed: ${packed!.size} bytes`);
    console.log(`unpacked: ${packed!.unpackedSize} bytes`);
    console.log(`browser bundle minified: ${bundle.length} bytes`);
    console.log(`browser bundle minified+gzip: ${gzipSync(bundle, { level: 9 }).length} bytes`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
