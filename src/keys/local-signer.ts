// The log's signing key. Default: an Ed25519 seed in a local file created on first start
// with mode 0600, in the C2SP/Go note private-key form (also the witness's and the control
// plane's keys). AWS KMS lives in src/aws/kms.ts.
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { dirname } from 'node:path';
import { concatBytes, toBase64 } from '../core/hash.js';
import { createSecretFile } from '../store/files.js';
import { NoteError, SIG_ED25519, SeedSigner, isValidKeyName, keyHash } from '../core/note.js';

export class KeyFileError extends Error {
  override name = 'KeyFileError';
}

/** `PRIVATE+KEY+<name>+<8 hex key hash>+<base64(0x01 ‖ seed)>` (Go's note.NewSigner format). */
export function formatPrivateKey(name: string, seed: Uint8Array): string {
  const signer = new SeedSigner(name, seed);
  const hash = Buffer.from(keyHash(name, SIG_ED25519, signer.publicKey)).toString('hex');
  return `PRIVATE+KEY+${name}+${hash}+${toBase64(concatBytes(new Uint8Array([SIG_ED25519]), seed))}`;
}

export function parsePrivateKey(text: string): SeedSigner {
  // The base64 key may itself contain '+', so split off only the first four fields.
  const m = /^PRIVATE\+KEY\+([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/=]+)$/.exec(text.trim());
  if (!m) throw new KeyFileError('not a PRIVATE+KEY string');
  const [, name, hash, b64] = m as unknown as [string, string, string, string];
  const raw = Buffer.from(b64, 'base64');
  if (!isValidKeyName(name) || raw.length !== 33 || raw[0] !== SIG_ED25519)
    throw new KeyFileError('malformed private key');
  const signer = new SeedSigner(name, new Uint8Array(raw.subarray(1)));
  if (Buffer.from(keyHash(name, SIG_ED25519, signer.publicKey)).toString('hex') !== hash) {
    throw new KeyFileError('private key hash does not match');
  }
  return signer;
}

/**
 * Loads the key at `path`, creating it (mode 0600) if absent. The creation is atomic
 * (createSecretFile): a crash leaves no key or a whole one, and of concurrent first starts
 * exactly one key wins. Refuses a key file readable by group or others, one made for another
 * origin, and an empty one (left by a crash of an older release), which is never replaced:
 * the key is the log's identity.
 */
export async function loadOrCreateKey(path: string, name: string): Promise<{ signer: SeedSigner; created: boolean }> {
  if (!isValidKeyName(name)) throw new NoteError(`invalid origin ${JSON.stringify(name)}`);
  await fs.mkdir(dirname(path), { recursive: true, mode: 0o700 });
  let created = false;
  if (!(await exists(path)))
    created = await createSecretFile(path, `${formatPrivateKey(name, new Uint8Array(randomBytes(32)))}\n`);
  return { signer: await readKey(path, name), created };
}

async function exists(path: string): Promise<boolean> {
  try {
    await fs.lstat(path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

async function readKey(path: string, name: string): Promise<SeedSigner> {
  const st = await fs.stat(path);
  if ((st.mode & 0o077) !== 0) throw new KeyFileError(`${path} is accessible by group or others; chmod 600 it`);
  if (st.size === 0) {
    throw new KeyFileError(
      `${path} is empty (a crash during the first start of an older release): if this log never published a checkpoint, delete the file and start again; otherwise restore the key from a backup`,
    );
  }
  let signer: SeedSigner;
  try {
    signer = parsePrivateKey(await fs.readFile(path, 'utf8'));
  } catch (e) {
    if (e instanceof KeyFileError) throw new KeyFileError(`${path}: ${e.message}`);
    throw e;
  }
  if (signer.name !== name) throw new KeyFileError(`${path} is the key of ${signer.name}, not of ${name}`);
  return signer;
}
