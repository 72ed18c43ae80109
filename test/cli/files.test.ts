// CLI conventions for files (issue 20): several files per `anchor` and `verify` (one result
// line each, the exit code the worst), `-` for standard input (the stream is hashed), and
// filesystem errors that name their path (LMDB's own messages name none).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, type CliRun, type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import type { JsonObject } from '../helpers/json.js';

type Json = JsonObject;
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('several files, standard input, and paths in filesystem errors', () => {
  let sb: Sandbox;
  let serve: RunningServe;

  /** `stele <args>` with `input` on standard input. */
  async function withStdin(args: string[], input: string): Promise<CliRun> {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: sb.work, env: sb.env(), stdio: 'pipe' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.end(input);
    const [code] = (await once(child, 'close')) as [number];
    return { code, stdout, stderr };
  }

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-files-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: 'files.test/log' });
    for (const n of ['a', 'b', 'c']) sb.file(`${n}.bin`, `file ${n}\n`);
    const init = await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId]);
    expect(init.code, init.stderr).toBe(0);
  }, 180_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('anchors several files, one result line each; a missing one is an ERROR naming it and does not stop the rest', async () => {
    const r = await sb.run(['ledger', 'anchor', 'a.bin', 'missing.bin', 'b.bin']);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^PASS {2}a\.bin {2}anchored {2}led_0_[0-9a-f]{12} {2}leaf 0 {2}PASS \(not witnessed\)$/);
    expect(lines[1]).toBe('ERROR missing.bin: cannot read missing.bin: no such file');
    expect(lines[2]).toMatch(/^PASS {2}b\.bin {2}anchored {2}led_1_/);
    expect(r.code).toBe(3); // no FAIL: the highest of the others (an I/O error)
    // Each line says whether the file was new or already in the log.
    const again = await sb.run(['ledger', 'anchor', 'a.bin', 'b.bin']);
    expect(again.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^PASS {2}a\.bin {2}already anchored {2}led_0_/),
      expect.stringMatching(/^PASS {2}b\.bin {2}already anchored {2}led_1_/),
    ]);
  });

  it('verifies several files: --json has every file, the exit code is 1 when any FAILs', async () => {
    sb.file('never.bin', 'never anchored\n');
    const j = await sb.json(['ledger', 'verify', 'a.bin', 'never.bin', 'nope.bin', 'b.bin']);
    expect(j.code).toBe(1); // a FAIL outranks the I/O error
    expect(j.out).toMatchObject({ result: 'FAIL', exitCode: 1 });
    const files = j.out.files as Json[];
    expect(files.map((f) => f.file)).toEqual(['a.bin', 'never.bin', 'nope.bin', 'b.bin']);
    expect(files.map((f) => f.result ?? 'ERROR')).toEqual(['PASS', 'FAIL', 'ERROR', 'PASS']);
    expect(files[2]!.error).toEqual({ message: 'cannot read nope.bin: no such file', exitCode: 3 });
    expect(files[3]!.leafIndex).toBe(1);

    const t = await sb.run(['ledger', 'verify', 'a.bin', 'never.bin']);
    expect(t.code).toBe(1);
    expect(t.stdout.trim().split('\n')[1]).toMatch(
      /^FAIL {2}never\.bin {2}FAIL: rule 3 \(Leaf hash\): no entry in the log/,
    );

    const ok = await sb.run(['ledger', 'verify', 'a.bin', 'b.bin']);
    expect(ok.code).toBe(0);
  });

  it('reads standard input for -: anchors and verifies the stream', async () => {
    const input = 'bytes from a pipe\n';
    const a = await withStdin(['ledger', 'anchor', '-', '--json'], input);
    expect(a.code, a.stderr).toBe(0);
    const doc = JSON.parse(a.stdout) as Json;
    expect(doc).toMatchObject({ file: '-', digest: sha(input), bytes: input.length });
    expect(doc.entry.artifact).toBeUndefined(); // standard input has no name to label it with

    const v = await withStdin(['ledger', 'verify', '-', 'a.bin'], input);
    expect(v.code, v.stderr).toBe(0);
    expect(v.stdout).toMatch(new RegExp(`^PASS {2}standard input {2}${doc.entryId}`, 'm'));
    const other = await withStdin(['ledger', 'verify', '-'], 'other bytes\n');
    expect(other.code).toBe(1);

    const twice = await sb.run(['ledger', 'verify', '-', '-']);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toBe('stele: standard input (-) can be read only once\n');
    const label = await sb.run(['ledger', 'anchor', 'a.bin', 'b.bin', '--artifact', 'x']);
    expect(label.code).toBe(2);
    expect(label.stderr).toMatch(/--artifact applies to one file/);
  });

  it("names the directory when the lookup index cannot be opened (LMDB's message names none)", async () => {
    const dataDir = join(sb.root, 'broken');
    // A directory where LMDB wants its data file.
    mkdirSync(join(dataDir, 'private', 'index', 'data.mdb'), { recursive: true });
    const r = await sb.run([
      'serve',
      '--data-dir',
      dataDir,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--origin',
      'x.test/log',
    ]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`cannot open the lookup index ${join(dataDir, 'private', 'index')}: `);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
