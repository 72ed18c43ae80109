/// <reference lib="dom" />
// The explorer verifies a dropped C2SP tlog-proof in a real browser (Debian's Chromium): a
// proof exported by `stele ledger proof --export` (the CLI as a subprocess) against the key
// and witness policy the site names, alone and beside the file it proves; a proof with one
// inclusion hash altered FAILs rule 4, and beside the wrong file FAILs rule 3. The rules are
// the core's (src/core/verify/, through the @stele/verify package), the same the CLI's `verify --proof` reports.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestBrowser, hasChromium, launchBrowser, screenshot } from '../helpers/browser.js';
import { Sandbox, ensureBuilt as ensureCliBuilt } from '../helpers/cli.js';
import { type SteleChild, ensureBuilt, startStele } from '../helpers/explorer-servers.js';

const rules = (page: Page) =>
  page
    .locator('[data-testid=verify-report] [data-check]')
    .evaluateAll((els) => els.map((e) => `${e.getAttribute('data-check')}=${e.getAttribute('data-status')}`).join(' '));

async function result(page: Page): Promise<string | null> {
  await page.waitForSelector('[data-testid=verify-result]', { timeout: 30_000 });
  return page.locator('[data-testid=verify-result]').getAttribute('data-status');
}

describe.skipIf(!hasChromium())('explorer: a dropped .tlog-proof', () => {
  let stele: SteleChild;
  let browser: TestBrowser;
  let sb: Sandbox;
  let proofPath = '';
  let tamperedPath = '';
  const pkg = 'a release the explorer checks from its proof\n';

  beforeAll(async () => {
    ensureBuilt();
    await ensureCliBuilt();
    [stele, browser] = await Promise.all([
      startStele({ witnesses: 2, origin: 'explorer-proof.test/log' }),
      launchBrowser(),
    ]);
    sb = new Sandbox('stele-explorer-proof-');
    sb.file('first.tgz', 'first\n');
    sb.file('pkg.tgz', pkg);
    sb.file('other.tgz', 'not the package\n');
    expect((await sb.run(['ledger', 'init', '--endpoint', stele.url, '--trust-key', stele.keyId])).code).toBe(0);
    // pkg.tgz is leaf 1, so its proof has an inclusion hash to alter.
    expect((await sb.run(['ledger', 'anchor', 'first.tgz'])).code).toBe(0);
    const a = await sb.json(['ledger', 'anchor', 'pkg.tgz']);
    expect(a.code).toBe(0);
    const id = (a.out.entryId ?? a.out.entry?.id) as string;
    const exported = await sb.run(['ledger', 'proof', id, '--export', 'pkg.tgz.tlog-proof']);
    expect(exported.code).toBe(0);
    proofPath = join(sb.work, 'pkg.tgz.tlog-proof');
    const lines = readFileSync(proofPath, 'utf8').split('\n');
    const at = lines.findIndex((l) => l.startsWith('index ')) + 1;
    expect(lines[at]).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    lines[at] = `${lines[at]!.startsWith('A') ? 'B' : 'A'}${lines[at]!.slice(1)}`;
    tamperedPath = join(sb.work, 'tampered.tlog-proof');
    writeFileSync(tamperedPath, lines.join('\n'));
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await stele?.stop();
    sb?.cleanup();
  });

  it('PASSes an exported proof, alone and beside its file, with every rule of the report', async () => {
    const { page, requests, errors } = await browser.page();
    await page.goto(`${stele.url}/#/verify`);
    await page.locator('[data-testid=file-input]').setInputFiles(proofPath);
    expect(await result(page)).toBe('PASS');
    // The page's checkpoint is newer than the proof's: rule 2 is proved from the tiles.
    expect(await rules(page)).toBe('rule-1=PASS rule-2=PASS rule-3=PASS rule-4=PASS rule-5=PASS rule-6=PASS');
    expect(await page.locator('[data-testid=verify-report] [data-check=rule-5]').innerText()).toMatch(
      /2 valid cosignatures/,
    );
    await screenshot(page, 'tlog-proof-pass');
    // Nothing was looked up for the proof: no entry request.
    expect(requests.some((u) => u.includes('/api/ledger/entry'))).toBe(false);

    await page.locator('[data-testid=file-input]').setInputFiles([proofPath, join(sb.work, 'pkg.tgz')]);
    await page.waitForSelector('[data-testid=file-digest]');
    expect(await result(page)).toBe('PASS');
    expect(await page.locator('[data-testid=verify-report] [data-check=rule-3]').innerText()).toMatch(
      /records the file's digest/,
    );
    expect(errors).toEqual([]);
    await page.close();
  });

  it('FAILs a proof with an altered inclusion hash on rule 4, and one beside the wrong file on rule 3', async () => {
    const { page } = await browser.page();
    await page.goto(`${stele.url}/#/verify`);
    await page.locator('[data-testid=file-input]').setInputFiles(tamperedPath);
    expect(await result(page)).toBe('FAIL');
    expect(await rules(page)).toMatch(/rule-1=PASS .*rule-4=FAIL .*rule-6=FAIL/);
    expect(await page.locator('[data-testid=verify-report] [data-check=rule-4]').innerText()).toMatch(/4\. Inclusion/);
    await expect.poll(() => page.locator('[data-testid=banner]').isVisible()).toBe(true);
    expect(await page.locator('[data-testid=banner]').innerText()).toMatch(/4\. Inclusion/);
    await screenshot(page, 'tlog-proof-tampered');

    // A real drop event with the good proof and the wrong file.
    await page.evaluate(
      ([proof, other]) => {
        const dt = new DataTransfer();
        dt.items.add(new File([proof!], 'pkg.tgz.tlog-proof'));
        dt.items.add(new File([other!], 'other.tgz'));
        document
          .querySelector('[data-testid=dropzone]')!
          .dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      },
      [readFileSync(proofPath, 'utf8'), 'not the package\n'],
    );
    await page.waitForFunction(() =>
      document.querySelector('[data-testid=verify-output]')?.textContent?.includes('other.tgz'),
    );
    expect(await result(page)).toBe('FAIL');
    expect(await rules(page)).toMatch(/rule-3=FAIL .*rule-4=PASS .*rule-6=FAIL/);
    await page.close();
  });
});
