// Where the keys the page verifies against come from, in order of precedence:
//   1. the visitor's pin (local storage), set on the Trust page;
//   2. a link that carries them (?vkey=…&witness=…&threshold=…);
//   3. the site's explorer.json (written next to the page by the deployment, or by
//      `stele serve` from its own key), else the site's /api/ledger/key.
// A pin always wins; when the site then presents a different key the page says so loudly.
// Also keeps the last checkpoint this browser verified, per log origin.
import { policyQuorum } from '../core/verify/index.js';
import { type Policy, parsePolicy, thresholdPolicy } from '../core/tlog-policy.js';
import { NoteError, SIG_ED25519, type Verifier, parseCosignerVkey, parseVkey } from './note.js';
import type { SeenCheckpoint, PageTrust } from './page-checks.js';

export interface TrustConfig {
  readonly vkey: string;
  readonly witnesses: readonly string[];
  /** The old M-of-N count, used only when there is no `policy`. */
  readonly threshold: number;
  /** The witnesses and their quorum as C2SP tlog-policy text: the authority when present. */
  readonly policy?: string;
}

/** What rule 5 says in the browser when the trust requires no cosignatures. */
const WITNESS_HINT = 'pin a witness policy on the Trust page';

export type TrustSource = 'pin' | 'link' | 'site-config' | 'site-api';

export const SOURCE_LABEL: Record<TrustSource, string> = {
  pin: 'pinned in this browser',
  link: 'given in the page link',
  'site-config': 'configured by this site (explorer.json)',
  'site-api': 'announced by this site’s API (/api/ledger/key)',
};

export interface ResolvedTrust {
  readonly trust: PageTrust | null;
  readonly config: TrustConfig | null;
  readonly source: TrustSource | null;
  /** What the site (or link) configures, when a pin overrides it. */
  readonly offered: { readonly config: TrustConfig; readonly source: TrustSource } | null;
  /** Set when the pinned key differs from the one the site presents. */
  readonly mismatch: string | null;
  readonly problems: string[];
}

