// How the user runs this CLI, so hints print a command they can paste: `stele` when the
// `stele` on PATH is this very script, else `npx stele` under npx or where npx would run it
// (a clone's node_modules/.bin), else `node <path>`.
import { realpathSync, statSync } from 'node:fs';
import { delimiter, dirname, join, relative } from 'node:path';

let cached: string | undefined;

export function invocation(): string {
  cached ??= findInvocation(process.argv[1] ?? '', process.env.PATH ?? '');
  return cached;
}

function findInvocation(script: string, path: string): string {
  const self = realOrNull(script);
  if (self === null) return 'stele';
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'stele');
    if (realOrNull(candidate) === self && isExecutable(candidate)) {
      // npx puts the package's .bin on PATH for the one run: the user typed `npx stele`.
      return /[\\/]node_modules[\\/]\.bin$/.test(dir) && process.env.npm_command === 'exec' ? 'npx stele' : 'stele';
    }
  }
  // In a clone after `npm ci`, `npx stele` runs this script (packages/bin links it): the README's form.
  const local = realOrNull(join(process.cwd(), 'node_modules', '.bin', 'stele'));
  if (local && realOrNull(join(dirname(local), '..', '..', 'dist', 'cli', 'main.js')) === self) return 'npx stele';
  const rel = relative(process.cwd(), script);
  return `node ${rel.startsWith('..') || rel === '' ? script : rel}`;
}

function realOrNull(p: string): string | null {
  try {
    return realpathSync.native(p); // one system call, where the JS version lstats each component
  } catch {
    return null;
  }
}

function isExecutable(p: string): boolean {
  try {
    return (statSync(p).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** Rewrites the `stele …` commands quoted in a hint to the form the user can run. */
export function asInvoked(text: string): string {
  if (!text.includes('`stele ')) return text; // finding the invocation walks $PATH: only when needed
  const how = invocation();
  return how === 'stele' ? text : text.replace(/`stele /g, `\`${how} `);
}
