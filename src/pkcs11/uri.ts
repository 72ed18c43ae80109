// RFC 7512 PKCS#11 URIs, the names OpenSSL, p11-kit and cosign give keys in a token:
//   pkcs11:token=stele;object=log?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin
// Path attributes (`;`-separated) select the token and the object; query attributes
// (`&`-separated) say how to reach them. Pure (no node:*), so it can move to src/core/.
//
// `pin-value` is refused: a URI travels on command lines, in config dumps and in logs,
// where a PIN must never be. The PIN comes from `pin-source` or the environment.

export class Pkcs11UriError extends Error {
  override name = 'Pkcs11UriError';
}

export type Pkcs11ObjectType = 'private' | 'public' | 'secret-key' | 'cert' | 'data';

export interface Pkcs11Uri {
  /** Token label (CK_TOKEN_INFO.label, without its space padding). */
  readonly token?: string;
  readonly serial?: string;
  readonly manufacturer?: string;
  readonly model?: string;
  readonly slotId?: number;
  /** Object label (CKA_LABEL). */
  readonly object?: string;
  /** Object id (CKA_ID), raw bytes. */
  readonly id?: Uint8Array;
  readonly type?: Pkcs11ObjectType;
  /** The PKCS#11 module (shared library) to load. */
  readonly modulePath?: string;
  readonly moduleName?: string;
  /** Where the PIN is: `file:<path>` or a path. */
  readonly pinSource?: string;
}

const PATH_ATTRS = new Set([
  'token',
  'manufacturer',
  'serial',
  'model',
  'library-manufacturer',
  'library-description',
  'library-version',
  'object',
  'type',
  'id',
  'slot-manufacturer',
  'slot-description',
  'slot-id',
]);
const QUERY_ATTRS = new Set(['pin-source', 'pin-value', 'module-name', 'module-path']);
const TYPES = new Set<string>(['private', 'public', 'secret-key', 'cert', 'data']);

export const isPkcs11Uri = (text: string): boolean => /^pkcs11:/i.test(text);

/** The bytes a percent-encoded attribute value stands for. */
export function percentDecodeBytes(value: string, what: string): Uint8Array {
  const out: number[] = [];
  const utf8 = new TextEncoder();
  for (let i = 0; i < value.length; ) {
    if (value[i] === '%') {
      const hex = value.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex))
        throw new Pkcs11UriError(`${what}: bad percent-encoding at "${value.slice(i, i + 3)}"`);
      out.push(parseInt(hex, 16));
      i += 3;
    } else {
      const cp = value.codePointAt(i)!;
      const ch = String.fromCodePoint(cp);
      out.push(...utf8.encode(ch));
      i += ch.length;
    }
  }
  return new Uint8Array(out);
}

function decodeText(value: string, what: string): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(percentDecodeBytes(value, what));
  } catch (e) {
    if (e instanceof Pkcs11UriError) throw e;
    throw new Pkcs11UriError(`${what} is not UTF-8`);
  }
}

function pairs(part: string, sep: string, allowed: Set<string>, where: string): Map<string, string> {
  const out = new Map<string, string>();
  if (part === '') return out;
  for (const item of part.split(sep)) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new Pkcs11UriError(`${where} attribute "${item}" is not name=value`);
    const name = item.slice(0, eq).toLowerCase();
    if (!allowed.has(name) && !name.startsWith('x-')) throw new Pkcs11UriError(`unknown ${where} attribute "${name}"`);
    // RFC 7512 allows a repeated query attribute only for vendor use; a repeated path attribute never.
    if (out.has(name)) throw new Pkcs11UriError(`${where} attribute "${name}" appears twice`);
    out.set(name, item.slice(eq + 1));
  }
  return out;
}

/** Parses a PKCS#11 URI; throws Pkcs11UriError with a one-line reason. */
export function parsePkcs11Uri(text: string): Pkcs11Uri {
  if (!isPkcs11Uri(text)) throw new Pkcs11UriError('a PKCS#11 URI starts with "pkcs11:"');
  const rest = text.slice('pkcs11:'.length);
  const q = rest.indexOf('?');
  const path = pairs(q < 0 ? rest : rest.slice(0, q), ';', PATH_ATTRS, 'path');
  const query = pairs(q < 0 ? '' : rest.slice(q + 1), '&', QUERY_ATTRS, 'query');
  if (query.has('pin-value')) {
    throw new Pkcs11UriError(
      'pin-value is refused: a PIN in the URI ends up in process lists and logs; use pin-source=file:<path> or STELE_PKCS11_PIN',
    );
  }
  const text_ = (m: Map<string, string>, k: string) => (m.has(k) ? decodeText(m.get(k)!, k) : undefined);
  const type = text_(path, 'type');
  if (type !== undefined && !TYPES.has(type)) throw new Pkcs11UriError(`type must be one of ${[...TYPES].join(', ')}`);
  const slot = text_(path, 'slot-id');
  if (slot !== undefined && !/^[0-9]{1,10}$/.test(slot)) throw new Pkcs11UriError('slot-id must be a decimal number');
  const uri: { -readonly [K in keyof Pkcs11Uri]: Pkcs11Uri[K] } = {};
  const set = <K extends keyof Pkcs11Uri>(k: K, v: Pkcs11Uri[K] | undefined) => {
    if (v !== undefined) uri[k] = v;
  };
  set('token', text_(path, 'token'));
  set('serial', text_(path, 'serial'));
  set('manufacturer', text_(path, 'manufacturer'));
  set('model', text_(path, 'model'));
  set('slotId', slot === undefined ? undefined : Number(slot));
  set('object', text_(path, 'object'));
  set('id', path.has('id') ? percentDecodeBytes(path.get('id')!, 'id') : undefined);
  set('type', type as Pkcs11ObjectType | undefined);
  set('modulePath', text_(query, 'module-path'));
  set('moduleName', text_(query, 'module-name'));
  set('pinSource', text_(query, 'pin-source'));
  return uri;
}

/** A URI naming `uri`'s object for display: never carries a PIN (none can be in it). */
export function describeUri(uri: Pkcs11Uri): string {
  const enc = (s: string) => encodeURIComponent(s);
  const path = [
    uri.token !== undefined ? `token=${enc(uri.token)}` : '',
    uri.serial !== undefined ? `serial=${enc(uri.serial)}` : '',
    uri.slotId !== undefined ? `slot-id=${uri.slotId}` : '',
    uri.object !== undefined ? `object=${enc(uri.object)}` : '',
    uri.type !== undefined ? `type=${uri.type}` : '',
  ].filter(Boolean);
  return `pkcs11:${path.join(';')}`;
}
