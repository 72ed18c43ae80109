// `stele monitor` catching up from size 0 on a 100,000-entry log (written by the real
// sequencer in one batch): every record is checked, the watched entries at both ends are
// alerted once each, progress lines go to stderr and end at the full size, and the state
// records the whole log as checked (a second run has nothing to do).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import { writeTestKey } from '../helpers/audit.js';
import { Sandbox, ensureBuilt } from '../helpers/cli.js';
import { digestOf, makeLog } from '../helpers/logs.js';

const ORIGIN = 'catchup.test/log';
const N = 100_000;
const VKEY = formatVkey(
  makeVerifier(ORIGIN, SIG_ED25519, new SeedSigner(ORIGIN, new Uint8Array(32).fill(43)).publicKey),
);

describe('stele monitor catching up', () => {
  const sb = new Sandbox('stele-monitor-catchup-');
  const logDir = join(sb.root, 'log');
  const state = join(sb.root, 'monitor.state');

  beforeAll(async () => {
    await ensureBuilt();
    await writeTestKey(logDir, ORIGIN, 43);
    await makeLog(logDir, ORIGIN, [N]);
  }, 240_000);
  afterAll(() => sb.cleanup());

  const args = [
    'monitor',
    join(logDir, 'log'),
    '--vkey',
    VKEY,
    '--state',
    state,
    '--once',
    '--watch-digest',
    digestOf(ORIGIN, 0),
    '--watch-digest',
    digestOf(ORIGIN, N - 1),
  ];

  it(`checks all ${N} entries from size 0 with a progress report, alerting the watched ones`, async () => {
    const r = await sb.run(args);
    expect(r.code, r.stderr).toBe(1);
    const alerts = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { alert: string; seq: number });
    expect(alerts.map((a) => [a.alert, a.seq])).toEqual([
      ['watch', 0],
      ['watch', N - 1],
    ]);
    const progress = [...r.stderr.matchAll(/^stele: monitor checked (\d+)\/(\d+) entries$/gm)].map((m) => [
      Number(m[1]),
      Number(m[2]),
    ]);
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.every(([, size]) => size === N)).toBe(true);
    expect(progress.at(-1)![0]).toBe(N);
    const done = progress.map(([d]) => d!);
    expect(done).toEqual([...done].sort((a, b) => a - b));
    const saved = JSON.parse(readFileSync(state, 'utf8')) as { scanned: number; held: { size: number } };
    expect(saved.scanned).toBe(N);
    expect(saved.held.size).toBe(N);

    const again = await sb.run(args);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toBe('');
  }, 240_000);
});
