// A small HTTP server that fronts a real log (`stele serve`) and serves a forged or
// tampered view of it: rewritten JSON answers (signatures, checkpoints, audit paths,
// entries) and altered log objects (checkpoint note, tiles, bundles). The CLI's FAIL
// tests point the client at it.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Json } from './json.js';

export interface Tamper {
  /** Rewrites the upstream URL of a request (e.g. to answer one lookup with another). */
  rewrite?(url: URL): URL;
  /** Rewrites a 2xx JSON answer of /api/ledger/<route>; return the body to send. */
  json?(route: string, body: Json, url: URL): Json;
  /** Rewrites a log object (`checkpoint`, `tile/…`); null answers 404. */
  object?(key: string, data: Buffer): Buffer | null;
}

export interface TamperProxy {
  readonly url: string;
  /** The current tampering; replace it between requests. */
  tamper: Tamper;
  /** Requests seen, by path. */
  readonly seen: string[];
  close(): Promise<void>;
}

export async function startTamperProxy(upstream: string, tamper: Tamper = {}): Promise<TamperProxy> {
  const seen: string[] = [];
  const proxy: { tamper: Tamper } = { tamper };
  const server = createServer(async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const url = new URL(req.url ?? '/', upstream);
      seen.push(url.pathname);
      const target = proxy.tamper.rewrite ? proxy.tamper.rewrite(new URL(url)) : url;
      const up = await fetch(new URL(`${target.pathname}${target.search}`, upstream), {
        method: req.method,
        headers: { 'content-type': req.headers['content-type'] ?? 'application/octet-stream' },
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
      });
      let body: Buffer = Buffer.from(await up.arrayBuffer());
      let status = up.status;
      const type = up.headers.get('content-type') ?? '';
      const t = proxy.tamper;
      if (url.pathname.startsWith('/api/ledger/') && status < 300 && type.includes('json') && t.json) {
        const route = url.pathname.slice('/api/ledger/'.length);
        body = Buffer.from(JSON.stringify(t.json(route, JSON.parse(body.toString('utf8')), url)));
      } else if ((url.pathname === '/checkpoint' || url.pathname.startsWith('/tile/')) && status === 200 && t.object) {
        const out = t.object(url.pathname.slice(1), body);
        if (out === null) {
          status = 404;
          body = Buffer.from(JSON.stringify({ error: { code: 'object_not_found', message: 'gone' } }));
        } else body = out;
      }
      res.writeHead(status, { 'content-type': type || 'application/octet-stream', 'content-length': body.length });
      res.end(body);
    } catch (e) {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'bad_gateway', message: (e as Error).message } }));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get tamper() {
      return proxy.tamper;
    },
    set tamper(t: Tamper) {
      proxy.tamper = t;
    },
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

// ---- tampering helpers ------------------------------------------------------------------

/** Flips one bit of byte `at` (negative counts from the end). */
export function flipByte(data: Buffer, at: number, mask = 0x01): Buffer {
  const out = Buffer.from(data);
  const i = at < 0 ? out.length + at : at;
  out[i] = out[i]! ^ mask;
  return out;
}

/** Flips a bit in the last hex digit of a 64-hex hash. */
export function flipHex(h: string): string {
  const last = parseInt(h.slice(-1), 16) ^ 1;
  return h.slice(0, -1) + last.toString(16);
}

/** Corrupts the Ed25519 signature in an `ed25519:<base64>` string. */
export function forgeSig(s: string): string {
  const b = Buffer.from(s.replace(/^ed25519:/, ''), 'base64');
  b[10] = b[10]! ^ 0x01;
  return `ed25519:${b.toString('base64')}`;
}

/** Corrupts the signature (not the key hash) of every signature line named `name` in a note. */
export function forgeNote(note: string, name: string): string {
  return note.replace(
    new RegExp(`^— ${name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} (\\S+)$`, 'mu'),
    (_, b64: string) => {
      const b = Buffer.from(b64, 'base64');
      b[10] = b[10]! ^ 0x01;
      return `— ${name} ${b.toString('base64')}`;
    },
  );
}

/** Drops every signature line but the log's from a note. */
export function dropCosignatures(note: string, origin: string): string {
  const [body, sigs] = [note.slice(0, note.indexOf('\n\n') + 2), note.slice(note.indexOf('\n\n') + 2)];
  return (
    body +
    sigs
      .split('\n')
      .filter((l) => l.startsWith(`— ${origin} `))
      .map((l) => `${l}\n`)
      .join('')
  );
}
