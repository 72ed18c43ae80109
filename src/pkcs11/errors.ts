// What goes wrong with a key in a token, by kind, so the CLI can say it in one line and
// serve can refuse to start. Messages never carry the PIN (it is never passed to them).

export type Pkcs11ErrorKind =
  /** The URI, the PIN source or a setting is wrong. */
  | 'config'
  /** The module (shared library) cannot be loaded or initialised. */
  | 'module'
  /** No token matches the URI. */
  | 'token'
  /** The PIN is wrong, locked or missing. */
  | 'pin'
  /** No object (key) matches the URI, or it is not the kind of key needed. */
  | 'object'
  /** The token failed during an operation (device error, removed, timeout). */
  | 'device';

export class Pkcs11KeyError extends Error {
  override name = 'Pkcs11KeyError';
  constructor(
    readonly kind: Pkcs11ErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/** The CKR_* name of a pkcs11js error, or null for anything else. */
export function ckrOf(e: unknown): string | null {
  const m = /\b(CKR_[A-Z0-9_]+)\b/.exec((e as Error)?.message ?? '');
  return m ? m[1]! : null;
}
