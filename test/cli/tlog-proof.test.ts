// C2SP tlog-proof files through the CLI, as a subprocess against `stele serve` with two demo
// witnesses: `ledger anchor` keeps <id>.tlog-proof beside its bundle, `ledger proof --export`
// writes one, both verify with the independent verifier (test/helpers/tlog-proof.ts), and
// `ledger verify <file> --proof` checks them with the endpoint pointed at a closed port.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import { independentVerify } from '../helpers/tlog-proof.js';
import type { JsonObject } from '../helpers/json.js';

const ORIGIN = 'tlog-proof.test/log';
type Json = JsonObject;
const rule = (out: Json, n: number): Json => (out.checks as Json[]).find((c) => c.rule === n)!;
const statuses = (out: Json): string[] => [1, 2, 3, 4, 5, 6].map((n) => rule(out, n)?.status);

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('tlog-proof files from the CLI', () => {
  let sb: Sandbox;
  let serve: RunningServe;
  let id = '';
  let offline: Record<string, string>;
  const pkg = 'the package bytes\n';
  const digest = createHash('sha256').update(pkg).digest('hex');

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-tlog-proof-');
    serve = await startServe({ dataDir: join(sb.root, 'data'), origin: ORIGIN, args: ['--demo-witnesses', '2'] });
    sb.file('pkg.tgz', pkg);
    sb.file('other.tgz', 'other bytes\n');
    sb.file('first.tgz', 'first\n');
    const init = await sb.run(['ledger', 'init', '--endpoint', serve.url, '--trust-key', serve.keyId]);
    expect(init.code).toBe(0);
    // So that pkg.tgz is leaf 1 and its proof has an inclusion hash to tamper with.
    expect((await sb.run(['ledger', 'anchor', 'first.tgz'])).code).toBe(0);
    offline = { STELE_LEDGER_ENDPOINT: `http://127.0.0.1:${await closedPort()}` };
  }, 120_000);

  afterAll(async () => {
    await serve?.stop();
    sb?.cleanup();
  });

  it('anchor keeps <id>.tlog-proof beside the stored bundle, and it verifies independently', async () => {
    const r = await sb.json(['ledger', 'anchor', 'pkg.tgz']);
    expect(r.code).toBe(0);
    id = r.out.entryId ?? r.out.entry?.id;
    expect(id).toMatch(/^led_\d+_[0-9a-f]{12}$/);
    const kept = join(sb.proofsDir, `${id}.tlog-proof`);
    expect(existsSync(kept)).toBe(true);
    expect(independentVerify(readFileSync(kept, 'utf8'), serve.vkey, digest)).toBe('ok');
  });

  it("proof --export writes a tlog-proof that verifies independently, with the witnesses' cosignatures", async () => {
    const r = await sb.run(['ledger', 'proof', id, '--export', 'pkg.tgz.tlog-proof']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('exported    pkg.tgz.tlog-proof');
    const text = readFileSync(join(sb.work, 'pkg.tgz.tlog-proof'), 'utf8');
    expect(text).toMatch(/^c2sp\.org\/tlog-proof@v1\nextra [A-Za-z0-9+/]+=*\nindex 1\n[A-Za-z0-9+/]{43}=\n\n/);
    expect(text.match(/^— witness\d\.demo\.stele /gm)).toHaveLength(2);
    expect(independentVerify(text, serve.vkey, digest)).toBe('ok');
    expect(independentVerify(text, serve.vkey, createHash('sha256').update('other bytes\n').digest('hex'))).toBe(
      'digest',
    );
  });

  it('verify --proof passes rules 1, 3, 4 and 5 with the endpoint unreachable', async () => {
    const r = await sb.json(['ledger', 'verify', 'pkg.tgz', '--proof', 'pkg.tgz.tlog-proof'], offline);
    expect(r.code).toBe(0);
    expect(r.out.mode).toBe('tlog-proof');
    expect(r.out.entryId).toBe(id);
    expect(r.out.result).toBe('PASS');
    // The proof's checkpoint is the pinned one (anchor advanced the pin to it): rule 2 compares roots.
    expect(statuses(r.out)).toEqual(['PASS', 'PASS', 'PASS', 'PASS', 'PASS', 'PASS']);
    expect(rule(r.out, 5).detail).toMatch(/2/);
  });

  it("verify --proof reports rule 2 as not checked when the proof's checkpoint is not the pin", async () => {
    // A newer entry moves the pin past the exported proof's checkpoint.
    expect((await sb.run(['ledger', 'anchor', 'other.tgz'])).code).toBe(0);
    const r = await sb.json(['ledger', 'verify', 'pkg.tgz', '--proof', 'pkg.tgz.tlog-proof'], offline);
    expect(r.code).toBe(0);
    expect(rule(r.out, 2).status).toBe('SKIP');
    expect(rule(r.out, 2).detail).toMatch(/not checked offline/);
    expect(rule(r.out, 6).detail).toMatch(/rule 2 not run/);
    // The result line names the check's own reason, not a fragment of its detail.
    expect(r.out.verdict).toMatch(/^PASS \(rule 2 not checked: offline[;)]/);
  });

  const tamper = (n: (lines: string[]) => number, edit: (l: string) => string) => (text: string) =>
    text
      .split('\n')
      .map((l, i, all) => (i === n(all) ? edit(l) : l))
      .join('\n');
  const flip = (b64: string, at = 0): string =>
    Buffer.from(Buffer.from(b64, 'base64').map((b, i) => (i === at ? b ^ 1 : b))).toString('base64');

  it.each([
    [
      'the index',
      tamper(
        () => 2,
        (l) => `index ${Number(l.slice(6)) + 1}`,
      ),
      4,
    ],
    ['an inclusion hash', tamper(() => 3, flip), 4],
    ['the checkpoint root', tamper((all) => all.indexOf('') + 3, flip), 1],
    [
      'a witness cosignature',
      tamper(
        (all) => all.findIndex((l) => l.startsWith('— witness1')),
        (l) => l.replace(/\S+$/, (b) => flip(b, 20)),
      ),
      5,
    ],
    [
      'the prior hash in extra',
      tamper(
        () => 1,
        (l) => `extra ${flip(l.slice(6))}`,
      ),
      4,
    ],
  ])('verify --proof tampering with %s FAILs rule $2', async (_what, edit, failing) => {
    const good = readFileSync(join(sb.work, 'pkg.tgz.tlog-proof'), 'utf8');
    const bad = edit(good);
    expect(bad).not.toBe(good);
    writeFileSync(join(sb.work, 'bad.tlog-proof'), bad);
    const r = await sb.json(['ledger', 'verify', 'pkg.tgz', '--proof', 'bad.tlog-proof'], offline);
    expect(r.code).toBe(1);
    expect(r.out.result).toBe('FAIL');
    expect(rule(r.out, failing).status).toBe('FAIL');
  });

  it('verify --proof FAILs rule 3 for a file the proof is not about', async () => {
    const r = await sb.json(['ledger', 'verify', 'other.tgz', '--proof', 'pkg.tgz.tlog-proof'], offline);
    expect(r.code).toBe(1);
    expect(rule(r.out, 3).status).toBe('FAIL');
    expect(rule(r.out, 4).status).toBe('PASS');
  });

  it('a malformed proof file is a one-line verification error (exit 1); a missing one an I/O error (exit 3)', async () => {
    writeFileSync(join(sb.work, 'junk.tlog-proof'), 'c2sp.org/tlog-proof@v2\nindex 0\n\n');
    const junk = await sb.run(['ledger', 'verify', 'pkg.tgz', '--proof', 'junk.tlog-proof'], offline);
    expect(junk.code).toBe(1);
    expect(junk.stderr.trim().split('\n')).toHaveLength(1);
    expect(junk.stderr).toMatch(
      /junk\.tlog-proof: not a c2sp\.org\/tlog-proof@v1 proof: the first line is not the header/,
    );
    const missing = await sb.run(['ledger', 'verify', 'pkg.tgz', '--proof', 'nowhere.tlog-proof'], offline);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/cannot read nowhere\.tlog-proof: no such file$/m);
  });
});
