// A module hook for tests of what the CLI loads: `node --import <hook>` (or NODE_OPTIONS, which
// worker threads follow too) appends the URL of every module the process resolves or loads to
// the file $LOADED names.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** Writes the hook into `dir`; returns the file to pass to `--import`. */
export function writeModuleHook(dir: string): string {
  const loader = join(dir, 'loader.mjs');
  writeFileSync(
    loader,
    `import { appendFileSync } from 'node:fs';
export async function load(url, context, next) { appendFileSync(process.env.LOADED, url + '\\n'); return next(url, context); }
export async function resolve(specifier, context, next) { const r = await next(specifier, context); appendFileSync(process.env.LOADED, r.url + '\\n'); return r; }
`,
  );
  const hook = join(dir, 'hook.mjs');
  writeFileSync(
    hook,
    `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(loader).href)});\n`,
  );
  return hook;
}
