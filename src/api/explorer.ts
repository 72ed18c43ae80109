// Serves the built explorer (dist/explorer, see vite.config.ts) at / with koa-static:
// index.html revalidated on every load (no-cache), the content-hashed files under /assets/
// cached for a year as immutable, and /explorer.json naming the keys the page verifies
// against. Only these paths are handled, so the log objects, /api, /healthz, /metrics and
// /v1 are never shadowed.
import type { Context, Middleware, Next } from 'koa';
import serve from 'koa-static';
import { SIG_COSIGNATURE_V1, SIG_ED25519, formatVkey, makeVerifier } from '../core/note.js';
import { findExplorerDir } from '../http/explorer-files.js';
import type { LedgerService } from './ledger.js';
import type { ExplorerJson } from './wire.js';

export { findExplorerDir } from '../http/explorer-files.js';

/** Same policy as the <meta> the build writes: the page talks to its own origin only. */
export const EXPLORER_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const RESERVED = /^\/(?:api|checkpoint|tile|healthz|metrics|v1)(?:\/|$)/;
const IMMUTABLE = 'public, max-age=31536000, immutable';

export interface ExplorerOptions {
  /** The built explorer; default $STELE_EXPLORER_DIR, else dist/explorer of this checkout. */
  readonly dir?: string;
  /** The log whose keys /explorer.json announces. */
  readonly ledger?: Pick<LedgerService, 'origin' | 'publicKey' | 'witnesses' | 'witnessThreshold' | 'witnessPolicy'>;
}

/** The explorer's trust configuration for a log: its vkey, witness vkeys, threshold and witness policy. */
export function explorerConfig(ledger: NonNullable<ExplorerOptions['ledger']>): ExplorerJson {
  return {
    origin: ledger.origin,
    vkey: formatVkey(makeVerifier(ledger.origin, SIG_ED25519, ledger.publicKey)),
    witnesses: ledger.witnesses.map((w) => formatVkey(makeVerifier(w.name, SIG_COSIGNATURE_V1, w.publicKey))),
    witnessThreshold: ledger.witnessThreshold,
    // The C2SP tlog-policy text, when the log has one: the explorer's authority over the count.
    ...(ledger.witnessPolicy !== undefined ? { policy: ledger.witnessPolicy } : {}),
  };
}

export function explorerMiddleware(o: ExplorerOptions = {}): Middleware {
  const dir = findExplorerDir(o.dir);
  const config = o.ledger ? JSON.stringify(explorerConfig(o.ledger)) : null;
  const files = dir
    ? serve(dir, {
        index: 'index.html',
        setHeaders(res, path) {
          res.setHeader('X-Content-Type-Options', 'nosniff');
          res.setHeader('Referrer-Policy', 'no-referrer');
          if (/[/\\]assets[/\\][^/\\]+$/.test(path)) {
            res.setHeader('Cache-Control', IMMUTABLE);
          } else {
            res.setHeader('Cache-Control', 'no-cache');
            res.setHeader('Content-Security-Policy', EXPLORER_CSP);
          }
        },
      })
    : null;
  return async (ctx: Context, next: Next): Promise<void> => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || RESERVED.test(ctx.path)) return next();
    if (ctx.path === '/explorer.json' && config) {
      ctx.set('Cache-Control', 'no-cache');
      ctx.type = 'application/json';
      ctx.body = config;
      return;
    }
    const page = ctx.path === '/' || ctx.path === '/index.html';
    if (!page && !/^\/assets\/[A-Za-z0-9_-][A-Za-z0-9._-]*$/.test(ctx.path)) return next();
    if (!files) {
      if (!page) return next();
      ctx.status = 404;
      ctx.set('Cache-Control', 'no-store');
      ctx.type = 'text/plain';
      ctx.body = 'The explorer is not built: run `npm run build` (tsc and vite build).\n';
      return;
    }
    return files(ctx, next);
  };
}
