// `stele monitor` as a subprocess on real logs: a watch list alerts once per matching entry,
// across restarts (state file), and only for new entries after the log grows; two logs that
// share one key and disagree are reported as a fork with both signed notes; a tampered
// record is reported as invalid.
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import { writeTestKey } from '../helpers/audit.js';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';
import { makeLog } from '../helpers/logs.js';
import { readContent, writeContent } from '../helpers/stored-objects.js';

const ORIGIN = 'monitor.test/log';
const VKEY = formatVkey(
  makeVerifier(ORIGIN, SIG_ED25519, new SeedSigner(ORIGIN, new Uint8Array(32).fill(31)).publicKey),
);
/** makeLog gives its i-th entry of a run the artifact a{(i+1) % 7}. */
const a3 = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => i)
    .filter((i) => (i + 1) % 7 === 3)
    .map((i) => from + i);

describe('stele monitor', () => {
  const sb = new Sandbox('stele-monitor-');
  const logA = join(sb.root, 'a');
  const logB = join(sb.root, 'b');
  const state = join(sb.root, 'monitor.state');
  const alerts = (stdout: string) =>
    stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  beforeAll(async () => {
    await ensureBuilt();
    await writeTestKey(logA, ORIGIN, 31);
    await writeTestKey(logB, ORIGIN, 31);
    await makeLog(logA, ORIGIN, [300]);
    await makeLog(logB, ORIGIN, [350]);
  }, 180_000);
  afterAll(() => sb.cleanup());

  const monitor = (...args: string[]) => sb.run(['monitor', join(logA, 'log'), '--vkey', VKEY, '--once', ...args]);

  it('alerts once per watched entry, across a restart, then only for new entries', async () => {
    const first = await monitor('--state', state, '--watch-artifact', 'a3');
    expect(first.code, first.stderr).toBe(1);
    const got = alerts(first.stdout);
    expect(got.every((a) => a.alert === 'watch')).toBe(true);
    expect(got.map((a) => a.seq)).toEqual(a3(0, 300));
    const again = await monitor('--state', state, '--watch-artifact', 'a3');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe('');
    await makeLog(logA, ORIGIN, [100]);
    const later = await monitor('--state', state, '--watch-artifact', 'a3');
    expect(later.code).toBe(1);
    expect(alerts(later.stdout).map((a) => a.seq)).toEqual(a3(300, 100));
  });

  it('reports a fork between two logs sharing one key, with both notes', async () => {
    const r = await monitor('--state', join(sb.root, 'fork.state'), '--also', join(logB, 'log'));
    expect(r.code).toBe(1);
    const [fork] = alerts(r.stdout);
    expect(fork).toMatchObject({ alert: 'fork', severity: 'critical' });
    const notes = fork!.notes as string[];
    expect(notes).toHaveLength(2);
    expect(notes[0]).toBe(await fs.readFile(join(logA, 'log', 'checkpoint'), 'utf8'));
    expect(notes[1]).toBe(await fs.readFile(join(logB, 'log', 'checkpoint'), 'utf8'));
  });

  it('reports a record that does not hash to its entry as invalid', async () => {
    const file = join(logB, 'log', 'tile', 'records', '000');
    const bytes = readContent(file); // the records, not their gzip stream
    bytes.writeUInt8(bytes[bytes.length - 3]! ^ 1, bytes.length - 3);
    writeContent(file, bytes);
    const r = await sb.run([
      'monitor',
      join(logB, 'log'),
      '--vkey',
      VKEY,
      '--once',
      '--state',
      join(sb.root, 'b.state'),
    ]);
    expect(r.code).toBe(1);
    expect(alerts(r.stdout)[0]).toMatchObject({ alert: 'invalid', severity: 'critical' });
  });

  it('refuses bad settings with one line and exit 2 (monitor and mirror serve)', async () => {
    const m = await sb.run(['monitor', join(logA, 'log'), '--vkey', 'not-a-vkey', '--state', state, '--once']);
    expect(m.code).toBe(2);
    expect(m.stderr.trim().split('\n')).toHaveLength(1);
    expect(m.stderr).toMatch(/^stele: --vkey: /);
    const w = await monitor('--state', state, '--webhook', 'ftp://example.test/hook');
    expect(w.code).toBe(2);
    expect(w.stderr.trim()).toBe('stele: --webhook must be an http:// or https:// URL');
    const s = await sb.run([
      'mirror',
      'serve',
      '--data-dir',
      join(sb.root, 'm'),
      '--name',
      'm.test',
      '--log',
      'bogus',
      '--port',
      '0',
    ]);
    expect(s.code).toBe(2);
    expect(s.stderr).toMatch(/^stele: --log bogus: /);
  });
});
