// Explorer benchmark: first render of the verified checkpoint view in headless Chromium
// against `stele serve` on loopback (navigation start → checkpoint signature, witnesses,
// tiles and consistency checked and the view drawn), cold (HTTP cache off, first visit) and
// warm (cached tiles, a previously seen checkpoint so the consistency proof is computed);
// also a page of 256 entries verified, local file hashing, and the bundle size.
//   npm run bench -- explorer [--quick]
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { type SteleTimings, launchBrowser, timings } from '../test/helpers/browser.js';
import { EXPLORER_DIST, anchorMany, ensureBuilt, sha256hex, startStele } from '../test/helpers/explorer-servers.js';
import { QUICK, figure, note, percentile } from './util.js';

export default async function main(): Promise<void> {
  ensureBuilt();
  const entries = QUICK ? 1_000 : 10_000;
  const runs = QUICK ? 5 : 15;
  const js = readdirSync(join(EXPLORER_DIST, 'assets')).filter((f) => f.endsWith('.js'));
  const jsBytes = js.reduce((n, f) => n + readFileSync(join(EXPLORER_DIST, 'assets', f)).length, 0);
  const jsGzip = js.reduce((n, f) => n + gzipSync(readFileSync(join(EXPLORER_DIST, 'assets', f))).length, 0);

  const stele = await startStele({ witnesses: 3 });
  const browser = await launchBrowser();
  const tmp = mkdtempSync(join(tmpdir(), 'stele-bench-explorer-'));
  try {
    const t0 = performance.now();
    await anchorMany(
      stele.url,
      Array.from({ length: entries }, (_, i) => ({
        digest: sha256hex(`bench ${i}`),
        artifact: `b-${i}`,
        scope: 'bench',
      })),
      64,
    );
    note(
      `${entries} entries anchored in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${runs} runs each; Chromium ${browser.context.browser()?.version() ?? '(persistent)'}`,
    );

    const { page } = await browser.page();
    const cdp = await browser.context.newCDPSession(page);
    const render = async (): Promise<{ rendered: number; verify: number }> => {
      await page.goto(`${stele.url}/?r=${Math.random()}#/`);
      await page.waitForFunction(
        () => (globalThis as unknown as { __stele?: SteleTimings }).__stele?.checkpointRenderedMs !== undefined,
        null,
        { timeout: 30_000 },
      );
      const status = await page.locator('[data-testid=cp-status]').getAttribute('data-status');
      if (status !== 'PASS') throw new Error(`checkpoint view shows ${status}`);
      const t = await timings(page);
      return { rendered: t.checkpointRenderedMs!, verify: t.checkpointMs! };
    };

    await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
    const cold: number[] = [];
    const coldVerify: number[] = [];
    for (let i = 0; i < runs; i++) {
      await page.evaluate(() => localStorage.clear()).catch(() => undefined);
      const r = await render();
      cold.push(r.rendered);
      coldVerify.push(r.verify);
    }
    await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
    await anchorMany(
      stele.url,
      Array.from({ length: 50 }, (_, i) => ({ digest: sha256hex(`bench later ${i}`) })),
      16,
    );
    const warm: number[] = [];
    for (let i = 0; i < runs; i++) warm.push((await render()).rendered);

    figure('explorer_checkpoint_first_render_cold_p50', percentile(cold, 50), 'ms');
    figure('explorer_checkpoint_first_render_cold_max', Math.max(...cold), 'ms');
    figure('explorer_checkpoint_verify_cold_p50', percentile(coldVerify, 50), 'ms');
    figure('explorer_checkpoint_first_render_warm_p50', percentile(warm, 50), 'ms');
    figure('explorer_checkpoint_first_render_budget', 1000, 'ms');

    // A full page of the browse view: 256 records → entry hashes → leaves → audit paths.
    const pageMs: number[] = [];
    for (let i = 0; i < Math.min(runs, 5); i++) {
      await page.goto(`${stele.url}/?p=${i}#/entries/0`);
      const t = performance.now();
      await page.waitForSelector('[data-testid=page-status]:not([data-status=PENDING])', { timeout: 30_000 });
      pageMs.push(performance.now() - t);
    }
    figure('explorer_entries_page_256_verified_p50', percentile(pageMs, 50), 'ms');

    // Streaming hash of a local file (never uploaded).
    const mib = QUICK ? 16 : 128;
    const file = join(tmp, 'big.bin');
    writeFileSync(file, Buffer.alloc(mib * 1024 * 1024, 7));
    await page.goto(`${stele.url}/#/verify`);
    await page.waitForSelector('[data-testid=file-input]', { state: 'attached' });
    const th = performance.now();
    await page.locator('[data-testid=file-input]').setInputFiles(file);
    await page.waitForSelector('[data-testid=file-digest]', { timeout: 120_000 });
    figure('explorer_file_hash_throughput', mib / ((performance.now() - th) / 1000), 'MiB/s');

    figure('explorer_bundle_js', jsBytes / 1024, 'KiB');
    figure('explorer_bundle_js_gzip', jsGzip / 1024, 'KiB');
  } finally {
    await browser.close();
    await stele.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}