/** The part of window.localStorage used here (an interface, so Node tests can pass a map). */
export interface KV {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

const PINS = 'stele:pins';
const seenKey = (origin: string) => `stele:seen:${origin}`;

function safeGet(store: KV | null, key: string): string | null {
  try {
    return store?.getItem(key) ?? null;
  } catch {
    return null;
  }
}

function safeSet(store: KV | null, key: string, value: string | null): void {
  try {
    if (value === null) store?.removeItem(key);
    else store?.setItem(key, value);
  } catch {
    /* storage disabled: the page still verifies, it just cannot remember */
  }
}

/**
 * Builds a Trust from vkeys; throws NoteError on a malformed or wrong-type key. The witness
 * quorum is a C2SP tlog-policy: the configured policy text, else k of the listed witnesses.
 */
export function toTrust(c: TrustConfig): PageTrust {
  const log = parseVkey(c.vkey);
  if (log.type !== SIG_ED25519) throw new NoteError('the log key must be an Ed25519 (type 0x01) vkey');
  let policy: Policy;
  if (c.policy !== undefined && c.policy.trim() !== '') {
    try {
      policy = parsePolicy(c.policy);
    } catch (e) {
      throw new NoteError(`the witness policy is not a tlog-policy: ${(e as Error).message}`);
    }
  } else {
    const named = c.witnesses.map((w) => ({ name: parseVkey(w).name, vkey: w }));
    const k =
      Number.isSafeInteger(c.threshold) && c.threshold >= 0 ? Math.min(c.threshold, named.length) : named.length;
    try {
      policy = thresholdPolicy([], named, k);
    } catch (e) {
      throw new NoteError((e as Error).message);
    }
  }
  const witnesses: Verifier[] = policy.witnesses.map((w) => parseCosignerVkey(w.vkey));
  return {
    origin: log.name,
    keyId: log.keyId,
    log,
    witnesses,
    policy,
    quorum: policyQuorum(policy, witnesses, WITNESS_HINT),
  };
}

export function readPins(store: KV | null): Record<string, TrustConfig & { pinnedAt: string }> {
  try {
    const v: unknown = JSON.parse(safeGet(store, PINS) ?? '{}');
    return v && typeof v === 'object' ? (v as Record<string, TrustConfig & { pinnedAt: string }>) : {};
  } catch {
    return {};
  }
}

export function pin(store: KV | null, c: TrustConfig): void {
  const origin = parseVkey(c.vkey).name;
  safeSet(store, PINS, JSON.stringify({ ...readPins(store), [origin]: { ...c, pinnedAt: new Date().toISOString() } }));
}

export function unpin(store: KV | null, origin: string): void {
  const pins = readPins(store);
  delete pins[origin];
  safeSet(store, PINS, JSON.stringify(pins));
}

export function readSeen(store: KV | null, origin: string): SeenCheckpoint | null {
  try {
    const v = JSON.parse(safeGet(store, seenKey(origin)) ?? 'null') as SeenCheckpoint | null;
    return v && Number.isSafeInteger(v.size) && /^[0-9a-f]{64}$/.test(v.rootHex) ? v : null;
  } catch {
    return null;
  }
}

export function writeSeen(store: KV | null, origin: string, seen: SeenCheckpoint | null): void {
  safeSet(store, seenKey(origin), seen ? JSON.stringify(seen) : null);
}

/** Parses {vkey, witnesses, threshold} from explorer.json, /api/ledger/key or a link. */
export function parseConfig(v: unknown): TrustConfig | null {
  if (!v || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  if (typeof o.vkey !== 'string') return null;
  const ws = Array.isArray(o.witnesses) ? o.witnesses : [];
  const witnesses = ws
    .map((w: unknown) =>
      typeof w === 'string'
        ? w
        : w && typeof w === 'object' && typeof (w as { vkey?: unknown }).vkey === 'string'
          ? (w as { vkey: string }).vkey
          : null,
    )
    .filter((w): w is string => w !== null);
  const wp = o.witnessPolicy as { threshold?: unknown; policy?: unknown } | undefined;
  const t = o.witnessThreshold ?? wp?.threshold ?? o.threshold;
  const threshold = typeof t === 'number' ? t : typeof t === 'string' && /^\d+$/.test(t) ? Number(t) : witnesses.length;
  const policy = typeof wp?.policy === 'string' ? wp.policy : typeof o.policy === 'string' ? o.policy : undefined;
  return { vkey: o.vkey, witnesses, threshold, ...(policy !== undefined ? { policy } : {}) };
}

export function configFromLink(params: URLSearchParams): TrustConfig | null {
  const vkey = params.get('vkey');
  if (!vkey) return null;
  return parseConfig({
    vkey,
    witnesses: params.getAll('witness'),
    threshold: params.get('threshold') ?? undefined,
    policy: params.get('policy') ?? undefined,
  });
}

async function fetchJson(url: URL, fetchFn: typeof fetch): Promise<unknown> {
  try {
    const res = await fetchFn(url, { cache: 'no-cache', headers: { accept: 'application/json' } });
    if (!res.ok || !(res.headers.get('content-type') ?? '').includes('json')) return null;
    return await res.json();
  } catch {
    return null;
  }
}

/** What the site (or the link) offers, first found wins; `api` false when the site says it serves no API. */
export async function offeredConfig(
  base: URL,
  params: URLSearchParams,
  fetchFn: typeof fetch = (...a) => fetch(...a),
): Promise<{ config: TrustConfig; source: TrustSource; api: boolean } | null> {
  const site = await fetchJson(new URL('explorer.json', base), fetchFn);
  const api = !(site && typeof site === 'object' && (site as { api?: unknown }).api === false);
  const link = configFromLink(params);
  if (link) return { config: link, source: 'link', api };
  const fromSite = parseConfig(site);
  if (fromSite) return { config: fromSite, source: 'site-config', api };
  // Only a site with an API is asked for its key (a static copy would answer 404).
  const fromApi = api ? parseConfig(await fetchJson(new URL('api/ledger/key', base), fetchFn)) : null;
  if (fromApi) return { config: fromApi, source: 'site-api', api };
  return null;
}

const sameKeys = (a: TrustConfig, b: TrustConfig): boolean => a.vkey.trim() === b.vkey.trim();

export function resolveTrust(
  offered: { config: TrustConfig; source: TrustSource } | null,
  store: KV | null,
): ResolvedTrust {
  const problems: string[] = [];
  const pins = readPins(store);
  let origin: string | null = null;
  if (offered) {
    try {
      origin = parseVkey(offered.config.vkey).name;
    } catch (e) {
      problems.push(`the key ${SOURCE_LABEL[offered.source]} is malformed: ${(e as Error).message}`);
    }
  }
  const pinned = origin !== null ? pins[origin] : Object.values(pins)[0];
  const chosen = pinned ? { config: pinned, source: 'pin' as const } : origin !== null ? offered : null;
  if (!chosen) return { trust: null, config: null, source: null, offered, mismatch: null, problems };
  let trust: PageTrust | null = null;
  try {
    trust = toTrust(chosen.config);
  } catch (e) {
    problems.push(`the key ${SOURCE_LABEL[chosen.source]} is unusable: ${(e as Error).message}`);
  }
  const mismatch =
    pinned && offered && !sameKeys(pinned, offered.config)
      ? `This site presents the log key ${offered.config.vkey}, but you pinned ${pinned.vkey}. Everything here is verified against your pin.`
      : null;
  return { trust, config: chosen.config, source: chosen.source, offered: pinned ? offered : null, mismatch, problems };
}
