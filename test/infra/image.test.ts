// The container image (infra/Dockerfile). No image registry is reachable from the test
// machines and no container daemon runs there, so the image itself is not built here; this
// proves the next best things: the build context holds every file the build stage needs
// (it is copied exactly as the Dockerfile's COPY lines say and built with the same
// `prepare` script), and what that builds, started as the image's CMD with its ENV, serves a
// log that anchors and verifies.
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, symlinkSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { postAnchor } from '../helpers/cli.js';
import { scratchDir } from '../helpers/tmp.js';
import { repoRoot } from '../helpers/vectors.js';

interface Stage {
  copies: { from: string[]; to: string }[];
  env: Record<string, string>;
  runs: string[];
  cmd: string[];
}

/** The Dockerfile's stages, with the instructions this test acts on. */
function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const line of lines) {
    const [op, ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    if (op === 'FROM') stages.push({ copies: [], env: {}, runs: [], cmd: [] });
    const stage = stages.at(-1)!;
    if (op === 'COPY' && !args.startsWith('--from')) {
      const parts = args.split(/\s+/);
      stage.copies.push({ from: parts.slice(0, -1), to: parts.at(-1)! });
    }
    if (op === 'ENV') for (const m of args.matchAll(/(\w+)=(\S+)/g)) stage.env[m[1]!] = m[2]!;
    if (op === 'RUN') stage.runs.push(args);
    if (op === 'CMD') stage.cmd = JSON.parse(args) as string[];
  }
  return stages;
}

const ignored = readFileSync(join(repoRoot, '.dockerignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const [build, runtime] = parseDockerfile(readFileSync(join(repoRoot, 'infra', 'Dockerfile'), 'utf8'));

describe('the container image (infra/Dockerfile)', () => {
  it('copies only files that exist in the repository and are not excluded from the context', () => {
    expect(build!.copies.length).toBeGreaterThan(0);
    for (const { from } of build!.copies) {
      for (const f of from) {
        expect(existsSync(join(repoRoot, f)), `${f} is missing from the build context`).toBe(true);
        expect(
          ignored.some((i) => f === i || f.startsWith(`${i}/`)),
          `${f} is excluded by .dockerignore`,
        ).toBe(false);
      }
    }
    expect(build!.runs.some((r) => r.includes('npm ci'))).toBe(true);
    expect(runtime!.env).toMatchObject({ STELE_HOST: '0.0.0.0', STELE_DATA_DIR: '/data' });
    // The server's runtime settings are the ones `npm start` uses (README, "Memory").
    const start = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: { start: string } })
      .scripts.start;
    for (const name of ['MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_'])
      expect(start, `npm start and the image differ on ${name}`).toContain(`${name}=${runtime!.env[name]}`);
    // npm start puts its Node options before the user's own, which it keeps.
    expect(start).toContain(`NODE_OPTIONS="${runtime!.env.NODE_OPTIONS} \${NODE_OPTIONS:-}"`);
  });

  it('builds from exactly the copied files, and the result serves a log as the image would', async () => {
    const app = scratchDir('stele-image-');
    for (const { from, to } of build!.copies) {
      // Docker's rule: several sources, or a destination ending in '/', copy into that directory.
      const intoDir = from.length > 1 || to.endsWith('/');
      for (const f of from)
        cpSync(join(repoRoot, f), intoDir ? join(app, to, basename(f)) : join(app, to), { recursive: true });
    }
    // The packages npm ci would install: the repository's own (the lockfile is the same).
    symlinkSync(join(repoRoot, 'node_modules'), join(app, 'node_modules'));
    const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { scripts: { prepare: string } };
    const prepared = spawnSync('sh', ['-c', pkg.scripts.prepare], {
      cwd: app,
      encoding: 'utf8',
      env: { ...process.env, PATH: `${join(app, 'node_modules', '.bin')}:${process.env.PATH}` },
    });
    expect(prepared.status, `the build stage's prepare failed:\n${prepared.stdout}\n${prepared.stderr}`).toBe(0);
    expect(existsSync(join(app, 'dist', 'cli', 'main.js'))).toBe(true);
    expect(existsSync(join(app, 'dist', 'explorer', 'index.html'))).toBe(true);

    const [node, ...cmd] = runtime!.cmd;
    expect(node).toBe('node');
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: app,
      ...runtime!.env,
      STELE_HOST: '127.0.0.1',
      STELE_PORT: '0',
      STELE_DATA_DIR: join(app, 'data'),
      STELE_BATCH_INTERVAL_MS: '20',
    };
    const server = spawn(process.execPath, [...cmd, '--json'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const ready = await new Promise<{ url: string }>((resolve, reject) => {
        let out = '';
        let err = '';
        server.stderr.on('data', (d) => (err += d));
        server.stdout.on('data', (d) => {
          out += d;
          if (out.includes('\n')) resolve(JSON.parse(out.slice(0, out.indexOf('\n'))) as { url: string });
        });
        server.once('exit', (code) => reject(new Error(`the image's CMD exited with ${code}: ${err}`)));
      });
      const anchored = await postAnchor(ready.url, 'ab'.repeat(32));
      expect(anchored.leafIndex).toBe(0);
      expect((anchored.entry as { id: string }).id).toMatch(/^led_0_/);
      const page = await fetch(`${ready.url}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<html');
    } finally {
      server.kill('SIGTERM');
    }
  }, 240_000);
});
