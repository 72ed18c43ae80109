/// <reference lib="dom" />
// The page's state: where the log is, the trust it verifies against, the verified checkpoint
// (loaded once, reloaded on demand), and the banner that lists what failed.
import { toHex } from './bytes.js';
import { clear, h } from './dom.js';
import { FetchError, LogClient } from './log.js';
import { offeredConfig, type ResolvedTrust, readSeen, resolveTrust, writeSeen } from './trust.js';
import { type CheckpointResult, verifyPageCheckpoint } from './page-checks.js';

export const base = new URL('./', location.href);
export const client = new LogClient(base);
export const storage: Storage | null = (() => {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
})();

export interface Loaded {
  readonly resolved: ResolvedTrust;
  readonly cp: CheckpointResult | null;
  /** Why there is no checkpoint result (no key, fetch failure). */
  readonly error: string | null;
  /** The last checkpoint seen before this one (for display). */
  readonly previous: { size: number; rootHex: string; at: string } | null;
}

declare global {
  interface Window {
    /** Timings for tests and the benchmark. */
    __stele?: { checkpointMs?: number; checkpointRenderedMs?: number; fetch?: LogClient['stats'] };
  }
}

export let offered: Promise<Awaited<ReturnType<typeof offeredConfig>>> | null = null;
export let loading: Promise<Loaded> | null = null;

/** Whether the site serves /api/ledger/* (a mirror's explorer.json says `"api": false`). */
export async function siteHasApi(): Promise<boolean> {
  offered ??= offeredConfig(base, new URLSearchParams(location.search));
  return (await offered)?.api !== false;
}
export const failures = new Map<string, string>();

export const banner = document.getElementById('banner')!;

export function setFailure(key: string, message: string | null): void {
  if (message === null) failures.delete(key);
  else failures.set(key, message);
  renderBanner();
}

export function renderBanner(): void {
  clear(banner);
  if (failures.size === 0) {
    banner.hidden = true;
    return;
  }
  banner.hidden = false;
  banner.append(
    h(
      'p',
      { class: 'banner-title' },
      h('span', { 'aria-hidden': 'true' }, '⚠ '),
      'Verification FAILED — do not trust what this site shows.',
    ),
    h(
      'ul',
      null,
      [...failures.values()].map((m) => h('li', null, m)),
    ),
  );
}

export function load(force = false): Promise<Loaded> {
  if (loading && !force) return loading;
  const t0 = performance.now();
  if (force) offered = null;
  offered ??= offeredConfig(base, new URLSearchParams(location.search));
  const note = client.checkpoint();
  note.catch(() => undefined);
  loading = (async (): Promise<Loaded> => {
    const resolved = resolveTrust(await offered!, storage);
    setFailure('key-mismatch', resolved.mismatch);
    if (!resolved.trust) {
      const why =
        resolved.problems.join('; ') ||
        'This site names no log key (no explorer.json, no /api/ledger/key) and you have not pinned one.';
      setFailure('no-key', `${why} Nothing can be verified: paste the log's vkey on the Trust page.`);
      return { resolved, cp: null, error: why, previous: null };
    }
    setFailure('no-key', null);
    let text: string;
    try {
      text = await note;
    } catch (e) {
      const msg = e instanceof FetchError ? e.message : String(e);
      setFailure('checkpoint', `The checkpoint cannot be read: ${msg}`);
      return { resolved, cp: null, error: msg, previous: null };
    }
    const origin = resolved.trust.log.name;
    const previous = readSeen(storage, origin);
    const cp = await verifyPageCheckpoint(text, resolved.trust, client, previous);
    for (const [k, c] of [
      ['signature', cp.signature],
      ['witnesses', cp.witnesses],
      ['tiles', cp.tiles],
      ['consistency', cp.consistency],
    ] as const) {
      setFailure(`cp-${k}`, c.status === 'FAIL' ? `${c.name}: ${c.detail}` : null);
    }
    if (cp.remember && cp.root && (!previous || cp.size >= previous.size)) {
      writeSeen(storage, origin, { size: cp.size, rootHex: toHex(cp.root), at: new Date().toISOString() });
    }
    window.__stele = { ...(window.__stele ?? {}), checkpointMs: performance.now() - t0, fetch: client.stats };
    return { resolved, cp, error: null, previous };
  })();
  return loading;
}
