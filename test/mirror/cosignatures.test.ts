// A mirror's copy verifies under the policy the log advertises (issue 31): the log
// (`stele serve --demo-witnesses 1 --mirror …`, with no mirror required and with one) advertises
// its witness and its mirror; the mirror (`stele mirror serve`) keeps the witness's
// cosignature of each checkpoint it is given beside its own, so `stele ledger verify --tiles
// <mirror>` and `stele ledger audit <mirror>` pass rule 5 under the policy `ledger init` pinned.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier, parseNote } from '../../src/core/note.js';
import { originHash } from '../../src/witness/protocol.js';
import { writeTestKey } from '../helpers/audit.js';
import { type RunningServe, Sandbox, ensureBuilt, startServe } from '../helpers/cli.js';
import type { Json } from '../helpers/json.js';
import { freePort } from '../helpers/ports.js';
import { type RunningMirrorCli, startMirrorCli } from './mirror-cli.js';

const rule = (out: Json, n: number) => (out.checks as Json[]).find((c) => c.rule === n)!;

async function until(what: string, cond: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.each([0, 1])('a mirror copy of a log with one witness and mirror quorum %i', (quorum) => {
  const ORIGIN = `cosig${quorum}.test/log`;
  const fill = 43 + quorum;
  const sb = new Sandbox('stele-mirror-cosig-');
  let log: RunningServe;
  let mirror: RunningMirrorCli;
  const mirrorDir = join(sb.root, 'mirror');
  const copyUrl = () => `${mirror.url}/${originHash(ORIGIN)}/`;

  beforeAll(async () => {
    await ensureBuilt();
    const logDir = join(sb.root, 'log');
    await writeTestKey(logDir, ORIGIN, fill);
    const vkey = formatVkey(
      makeVerifier(ORIGIN, SIG_ED25519, new SeedSigner(ORIGIN, new Uint8Array(32).fill(fill)).publicKey),
    );
    const logPort = await freePort();
    mirror = await startMirrorCli(mirrorDir, 0, `${vkey}=http://127.0.0.1:${logPort}`);
    log = await startServe({
      dataDir: logDir,
      origin: ORIGIN,
      args: [
        '--port',
        String(logPort),
        '--demo-witnesses',
        '1',
        '--mirror',
        `${mirror.vkey}=${mirror.url}`,
        '--mirror-quorum',
        String(quorum),
      ],
    });
  }, 180_000);

  afterAll(async () => {
    await log?.stop();
    await mirror?.stop();
    sb.cleanup();
  });

  it('keeps the witness cosignature beside its own, and the copy passes rule 5 under the pinned policy', async () => {
    const init = await sb.run([
      'ledger',
      'init',
      '--endpoint',
      log.url,
      '--tenant',
      'demo',
      '--scope',
      'demo',
      '--trust-key',
      log.keyId,
    ]);
    expect(init.code, init.stderr).toBe(0);
    expect(init.stdout).toContain('witness1.demo.stele');
    sb.file('release.tgz', `a release mirrored with quorum ${quorum}\n`);
    const anchored = await sb.run(['ledger', 'anchor', 'release.tgz']);
    expect(anchored.code, anchored.stderr).toBe(0);

    const logSize = Number((await (await fetch(`${log.url}/checkpoint`)).text()).split('\n')[1]);
    const signers = async () => {
      const res = await fetch(`${copyUrl()}checkpoint`);
      if (res.status !== 200) return { size: -1, names: [] as string[] };
      const text = await res.text();
      return { size: Number(text.split('\n')[1]), names: parseNote(text).signatures.map((s) => s.name) };
    };
    await until('the copy at the log size with both cosignatures', async () => {
      const s = await signers();
      return s.size === logSize && s.names.includes('witness1.demo.stele');
    });
    expect((await signers()).names.sort()).toEqual([ORIGIN, 'mirror.test/m1', 'witness1.demo.stele'].sort());

    const verify = await sb.json(['ledger', 'verify', 'release.tgz', '--tiles', copyUrl()]);
    expect(verify.code, JSON.stringify(verify.out)).toBe(0);
    expect(rule(verify.out, 5)).toMatchObject({ status: 'PASS' });
    const audit = await sb.json(['ledger', 'audit', copyUrl()]);
    expect(audit.code, JSON.stringify(audit.out)).toBe(0);
    const audited = await sb.json(['ledger', 'audit', join(mirrorDir, 'logs', originHash(ORIGIN))]);
    expect(audited.code, JSON.stringify(audited.out)).toBe(0);
  }, 120_000);
});
