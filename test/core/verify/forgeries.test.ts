/// <reference lib="dom" />
// A verifier that cannot be fooled, on every path: a real proof file (`stele ledger proof
// --export`, from a log with two witnesses) and 44 forgeries of it — bad signature and
// cosignature lines, other keys, altered checkpoints, swapped and made-up entries, wrong
// indexes, truncated and reordered hashes — each verified three ways: `stele ledger verify
// --proof` (the CLI as a subprocess), the package's API (`@stele/verify`) and the explorer's
// drop-a-proof page in Chromium. Every path must give the same result, and every forgery FAIL
// (exit 1). Two changes that are not forgeries (an unknown key's extra line, a proof of the
// same entry read again) PASS everywhere, so the agreement is not one of always failing.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Trust, trustFromPolicy, verifyTlogProof } from '@stele/verify';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatCheckpointBody, parseCheckpointBody } from '../../../src/core/checkpoint.js';
import { SeedSigner, cosignBody, signBody } from '../../../src/core/note.js';
import { type TestBrowser, hasChromium, launchBrowser } from '../../helpers/browser.js';
import { Sandbox, ensureBuilt as ensureCliBuilt } from '../../helpers/cli.js';
import { type SteleChild, ensureBuilt, startStele } from '../../helpers/explorer-servers.js';

const PKG = 'the release a forger wants to pass off\n';
const OTHER = 'a file that was never anchored\n';

/** A proof file's parts, to rebuild it with one part changed. */
interface Parts {
  header: string;
  extra: Buffer | null;
  index: string;
  hashes: string[];
  body: string[];
  sigs: string[];
}

function split(text: string): Parts {
  const lines = text.split('\n');
  let i = 1;
  const extra = lines[i]!.startsWith('extra ') ? Buffer.from(lines[i++]!.slice(6), 'base64') : null;
  const index = lines[i++]!;
  const hashes: string[] = [];
  while (lines[i] !== '') hashes.push(lines[i++]!);
  const note = lines.slice(i + 1).join('\n');
  const blank = note.indexOf('\n\n');
  return {
    header: lines[0]!,
    extra,
    index,
    hashes,
    body: note.slice(0, blank).split('\n'),
    sigs: note
      .slice(blank + 2)
      .replace(/\n$/, '')
      .split('\n'),
  };
}

function join_(p: Parts): string {
  return [
    p.header,
    ...(p.extra ? [`extra ${p.extra.toString('base64')}`] : []),
    p.index,
    ...p.hashes,
    '',
    ...p.body,
    '',
    ...p.sigs,
    '',
  ].join('\n');
}

const flipB64 = (s: string, at = 0): string => {
  const b = Buffer.from(s, 'base64');
  b[at]! ^= 1;
  return b.toString('base64');
};
/** A signature line with one byte of its signature flipped (past the 4-byte key hash). */
const flipSig = (line: string): string => {
  const sp = line.lastIndexOf(' ');
  return `${line.slice(0, sp + 1)}${flipB64(line.slice(sp + 1), 10)}`;
};
const random32 = (seed: number) => Buffer.alloc(32, seed).toString('base64');
const entryOf = (extra: Buffer) => JSON.parse(extra.subarray(32).toString('utf8')) as Record<string, unknown>;
/** `extra` with entry `e` in it: canonical (keys sorted) or, for a forgery, with the keys reversed. */
const withEntry = (extra: Buffer, e: Record<string, unknown>, canonical = true): Buffer => {
  const sorted = Object.keys(e).sort();
  const keys = canonical ? sorted : sorted.reverse();
  const json = `{${keys.map((k) => `${JSON.stringify(k)}:${JSON.stringify(e[k])}`).join(',')}}`;
  return Buffer.concat([extra.subarray(0, 32), Buffer.from(json)]);
};
const sha256hex = (s: string) => createHash('sha256').update(s).digest('hex');

