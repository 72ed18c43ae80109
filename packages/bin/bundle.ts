// Builds the `stele` CLI as users run it: cli/main.ts and every module it may load, bundled
// by rolldown into dist/cli/ (`npm run build`, `prepare`; `npx tsx packages/bin/bundle.ts`
// alone in about a second). A command then loads a handful of files instead of ~80 ES
// modules, each of which costs the start about 0.3 ms to resolve and link (issue 33).
//
// - Chunks: `cli-*.js` holds what every command loads (commander, the program, the command
//   tables), `client-*.js` what `ledger verify` loads besides (core, client, read and the
//   small libraries they use), `ledger-*.js` the rest of the ledger commands; the server's
//   modules stay in chunks of their own, loaded by the lazy imports of the commands that use them.
// - Worker threads: each module started by `startModuleWorker(import.meta.url, '<name>')`
//   (src/store/threads.ts) is an entry of its own, `dist/cli/<name>.js`, beside the chunk
//   that starts it, so the same relative URL finds it. The explorer is found from dist/cli
//   as from dist/src/http (src/http/explorer-files.ts): two levels below the package.
// - Packages: native (lmdb, pkcs11js), wasm (Cedar) and every library loaded only by a
//   command that needs it stay external, resolved from node_modules at run time.
// The build goes to a new directory that then replaces dist/cli whole: no file of an older
// build (a tsc output, a chunk of another hash) is left for a stale import to find, and each
// build's files are new, which the kept `--help` keys on (cli/help-cache.ts).
import { readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Plugin, RolldownMagicString, build } from 'rolldown';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Pure-JS libraries of the client path, bundled into its chunks; every other package stays external. */
const BUNDLED = ['commander', 'smol-toml', '@noble/hashes', '@noble/ed25519', 'lru-cache', 'canonicalize'];

/** What every command loads. */
const CLI_CHUNK = /\/cli\/(program|exit|verbosity|commands\/(lazy|groups))\.ts$|\/node_modules\/commander\//;
/** `stele ledger verify`: the client chunk is what it loads (its modules' static imports, from the module graph). */
const VERIFY_ROOTS = ['cli/commands/ledger.ts', 'cli/commands/ledger/verify.ts'];
/**
 * The rest of the ledger client, for its other commands, but for `ledger audit` (the whole-log
 * audit starts worker threads: node:worker_threads is loaded for it alone).
 */
const LEDGER_CHUNK =
  /\/src\/(core|client|read)\/|\/cli\/commands\/ledger(\.ts$|\/)|\/cli\/(errors|invocation)\.ts$|\/node_modules\/(smol-toml|lru-cache|canonicalize)\//;
const NOT_LEDGER = /\/src\/read\/audit\.ts$|\/cli\/commands\/ledger\/audit\.ts$/;

/** Fills `into` with the modules `roots` import, directly or not, once the module graph is built (before chunking). */
function staticClosure(roots: readonly string[], into: Set<string>): Plugin {
  return {
    name: 'static-closure',
    buildEnd() {
      const todo = [...roots];
      for (let id = todo.pop(); id !== undefined; id = todo.pop()) {
        if (into.has(id)) continue;
        into.add(id);
        todo.push(...(this.getModuleInfo(id)?.importedIds ?? []));
      }
    },
  };
}

/**
 * commander loads node:child_process at its start for executable subcommands, which stele
 * has none of (about 1.5 ms of every run): the bundle's copy loads it at a spawn.
 */
const COMMANDER_SPAWN = "const childProcess = require('node:child_process');";
const LAZY_SPAWN = "const childProcess = { spawn: (...a) => require('node:child_process').spawn(...a) };";

const lazyChildProcess: Plugin = {
  name: 'commander-lazy-child-process',
  transform(code: string, id: string) {
    if (!id.endsWith('/node_modules/commander/lib/command.js')) return null;
    if (!code.includes(COMMANDER_SPAWN)) throw new Error(`${id} no longer has: ${COMMANDER_SPAWN}`);
    // One line for one: the source map stays as it was (`map: null`).
    return { code: code.replace(COMMANDER_SPAWN, LAZY_SPAWN), map: null };
  },
};

/**
 * Node's ES-module face of a built-in module reads every export of its CommonJS object, and
 * so runs every lazy getter: `import { statSync } from 'node:fs'` loads fs/promises, the
 * streams and readline, `import { promisify } from 'node:util'` worker_threads too (34
 * modules each, ~8 ms of a run). The bundle takes the object itself instead, which loads
 * nothing more: `import { a, b as c } from "node:x"` becomes
 * `const { a, b: c } = process.getBuiltinModule("node:x")`, the same names, one line for one.
 * A name that is itself a lazy getter of an object (fs.promises: ~1 ms, unused by a command
 * that reads with blocking calls) is bound to a proxy that reads the getter at first use.
 */
const BUILTIN_IMPORT = /^import (?:([\w$]+)(?:, | ))?(?:\{([^}]*)\} )?from "(node:[\w/]+)";$/gm;

