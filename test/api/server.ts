// Starts `startServer` in-process on a loopback port over a fresh data directory.
import { type Logger, pino } from 'pino';
import { SERVE_DEFAULTS } from '../../src/serve/config.js';
import { type RunningServer, type ServeConfig, startServer } from '../../src/serve/log-server.js';
import { scratchDir } from '../helpers/tmp.js';
import type { Json } from '../helpers/json.js';

export async function startTestServer(
  overrides: Partial<ServeConfig> = {},
  logger: Logger = pino({ level: 'silent' }),
): Promise<RunningServer> {
  const cfg: ServeConfig = {
    ...SERVE_DEFAULTS,
    dataDir: scratchDir('stele-api-'),
    origin: 'api.test/log',
    port: 0,
    batchIntervalMs: 20,
    fsync: false,
    ...overrides,
  };
  return startServer(cfg, logger);
}

export async function getJson(
  url: string,
  init?: RequestInit,
): Promise<{ status: number; body: Json; headers: Headers }> {
  const res = await fetch(url, init);
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, body, headers: res.headers };
}

export function postAnchor(base: string, body: unknown, headers: Record<string, string> = {}) {
  return getJson(`${base}/api/ledger/anchor`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/**
 * Waits until the server's lookup index covers its tree: a server started over a lost or
 * outdated index serves at once and rebuilds the index beside it (lookups and anchors are
 * 503 index_not_ready meanwhile, which a client retries).
 */
export async function untilIndexed(base: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await getJson(`${base}/api/ledger/summary`);
    if (body.indexedEntries >= body.treeSize) return;
    if (Date.now() > deadline) throw new Error(`the index covers ${body.indexedEntries} of ${body.treeSize} entries`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const digestOf = (i: number): string => i.toString(16).padStart(64, '0');
