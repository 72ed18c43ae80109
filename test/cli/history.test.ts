// `stele ledger get --artifact NAME --all`: the artifact's history, every entry naming it,
// oldest first, each with its id, kind, time and digest, and each verified (issue 33). As
// subprocesses against `stele serve`: an anchor, a recorded verification of it, another
// artifact's anchor, a new release under the same label; read from the endpoint's tiles, and
// from a local copy of the tiles (--tiles <dir>).
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';

interface HistoryEntry {
  entryId: string;
  leafIndex: number;
  result: string;
  entry: { type: string; result: string; timestamp: string; digest: string; artifact: string };
}

describe('the history of an artifact (ledger get --artifact NAME --all)', () => {
  let sb: Sandbox;
  let serve: RunningServe;
  let dataDir: string;
  const ids: string[] = [];

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-history-');
    dataDir = join(sb.root, 'data');
    serve = await startServe({ dataDir, origin: 'history.test/log' });
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      serve.url,
      '--trust-key',
      serve.keyId,
      '--scope',
      'rel',
    ]);
    expect(init.code, init.stderr).toBe(0);
    sb.file('v1.tgz', 'release one\n');
    sb.file('v2.tgz', 'release two\n');
    sb.file('other.tgz', 'another artifact\n');
    const steps: string[][] = [
      ['ledger', 'anchor', 'v1.tgz', '--artifact', 'app.tgz'],
      ['verify', 'v1.tgz', '--anchor', '--artifact', 'app.tgz'],
      ['ledger', 'anchor', 'other.tgz'],
      ['ledger', 'anchor', 'v2.tgz', '--artifact', 'app.tgz'],
    ];
    for (const args of steps) {
      const r = await sb.json(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      ids.push(String(r.out.entryId));
    }
    // `verify --anchor` answers the anchor it verified; what it recorded is leaf 1.
    ids[1] = expect.stringMatching(/^led_1_/) as unknown as string;
  }, 180_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('lists every entry naming the artifact, oldest first, each verified (--json)', async () => {
    const r = await sb.json(['ledger', 'get', '--artifact', 'app.tgz', '--all']);
    expect(r.code, r.stderr).toBe(0);
    const matches = r.out.matches as unknown as HistoryEntry[];
    // The other artifact's anchor (ids[2]) is not in it; the recorded verification is.
    expect(matches.map((m) => m.entryId)).toEqual([ids[0], ids[1], ids[3]]);
    expect(matches.map((m) => m.entry.type)).toEqual(['ledger_anchor', 'document_verified', 'ledger_anchor']);
    expect(matches.every((m) => m.result === 'PASS' && m.entry.artifact === 'app.tgz')).toBe(true);
    expect(matches[0]!.entry.digest).toBe(matches[1]!.entry.digest);
    expect(matches[2]!.entry.digest).not.toBe(matches[0]!.entry.digest);
    expect(matches.map((m) => m.leafIndex)).toEqual([...matches.map((m) => m.leafIndex)].sort((a, b) => a - b));
    // Without --all the answer is the latest release's anchor alone.
    const one = await sb.json(['ledger', 'get', '--artifact', 'app.tgz']);
    expect((one.out.matches as unknown as HistoryEntry[]).map((m) => m.entryId)).toEqual([ids[3]]);
  }, 60_000);

  it('prints one line per entry: id, kind, time, digest and verdict', async () => {
    const r = await sb.run(['ledger', 'get', '--artifact', 'app.tgz', '--all']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(
      /^History of artifact "app\.tgz" \(any scope\) in .*: 3 entries, verified against tree size 4/,
    );
    expect(lines).toHaveLength(4);
    const json = await sb.json(['ledger', 'get', '--artifact', 'app.tgz', '--all']);
    const matches = json.out.matches as unknown as HistoryEntry[];
    matches.forEach((m, i) => {
      const e = m.entry;
      expect(lines[i + 1]).toBe(
        `  ${m.entryId}  ${e.type} (${e.result})  ${e.timestamp}  ${e.digest}  scope "rel"  PASS (not witnessed)`,
      );
    });
  }, 60_000);

  it('reads a local copy of the tiles too, and within one scope', async () => {
    const tiles = join(dataDir, 'log');
    const r = await sb.json(['ledger', 'get', '--artifact', 'app.tgz', '--scope', 'rel', '--all', '--tiles', tiles]);
    expect(r.code, r.stderr).toBe(0);
    expect((r.out.matches as unknown as HistoryEntry[]).map((m) => m.entryId)).toEqual([ids[0], ids[1], ids[3]]);
    const none = await sb.json([
      'ledger',
      'get',
      '--artifact',
      'app.tgz',
      '--scope',
      'nightly',
      '--all',
      '--tiles',
      tiles,
    ]);
    expect(none.code).toBe(1);
    expect(none.out.result).toBe('NOT_FOUND');
  }, 60_000);

  it('--all goes with --artifact (exit 2, one line)', async () => {
    const r = await sb.run(['ledger', 'get', '--digest', '0'.repeat(64), '--all']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('stele: --all goes with --artifact (the history of an artifact)\n');
  });
});