describe.skipIf(!hasChromium())('forged proof files: the same FAIL on every path', () => {
  let stele: SteleChild;
  let browser: TestBrowser;
  let page: Page;
  let sb: Sandbox;
  let trust: Trust;
  let genuine = '';
  let leaf0 = '';
  const variants: [string, string | ((p: Parts) => Promise<string> | string), boolean][] = [];

  beforeAll(async () => {
    ensureBuilt();
    await ensureCliBuilt();
    [stele, browser] = await Promise.all([startStele({ witnesses: 2, origin: 'forgeries.test/log' }), launchBrowser()]);
    sb = new Sandbox('stele-forgeries-');
    sb.file('first.tgz', 'first\n');
    sb.file('pkg.tgz', PKG);
    sb.file('other.tgz', OTHER);
    expect((await sb.run(['ledger', 'init', '--endpoint', stele.url, '--trust-key', stele.keyId])).code).toBe(0);
    const ids: string[] = [];
    for (const f of ['first.tgz', 'pkg.tgz', 'other-release.tgz']) {
      if (f === 'other-release.tgz') sb.file(f, 'a third release\n');
      const a = await sb.json(['ledger', 'anchor', f]);
      expect(a.code).toBe(0);
      ids.push((a.out.entryId ?? (a.out.entry as { id: string }).id) as string);
    }
    for (const [i, id] of ids.slice(0, 2).entries())
      expect((await sb.run(['ledger', 'proof', id, '--export', `leaf${i}.tlog-proof`])).code).toBe(0);
    genuine = readFileSync(join(sb.work, 'leaf1.tlog-proof'), 'utf8');
    leaf0 = readFileSync(join(sb.work, 'leaf0.tlog-proof'), 'utf8');
    const policy = readFileSync(join(sb.configHome, 'stele', 'ledger.policy'), 'utf8');
    const key = (await (await fetch(`${stele.url}/api/ledger/key`)).json()) as { vkey: string };
    trust = trustFromPolicy(policy, { log: key.vkey });
    page = (await browser.page()).page;
    await page.goto(`${stele.url}/#/verify`);
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await stele?.stop();
    sb?.cleanup();
  });

  // Each variant: its name, how it is made from the genuine proof's parts, and whether it is a forgery.
  const forge = (name: string, make: (p: Parts) => Promise<string> | string) => variants.push([name, make, true]);
  const other = (name: string, make: (p: Parts) => Promise<string> | string) => variants.push([name, make, false]);
  const logLine = (p: Parts) => p.sigs.findIndex((l) => l.startsWith('— forgeries.test/log '));
  const witnessLines = (p: Parts) => p.sigs.filter((l) => !l.startsWith('— forgeries.test/log '));

  // The issue's forgery: a bad copy of the log's line, a made-up entry, random inclusion hashes.
  forge('the issue: a bad log line appended, a made-up entry, random hashes', (p) => {
    const e = { ...entryOf(p.extra!), digest: sha256hex(OTHER), artifact: 'never-anchored.bin' };
    return join_({
      ...p,
      sigs: [...p.sigs, flipSig(p.sigs[logLine(p)]!)],
      extra: withEntry(p.extra!, e),
      hashes: p.hashes.map((_, i) => random32(i + 1)),
    });
  });
  forge('a bad copy of the log signature line appended', (p) =>
    join_({ ...p, sigs: [...p.sigs, flipSig(p.sigs[logLine(p)]!)] }),
  );
  forge('a bad copy of a witness cosignature appended', (p) =>
    join_({ ...p, sigs: [...p.sigs, flipSig(witnessLines(p)[0]!)] }),
  );
  forge('the log signature altered', (p) =>
    join_({ ...p, sigs: p.sigs.map((l, i) => (i === logLine(p) ? flipSig(l) : l)) }),
  );
  forge('the log signature removed', (p) => join_({ ...p, sigs: p.sigs.filter((_, i) => i !== logLine(p)) }));
  forge('a witness cosignature altered', (p) =>
    join_({ ...p, sigs: p.sigs.map((l) => (l === witnessLines(p)[0] ? flipSig(l) : l)) }),
  );
  forge('every witness cosignature removed', (p) => join_({ ...p, sigs: [p.sigs[logLine(p)]!] }));
  forge('the witness lines replaced by cosignatures of an unknown key', async (p) => {
    const stranger = new SeedSigner('witness1.demo.stele', new Uint8Array(32).fill(7));
    const body = `${p.body.join('\n')}\n`;
    const line = (await cosignBody(body, stranger, 1_800_000_000)).trimEnd();
    return join_({ ...p, sigs: [p.sigs[logLine(p)]!, line] });
  });
  forge('the whole note signed by another key under the log name', async (p) => {
    const impostor = new SeedSigner('forgeries.test/log', new Uint8Array(32).fill(9));
    const { line } = await signBody(`${p.body.join('\n')}\n`, impostor);
    return join_({ ...p, sigs: [line.trimEnd(), ...witnessLines(p)] });
  });
  forge('a checkpoint of another origin signed by its own key', async (p) => {
    const cb = parseCheckpointBody(`${p.body.join('\n')}\n`);
    const otherLog = new SeedSigner('another.example/log', new Uint8Array(32).fill(5));
    const body = formatCheckpointBody({ ...cb, origin: otherLog.name });
    const { line } = await signBody(body, otherLog);
    return join_({ ...p, body: body.trimEnd().split('\n'), sigs: [line.trimEnd()] });
  });
  forge('the origin line changed', (p) => join_({ ...p, body: [`${p.body[0]}x`, ...p.body.slice(1)] }));
  forge('the tree size plus one', (p) =>
    join_({ ...p, body: [p.body[0]!, String(Number(p.body[1]) + 1), p.body[2]!] }),
  );
  forge('the tree size minus one', (p) =>
    join_({ ...p, body: [p.body[0]!, String(Number(p.body[1]) - 1), p.body[2]!] }),
  );
  forge('the root hash altered', (p) => join_({ ...p, body: [p.body[0]!, p.body[1]!, flipB64(p.body[2]!)] }));
  forge('the root hash replaced', (p) => join_({ ...p, body: [p.body[0]!, p.body[1]!, random32(3)] }));
  forge('an extension line added to the checkpoint', (p) => join_({ ...p, body: [...p.body, 'extension'] }));
  forge('a witness cosignature copied from another checkpoint', (p) => {
    const older = split(leaf0);
    if (older.body[1] === p.body[1]) return ''; // the two proofs must be of different checkpoints
    const copied = witnessLines(older)[0]!;
    const name = copied.split(' ')[1];
    return join_({ ...p, sigs: [...p.sigs.filter((l) => l.split(' ')[1] !== name), copied] });
  });
  forge('the first inclusion hash altered', (p) =>
    join_({ ...p, hashes: [flipB64(p.hashes[0]!), ...p.hashes.slice(1)] }),
  );
  forge('the last inclusion hash altered', (p) =>
    join_({ ...p, hashes: [...p.hashes.slice(0, -1), flipB64(p.hashes.at(-1)!, 31)] }),
  );
  forge('an inclusion hash removed', (p) => join_({ ...p, hashes: p.hashes.slice(1) }));
  forge('an inclusion hash added', (p) => join_({ ...p, hashes: [...p.hashes, random32(4)] }));
  forge('the inclusion hashes reversed (or, for one hash, doubled)', (p) =>
    join_({ ...p, hashes: p.hashes.length > 1 ? [...p.hashes].reverse() : [...p.hashes, ...p.hashes] }),
  );
  forge('the inclusion hashes all random', (p) => join_({ ...p, hashes: p.hashes.map((_, i) => random32(20 + i)) }));
  forge('an inclusion hash of zeros', (p) =>
    join_({ ...p, hashes: [Buffer.alloc(32).toString('base64'), ...p.hashes.slice(1)] }),
  );
  forge('an inclusion hash truncated to 31 bytes', (p) =>
    join_({
      ...p,
      hashes: [Buffer.from(p.hashes[0]!, 'base64').subarray(0, 31).toString('base64'), ...p.hashes.slice(1)],
    }),
  );
  forge("another leaf's index and entry with this leaf's inclusion hashes", (p) =>
    join_({ ...p, index: split(leaf0).index, extra: split(leaf0).extra }),
  );
  forge('the index plus one', (p) => join_({ ...p, index: `index ${Number(p.index.slice(6)) + 1}` }));
  forge('the index minus one', (p) => join_({ ...p, index: `index ${Number(p.index.slice(6)) - 1}` }));
  forge('the index at the tree size', (p) => join_({ ...p, index: `index ${p.body[1]}` }));
  forge('the index far beyond the tree', (p) => join_({ ...p, index: 'index 1125899906842624' }));
  forge('the extra line removed', (p) => join_({ ...p, extra: null }));
  forge('the extra cut to the prior hash', (p) => join_({ ...p, extra: p.extra!.subarray(0, 32) }));
  forge('the prior entry hash altered', (p) => {
    const e = Buffer.from(p.extra!);
    e[0]! ^= 1;
    return join_({ ...p, extra: e });
  });
  forge("the entry's digest changed to the file's", (p) =>
    join_({ ...p, extra: withEntry(p.extra!, { ...entryOf(p.extra!), digest: sha256hex(OTHER) }) }),
  );
  forge('the entry swapped for a made-up one naming the file', (p) =>
    join_({
      ...p,
      extra: withEntry(p.extra!, {
        v: 1,
        type: 'ledger_anchor',
        result: 'anchored',
        digest: sha256hex(OTHER),
        timestamp: '2026-01-01T00:00:00.000Z',
      }),
    }),
  );
  forge('the entry written as non-canonical JSON', (p) =>
    join_({ ...p, extra: withEntry(p.extra!, entryOf(p.extra!), false) }),
  );
  forge('the entry not JSON', (p) =>
    join_({ ...p, extra: Buffer.concat([p.extra!.subarray(0, 32), Buffer.from('not json')]) }),
  );
  forge('a field added to the entry', (p) =>
    join_({ ...p, extra: withEntry(p.extra!, { ...entryOf(p.extra!), note: 'hi' }) }),
  );
  forge("the entry's artifact label changed", (p) =>
    join_({ ...p, extra: withEntry(p.extra!, { ...entryOf(p.extra!), artifact: 'evil.tgz' }) }),
  );
  forge("another leaf's entry under this index", (p) => join_({ ...p, extra: split(leaf0).extra }));
  forge("another leaf's whole proof, for this file", () => leaf0);
  forge('the header changed', (p) => join_({ ...p, header: 'c2sp.org/tlog-proof@v2' }));
  forge('the note without any signature line', (p) => join_({ ...p, sigs: [] }).replace(/\n\n$/, '\n'));
  forge('the genuine proof, for a file never anchored', () => 'OTHER');
  other('the genuine proof (control)', () => genuine);
  other("an unknown key's extra line (not a forgery)", async (p) => {
    const stranger = new SeedSigner('stranger.example', new Uint8Array(32).fill(11));
    const line = (await cosignBody(`${p.body.join('\n')}\n`, stranger, 1_800_000_000)).trimEnd();
    return join_({ ...p, sigs: [...p.sigs, line] });
  });

  it('has 44 forgeries of one proof and two controls', () => {
    expect(variants.filter(([, , f]) => f)).toHaveLength(44);
  });

  it('each forgery FAILs the same way on the CLI, the package and the explorer; the controls PASS', async () => {
    const seen: string[] = [];
    for (const [name, make, forgery] of variants) {
      const made = typeof make === 'string' ? make : await make(split(genuine));
      const forFile = made === 'OTHER' ? 'other.tgz' : 'pkg.tgz';
      const text = made === 'OTHER' ? genuine : made;
      expect(text, name).not.toBe('');
      const path = sb.file('variant.tgz.tlog-proof', text);

      const cli = await sb.json(['ledger', 'verify', forFile, '--proof', path]);
      const cliResult = cli.code === 0 ? 'PASS' : cli.code === 1 ? 'FAIL' : `exit ${cli.code}`;

      let pkgResult: string;
      try {
        const digest = sha256hex(forFile === 'pkg.tgz' ? PKG : OTHER);
        pkgResult = (await verifyTlogProof(text, trust, { digest })).report.result;
      } catch (e) {
        pkgResult = (e as { code?: string }).code?.startsWith('bad_') ? 'FAIL' : `threw ${(e as Error).message}`;
      }

      await page.evaluate(
        ([proof, file, fileName]) => {
          const dt = new DataTransfer();
          dt.items.add(new File([proof!], 'pkg.tgz.tlog-proof'));
          dt.items.add(new File([file!], fileName!));
          document
            .querySelector('[data-testid=dropzone]')!
            .dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
        },
        [text, forFile === 'pkg.tgz' ? PKG : OTHER, `${forFile}#${seen.length}`],
      );
      await page.waitForFunction(
        (n) => document.querySelector('[data-testid=verify-output]')?.textContent?.includes(n),
        `#${seen.length}`,
      );
      const pageResult = await page.locator('[data-testid=verify-result]').getAttribute('data-status');

      const expected = forgery ? 'FAIL' : 'PASS';
      seen.push(`${name}: cli ${cliResult}, package ${pkgResult}, explorer ${pageResult}`);
      expect({ name, cli: cliResult, pkg: pkgResult, page: pageResult }).toEqual({
        name,
        cli: expected,
        pkg: expected,
        page: expected,
      });
    }
    expect(seen).toHaveLength(variants.length);
  }, 600_000);
});
