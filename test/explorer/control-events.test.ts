// The control plane's events are not releases (issue 33): on the overview and the entries
// page the table of releases lists anchors and recorded verifications only, and the policy
// evaluations, access decisions, key epochs and refused tokens the control plane records
// are shown apart, in a table of their own. A log holding both kinds (built with the
// sequencer, as the control plane appends them), served by `stele serve`, in Chromium.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { type TestBrowser, hasChromium, launchBrowser } from '../helpers/browser.js';
import { type RunningServe, ensureBuilt as ensureCli, startServe } from '../helpers/cli.js';
import { ensureBuilt as ensureExplorer } from '../helpers/explorer-servers.js';

const ORIGIN = 'control-events.test/log';
/** The log, oldest first: [type, result, artifact]. */
const ENTRIES: readonly (readonly [string, string, string])[] = [
  ['ledger_anchor', 'Anchored', 'app-1.0.tgz'],
  ['key_epoch', 'Created', 'key-epoch-1'],
  ['access_decision', 'Allowed', 'lease'],
  ['ledger_anchor', 'Anchored', 'app-1.1.tgz'],
  ['document_verified', 'Verified', 'app-1.1.tgz'],
  ['policy_evaluation', 'Deny', 'policy'],
  ['authentication_failure', 'Refused', 'auth'],
  ['ledger_anchor', 'Anchored', 'app-1.2.tgz'],
];
const seqsOf = (kinds: readonly string[]) =>
  ENTRIES.flatMap(([type], seq) => (kinds.includes(type) ? [seq] : [])).reverse();
const RELEASES = seqsOf(['ledger_anchor', 'document_verified']);
const EVENTS = seqsOf(['key_epoch', 'access_decision', 'policy_evaluation', 'authentication_failure']);

describe.skipIf(!hasChromium())('explorer: control-plane events apart from the releases', () => {
  let dataDir: string;
  let serve: RunningServe;
  let browser: TestBrowser;

  beforeAll(async () => {
    await ensureCli();
    ensureExplorer();
    dataDir = mkdtempSync(join(tmpdir(), 'stele-control-events-'));
    const log = await openLocalLog({ dataDir, origin: ORIGIN, fsync: false, batchInterval: 1 });
    for (const [i, [type, result, artifact]] of ENTRIES.entries()) {
      const digest = createHash('sha256').update(`entry ${i}`).digest('hex');
      await log.sequencer.submit(anchorRequest(type, result, digest, { artifact, scope: 'demo' }));
    }
    await log.sequencer.close();
    [serve, browser] = await Promise.all([startServe({ dataDir, origin: ORIGIN }), launchBrowser()]);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await serve?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  /** The leaves and types listed by the table `testid` under `scope` (a CSS selector). */
  async function listed(page: Awaited<ReturnType<TestBrowser['page']>>['page'], scope: string, testid: string) {
    const rows = page.locator(`${scope} [data-testid=${testid}] tbody tr`);
    return rows.evaluateAll((trs) =>
      trs.map((r) => ({
        seq: Number(r.getAttribute('data-seq')),
        type: r.querySelector('td[data-label=Type]')?.textContent,
        status: r.getAttribute('data-status'),
      })),
    );
  }

  it('the overview lists the releases, and the control-plane events apart', async () => {
    const { page, errors } = await browser.page();
    await page.goto(`${serve.url}/`);
    await page.waitForSelector('[data-testid=cp-time]', { timeout: 30_000 });
    const section = 'section[aria-labelledby=latest-h]';
    const releases = await listed(page, section, 'entries');
    expect(releases.map((r) => r.seq)).toEqual(RELEASES);
    expect(releases.every((r) => ['ledger_anchor', 'document_verified'].includes(r.type!))).toBe(true);
    const events = await listed(page, `${section} [data-testid=control-events]`, 'events');
    expect(events.map((r) => r.seq)).toEqual(EVENTS);
    expect([...releases, ...events].every((r) => r.status === 'PASS')).toBe(true);
    expect(await page.locator(`${section} [data-testid=control-events] h3`).innerText()).toBe('Control-plane events');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('the entries page does the same', async () => {
    const { page, errors } = await browser.page();
    await page.goto(`${serve.url}/#/entries`);
    await page.waitForSelector('[data-testid=page-status][data-status=PASS]', { timeout: 30_000 });
    expect((await listed(page, 'main', 'entries')).map((r) => r.seq)).toEqual(RELEASES);
    expect((await listed(page, 'main', 'events')).map((r) => r.seq)).toEqual(EVENTS);
    expect(errors).toEqual([]);
    await page.close();
  });
});
