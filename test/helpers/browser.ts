// Headless Chromium from Debian's package (/usr/bin/chromium) driven by playwright-core:
// no browser download. One fresh profile directory per launch, removed on close.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';

export const CHROMIUM = process.env.STELE_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const hasChromium = (): boolean => existsSync(CHROMIUM);

/** Where tests save screenshots for reviewers (gitignored). */
export const ARTIFACTS = resolve(import.meta.dirname, '../../test-artifacts/explorer');

export interface TestBrowser {
  readonly context: BrowserContext;
  /** A new tab that records every request URL and page error. */
  page(viewport?: { width: number; height: number }): Promise<WatchedPage>;
  close(): Promise<void>;
}

export interface WatchedPage {
  readonly page: Page;
  readonly requests: string[];
  readonly errors: string[];
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'stele-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1200, height: 900 },
    acceptDownloads: false,
  });
  return {
    context,
    async page(viewport) {
      const page = await context.newPage();
      if (viewport) await page.setViewportSize(viewport);
      const requests: string[] = [];
      const errors: string[] = [];
      page.on('request', (r) => requests.push(r.url()));
      page.on('pageerror', (e) => errors.push(e.message));
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      return { page, requests, errors };
    },
    async close() {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** What the explorer exposes for tests and the benchmark (see src/explorer/main.ts). */
export interface SteleTimings {
  /** Checkpoint fetched and verified, from the start of loading. */
  checkpointMs?: number;
  /** Verified checkpoint view drawn, since navigation start. */
  checkpointRenderedMs?: number;
}

/** The page's timings (typed without the DOM library). */
export function timings(page: Page): Promise<SteleTimings> {
  return page.evaluate(() => (globalThis as unknown as { __stele?: SteleTimings }).__stele ?? {});
}

/** Saves a full-page screenshot as test-artifacts/explorer/<name>.png and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const path = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
