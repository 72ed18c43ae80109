// Benchmark dispatcher: `npm run bench -- <name> [args]` runs bench/<name>.ts.
// A benchmark module exports a default (or `run`) async function, which is awaited; a
// module without one is assumed to have run on import. `--quick` (or BENCH_QUICK=1)
// asks a benchmark to shrink its sizes. Without a name, lists the benchmarks.
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const NOT_BENCHMARKS = new Set(['run', 'util']);

function available(): string[] {
  return readdirSync(here)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => f.slice(0, -3))
    .filter((n) => !NOT_BENCHMARKS.has(n))
    .sort();
}

async function main(): Promise<void> {
  const name = process.argv.slice(2).find((a) => !a.startsWith('-'));
  const names = available();
  if (!name) {
    console.log('usage: npm run bench -- <name> [--quick]');
    console.log(`available: ${names.join(', ')}`);
    return;
  }
  if (!names.includes(name)) {
    console.error(`unknown benchmark ${JSON.stringify(name)}; available: ${names.join(', ')}`);
    process.exitCode = 2;
    return;
  }
  const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as { default?: unknown; run?: unknown };
  const fn = typeof mod.default === 'function' ? mod.default : typeof mod.run === 'function' ? mod.run : undefined;
  const args = process.argv.slice(2);
  args.splice(args.indexOf(name), 1);
  if (fn) await (fn as (args: string[]) => Promise<void> | void)(args);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
