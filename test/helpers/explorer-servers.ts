// Servers for the explorer tests: `stele serve` started from the built dist as a child
// process, and a tiny static server that serves a log directory plus the built explorer the
// way a mirror or bucket would (no API), optionally lying: a tile byte flipped, or a
// different checkpoint.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { createInterface } from 'node:readline';

export const REPO = resolve(import.meta.dirname, '../..');
export const CLI = join(REPO, 'dist/cli/main.js');
export const EXPLORER_DIST = join(REPO, 'dist/explorer');

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/**
 * Makes sure dist/cli (packages/bin/bundle.ts) and dist/explorer (vite build) exist; rebuilds
 * the explorer when its sources are newer than the build (it takes about a second).
 */
export function ensureBuilt(): void {
  const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';
  if (!existsSync(CLI)) execFileSync(npx, ['tsx', 'packages/bin/bundle.ts'], { cwd: REPO, stdio: 'inherit' });
  const index = join(EXPLORER_DIST, 'index.html');
  const srcTime = Math.max(newest(join(REPO, 'src/explorer')), statSync(join(REPO, 'vite.config.ts')).mtimeMs);
  if (!existsSync(index) || statSync(index).mtimeMs < srcTime) {
    execFileSync(npx, ['vite', 'build', '--logLevel', 'warn'], { cwd: REPO, stdio: 'inherit' });
  }
}

export interface SteleChild {
  readonly url: string;
  readonly origin: string;
  readonly vkey: string;
  readonly keyId: string;
  readonly dataDir: string;
  /** The published log directory (checkpoint, tile/…). */
  readonly logDir: string;
  stop(): Promise<void>;
}

/** Runs `node dist/cli/main.js serve --json` on a loopback port over a fresh data directory. */
export async function startStele(
  opts: { witnesses?: number; origin?: string; batchIntervalMs?: number } = {},
): Promise<SteleChild> {
  const dataDir = mkdtempSync(join(tmpdir(), 'stele-explorer-'));
  const args = [
    CLI,
    'serve',
    '--data-dir',
    dataDir,
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--json',
    '--origin',
    opts.origin ?? 'explorer.test/log',
    '--batch-interval',
    String(opts.batchIntervalMs ?? 10),
    '--log-level',
    'warn',
  ];
  if (opts.witnesses) args.push('--demo-witnesses', String(opts.witnesses));
  const child: ChildProcess = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, STELE_MODE: 'demo' },
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const info = await new Promise<{ url: string; origin: string; vkey: string; keyId: string }>(
    (resolveInfo, reject) => {
      const timer = setTimeout(() => reject(new Error(`stele serve did not start in 30 s: ${stderr}`)), 30_000);
      const lines = createInterface({ input: child.stdout! });
      lines.once('line', (line) => {
        clearTimeout(timer);
        try {
          resolveInfo(JSON.parse(line));
        } catch {
          reject(new Error(`unexpected output from stele serve: ${line}\n${stderr}`));
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`stele serve exited with ${code}: ${stderr}`));
      });
    },
  );
  return {
    ...info,
    dataDir,
    logDir: join(dataDir, 'log'),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const sha256hex = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** POSTs an anchor and returns the response body (throws on a non-201). */
export async function anchor(
  base: string,
  body: { digest: string; artifact?: string; scope?: string; type?: string },
): Promise<{ leafIndex: number; entry: { id: string } }> {
  const res = await fetch(`${base}/api/ledger/anchor`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { leafIndex: number; entry: { id: string } };
  if (res.status !== 201) throw new Error(`anchor failed: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Anchors many bodies with bounded concurrency. */
export async function anchorMany(
  base: string,
  bodies: Array<Parameters<typeof anchor>[1]>,
  concurrency = 32,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) await anchor(base, bodies[next++]!);
    }),
  );
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
};

export interface StaticServer {
  readonly url: string;
  /** Requests served, by path. */
  readonly hits: Map<string, number>;
  /** Replace the body of a path (e.g. 'checkpoint'); null removes an override. */
  override(path: string, body: string | Uint8Array | null): void;
  close(): Promise<void>;
}

export interface StaticOptions {
  /** Directories searched in order for a path. */
  readonly roots: readonly string[];
  /** Fixed bodies by path (no leading slash), e.g. explorer.json. */
  readonly files?: Record<string, string | Uint8Array>;
  /** Rewrites a body before it is sent (tampering). */
  readonly mutate?: (path: string, body: Uint8Array) => Uint8Array;
}

/** A static file server on 127.0.0.1 with no API and no cache headers, like a plain mirror. */
export async function startStaticServer(o: StaticOptions): Promise<StaticServer> {
  const files = new Map<string, string | Uint8Array>(Object.entries(o.files ?? {}));
  const hits = new Map<string, number>();
  const roots = o.roots.map((r) => resolve(r));
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    let path = decodeURIComponent(url.pathname).replace(/^\/+/, '');
    if (path === '' || path.endsWith('/')) path += 'index.html';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    let body: Uint8Array | null = null;
    const fixed = files.get(path);
    if (fixed !== undefined) body = typeof fixed === 'string' ? new TextEncoder().encode(fixed) : fixed;
    else {
      for (const root of roots) {
        const file = normalize(join(root, path));
        if (!file.startsWith(root + sep)) break;
        if (existsSync(file) && statSync(file).isFile()) {
          body = new Uint8Array(readFileSync(file));
          break;
        }
      }
    }
    if (!body || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (o.mutate) body = o.mutate(path, body);
    res.writeHead(200, {
      'content-type': TYPES[extname(path)] ?? 'application/octet-stream',
      'content-length': body.length,
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    override(path, body) {
      if (body === null) files.delete(path);
      else files.set(path, body);
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Flips one bit of byte `at` (a copy). */
export function flipByte(body: Uint8Array, at: number): Uint8Array {
  const out = new Uint8Array(body);
  out[at] = out[at]! ^ 0x01;
  return out;
}
