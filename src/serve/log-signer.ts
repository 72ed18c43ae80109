// Which key signs the log's checkpoints: the data directory's key file (created on first
// start), or a key in an HSM named by a PKCS#11 URI (--signer / STELE_SIGNER / [server].signer).
// The PKCS#11 code, and its native addon, load only when a URI is configured.
import type { NoteSigner } from '../core/note.js';
import { loadOrCreateKey } from '../signer.js';

export interface LogSigner {
  readonly signer: NoteSigner;
  /** A key file was created by this start. */
  readonly created: boolean;
  /** Lets the token go (nothing to do for a key file). */
  close(): void;
}

export async function openLogSigner(
  spec: string | undefined,
  keyFile: string,
  origin: string,
  env: NodeJS.ProcessEnv,
): Promise<LogSigner> {
  if (spec === undefined || spec === 'file') {
    const { signer, created } = await loadOrCreateKey(keyFile, origin);
    return { signer, created, close: () => undefined };
  }
  const { Pkcs11Signer } = await import('../pkcs11/signer.js');
  const signer = await Pkcs11Signer.open({ uri: spec, name: origin, env });
  return { signer, created: false, close: () => signer.close() };
}