export function builtinsAsObjects(code: string): RolldownMagicString | null {
  const s = new RolldownMagicString(code);
  let changed = false;
  for (const m of code.matchAll(BUILTIN_IMPORT)) {
    const [line, whole, named, id] = m;
    const get = `process.getBuiltinModule(${JSON.stringify(id)})`;
    const decls: string[] = [];
    if (whole) decls.push(`${whole} = ${get}`);
    const eager: string[] = [];
    for (const spec of named?.split(',').map((n) => n.trim()) ?? []) {
      if (spec === '') continue;
      const [name, local = name] = spec.split(' as ') as [string, string?];
      if (isLazyObject(id!, name)) decls.push(`${local} = new Proxy({}, { get: (_, k) => ${get}.${name}[k] })`);
      else eager.push(local === name ? name : `${name}: ${local}`);
    }
    if (eager.length > 0) decls.push(`{ ${eager.join(', ')} } = ${whole ?? get}`);
    s.overwrite(m.index, m.index + line.length, `const ${decls.join(', ')};`);
    changed = true;
  }
  return changed ? s : null;
}

/** Whether `name` of built-in `id` is a getter that loads an object on first read (fs.promises). */
function isLazyObject(id: string, name: string): boolean {
  const got = Object.getOwnPropertyDescriptor(process.getBuiltinModule(id), name)?.get;
  return got !== undefined && typeof got() === 'object';
}

const builtinObjects: Plugin = {
  name: 'builtin-objects',
  renderChunk: (code) => builtinsAsObjects(code),
};

const WORKER_CALL = /startModuleWorker\(\s*import\.meta\.url,\s*'([\w-]+)'/g;

/** The worker modules the sources start by name, by that name (`dist/cli/<name>.js`). */
export function workerEntries(srcDir = join(ROOT, 'src')): Record<string, string> {
  const entries: Record<string, string> = {};
  for (const file of readdirSync(srcDir, { recursive: true, encoding: 'utf8' })) {
    if (!file.endsWith('.ts')) continue;
    for (const m of readFileSync(join(srcDir, file), 'utf8').matchAll(WORKER_CALL)) {
      const name = m[1]!;
      const module = join(srcDir, dirname(file), `${name}.ts`);
      if (entries[name] !== undefined && entries[name] !== module)
        throw new Error(`two worker modules are named ${name}: ${entries[name]} and ${module}`);
      entries[name] = module;
    }
  }
  return entries;
}

const isBundled = (id: string) => BUNDLED.some((p) => id === p || id.startsWith(`${p}/`));

/** Bundles the CLI into `outDir` (default dist/cli), replacing what was there. */
export async function bundleCli(outDir = join(ROOT, 'dist', 'cli')): Promise<void> {
  const workers = workerEntries();
  const workerFiles = new Set(Object.values(workers));
  // A worker's own module must stay its entry file, never move into a shared chunk.
  const chunk = (inIt: (id: string) => boolean) => (id: string) => inIt(id) && !workerFiles.has(id);
  const verifyPath = new Set<string>();
  const next = `${outDir}.next`;
  rmSync(next, { recursive: true, force: true });
  await build({
    cwd: ROOT,
    input: { main: join(ROOT, 'cli', 'main.ts'), ...workers },
    platform: 'node',
    tsconfig: join(ROOT, 'tsconfig.json'),
    transform: { target: 'node22' },
    external: (id) => !id.startsWith('.') && !id.startsWith('/') && !id.startsWith('\0') && !isBundled(id),
    plugins: [
      lazyChildProcess,
      builtinObjects,
      staticClosure(
        VERIFY_ROOTS.map((r) => join(ROOT, r)),
        verifyPath,
      ),
    ],
    logLevel: 'warn',
    onLog(level, log, handler) {
      // `stele verify` statically imports two ledger commands that the ledger group imports
      // lazily: they are in the client chunk either way.
      if (log.code === 'INEFFECTIVE_DYNAMIC_IMPORT') return;
      handler(level, log);
    },
    output: {
      dir: next,
      format: 'es',
      entryFileNames: '[name].js',
      chunkFileNames: '[name]-[hash].js',
      // For `node --enable-source-maps` (a developer's trace); a user never sees a stack trace.
      sourcemap: true,
      // Only licence notices stay: a function compiled at its first call is parsed again from
      // the source, comments and all (about 2 ms of `ledger verify`); the maps keep the rest.
      comments: { legal: true, annotation: false, jsdoc: false },
      // ASCII (\u escapes): Node then holds each file's source as one byte per character, not
      // two, and decodes it on its fast path (~0.6 MB less to allocate for `ledger verify`).
      charset: 'ascii',
      codeSplitting: {
        groups: [
          { name: 'cli', test: chunk((id) => CLI_CHUNK.test(id)), priority: 3 },
          { name: 'client', test: chunk((id) => verifyPath.has(id)), priority: 2 },
          { name: 'ledger', test: chunk((id) => LEDGER_CHUNK.test(id) && !NOT_LEDGER.test(id)), priority: 1 },
        ],
      },
    },
  });
  const old = `${outDir}.old`;
  rmSync(old, { recursive: true, force: true });
  try {
    renameSync(outDir, old);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  renameSync(next, outDir);
  rmSync(old, { recursive: true, force: true });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const t0 = performance.now();
  await bundleCli();
  const out = relative(process.cwd(), join(ROOT, 'dist', 'cli')) || '.';
  console.log(`stele: bundled the CLI into ${out} in ${Math.round(performance.now() - t0)} ms`);
}
