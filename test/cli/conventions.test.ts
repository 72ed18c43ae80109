// CLI habits (issue 20): errors as one JSON document on stdout under --json, a closed pipe
// ends a command quietly, -q silences text, -v traces HTTP, hints print a runnable command,
// and completion scripts come from the real command tree.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, Sandbox, ensureBuilt } from '../helpers/cli.js';

let sandbox: Sandbox;

beforeAll(async () => {
  await ensureBuilt();
  sandbox = new Sandbox('stele-conv-');
}, 180_000);

afterAll(() => sandbox.cleanup());

describe('stele CLI conventions', () => {
  it('prints an error as one JSON document on stdout under --json, with the exit code inside', async () => {
    const r = await sandbox.run(['ledger', 'checkpoint', '--config', join(sandbox.work, 'missing.toml'), '--json']);
    expect(r.code).toBe(2);
    const doc = JSON.parse(r.stdout) as { error: { code: string; message: string; exitCode: number } };
    expect(doc.error).toMatchObject({ code: 'usage', exitCode: 2 });
    expect(doc.error.message).toContain('missing.toml');
    expect(r.stderr).toContain('stele: no configuration at');

    const usage = await sandbox.run(['ledger', 'no-such-command', '--json']);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stdout)).toEqual({
      error: { code: 'usage', message: "unknown command 'no-such-command'", exitCode: 2 },
    });
  });

  it('ends quietly when its reader closes the pipe (`stele … | head`)', async () => {
    const child = spawn(process.execPath, [CLI, 'completion', 'fish'], {
      cwd: sandbox.work,
      env: sandbox.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.destroy(); // the reader is gone before the first write
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = (await once(child, 'close')) as [number | null];
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });

  it('prints hints as the user can run them: the built file when `stele` is not on PATH', async () => {
    const r = await sandbox.run(['ledger', 'checkpoint', '--config', join(sandbox.work, 'missing.toml')], {
      PATH: '/usr/bin:/bin',
    });
    // The sandbox's work directory is not above the repository: the path is absolute.
    expect(relative(sandbox.work, CLI).startsWith('..')).toBe(true);
    expect(r.stderr).toContain(`run \`node ${CLI} ledger init\` first`);
  });

  it('-q prints nothing on success, -v traces each HTTP request on stderr', async () => {
    const quiet = await sandbox.run(['-q', 'completion', 'bash']);
    expect(quiet.code).toBe(0);
    // completion is the command's product, not chatter: -q keeps it
    expect(quiet.stdout).toContain('complete -o filenames -F _stele stele');
    const failed = await sandbox.run(['ledger', 'checkpoint', '-q', '--config', join(sandbox.work, 'missing.toml')]);
    expect(failed.code).toBe(2);
    expect(failed.stdout).toBe('');
    expect(failed.stderr).toContain('no configuration');

    const server = createServer((_req, res) =>
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"not_found","message":"no"}}'),
    );
    await once(server.listen(0, '127.0.0.1'), 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const v = await sandbox.run([
        '-v',
        'ledger',
        'init',
        '--endpoint',
        url,
        '--trust-key',
        'ab'.repeat(32),
        '--config',
        join(sandbox.work, 'v.toml'),
      ]);
      expect(v.code).not.toBe(0);
      expect(v.stderr).toContain(`→ GET ${url}/api/ledger/key`);
      expect(v.stderr).toMatch(new RegExp(`← 404 GET ${url.replace(/\./g, '\\.')}/api/ledger/key \\(\\d+ ms\\)`));
      const plain = await sandbox.run([
        'ledger',
        'init',
        '--endpoint',
        url,
        '--trust-key',
        'ab'.repeat(32),
        '--config',
        join(sandbox.work, 'v.toml'),
      ]);
      expect(plain.stderr).not.toContain('→ GET');
    } finally {
      server.close();
    }
  });

  it('completes commands and options from the real command tree (bash)', async () => {
    const script = (await sandbox.run(['completion', 'bash'])).stdout;
    const complete = (words: string[]) =>
      spawnSync(
        'bash',
        [
          '-c',
          `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _stele; printf '%s\\n' "\${COMPREPLY[@]}"`,
        ],
        {
          cwd: sandbox.work,
          encoding: 'utf8',
        },
      )
        .stdout.split('\n')
        .filter(Boolean);
    expect(complete(['stele', 'led'])).toEqual(['ledger']);
    expect(complete(['stele', 'ledger', 'ver'])).toEqual(['verify']);
    expect(complete(['stele', 'ledger', 'verify', '--til'])).toEqual(['--tiles']);
    const bad = await sandbox.run(['completion', 'tcsh']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('bash, zsh or fish');
  });
});
