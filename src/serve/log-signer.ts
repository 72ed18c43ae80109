// Which key signs the log's checkpoints, for every backend: a key file (the data directory's,
// or STELE_KEY_FILE on S3; created on first start), or a key in an HSM named by a PKCS#11 URI
// (--signer / STELE_SIGNER / [server].signer). The local backend and the S3/AWS sequencer
// both open their key here (the S3 one through src/serve/aws-log.ts; KMS stays there). The PKCS#11
// code, and its native addon, load only when a URI is configured.
import type { NoteSigner } from '../core/note.js';
import { loadOrCreateKey } from '../keys/local-signer.js';

export interface LogSigner {
  readonly signer: NoteSigner;
  /** A key file was created by this start. */
  readonly created: boolean;
  /** Lets the token go (nothing to do for a key file). */
  close(): void;
}

/** A log key this module opens. */
export type LogKeySpec =
  /** An Ed25519 key file, created 0600 if absent. */
  | { readonly kind: 'key-file'; readonly path: string }
  /**
   * A token key: the PIN from the URI's pin-source or STELE_PKCS11_PIN in `env` (a pin-value
   * in the URI is refused), the module from the URI or STELE_PKCS11_MODULE.
   */
  | { readonly kind: 'pkcs11'; readonly uri: string; readonly env: NodeJS.ProcessEnv };

export const isPkcs11Signer = (signer: string | undefined): signer is string =>
  signer !== undefined && /^pkcs11:/i.test(signer);

/** The --signer setting ("file", absent, or a pkcs11: URI) as a key; "file" is the backend's `keyFile`. */
export function logKeySpec(signer: string | undefined, keyFile: string, env: NodeJS.ProcessEnv): LogKeySpec {
  return isPkcs11Signer(signer) ? { kind: 'pkcs11', uri: signer, env } : { kind: 'key-file', path: keyFile };
}

/**
 * Opens the log's key under the log's `origin`. A token key is read from the token and
 * checked with one signature here, so a wrong PIN or a missing key fails the start; every
 * later signature is checked against the token's public key before it is used.
 */
export async function openLogSigner(spec: LogKeySpec, origin: string): Promise<LogSigner> {
  if (spec.kind === 'key-file') {
    const { signer, created } = await loadOrCreateKey(spec.path, origin);
    return { signer, created, close: () => undefined };
  }
  const { Pkcs11Signer } = await import('../pkcs11/signer.js');
  const signer = await Pkcs11Signer.open({ uri: spec.uri, name: origin, env: spec.env });
  return { signer, created: false, close: () => signer.close() };
}
