// `stele key`: keys in an HSM, named by RFC 7512 PKCS#11 URIs. Generate or import a key in
// a token, print its key id and vkey (exactly as for the same key held in a file), and check
// that a configured signer signs. The PIN comes from the URI's pin-source or
// STELE_PKCS11_PIN, never from the command line.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { SIG_COSIGNATURE_V1, SIG_ED25519, formatVkey, keyIdOf, makeVerifier, openNote } from '../../src/core/note.js';
import { CliError, EXIT, hsmError } from '../errors.js';

interface KeyOpts {
  signer?: string;
  name: string;
  witness?: boolean;
  json?: boolean;
}

function uriOf(o: KeyOpts): string {
  const spec = o.signer ?? process.env.STELE_SIGNER;
  if (!spec || !/^pkcs11:/i.test(spec))
    throw new CliError(EXIT.USAGE, '--signer <pkcs11:…> (or env STELE_SIGNER) names the key in the token');
  return spec;
}

/** Runs `fn`, turning a PKCS#11 failure into its one-line CLI error. */
async function hsm<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw hsmError(e) ?? e;
  }
}

function report(o: KeyOpts, publicKey: Uint8Array, verb: string): void {
  const v = makeVerifier(o.name, o.witness ? SIG_COSIGNATURE_V1 : SIG_ED25519, publicKey);
  const out = { name: o.name, keyId: keyIdOf(publicKey), vkey: formatVkey(v) };
  if (o.json) process.stdout.write(`${JSON.stringify(out)}\n`);
  else process.stdout.write(`stele: ${verb} ${o.name}\n  key id  ${out.keyId}\n  vkey    ${out.vkey}\n`);
}

const EXIT_CODES = `
Exit codes:
  0  done (check: the key signed and the signature verified)
  2  usage or configuration: a bad URI, no module at module-path, no such token or key,
     a wrong, locked or missing PIN (pin-source=file:<path> or STELE_PKCS11_PIN)
  3  the token failed during the operation`;

function common(c: Command): Command {
  return c
    .addHelpText('after', EXIT_CODES)
    .option(
      '--signer <pkcs11:…>',
      'PKCS#11 URI of the key: module-path, token, object (env STELE_SIGNER; PIN by pin-source or env STELE_PKCS11_PIN; module also by env STELE_PKCS11_MODULE)',
    )
    .requiredOption('--name <name>', 'key name: the log origin, witness name or control-plane signer name')
    .option('--witness', 'print the vkey of a witness cosigning key (type 0x04) instead of a log key (0x01)')
    .option('--json', 'print {name, keyId, vkey} as JSON');
}

export function registerKeyCommands(program: Command): void {
  const key = program.command('key').description('Ed25519 keys in an HSM (PKCS#11): generate, import, show, check');
  keyGenerate(key);
  keyImport(key);
  keyShow(key);
  keyCheck(key);
}

function keyGenerate(key: Command): void {
  common(
    key
      .command('generate')
      .description('generate an Ed25519 key pair inside the token (never extractable) and print its key id and vkey'),
  ).action(async (o: KeyOpts) => {
    const uriText = uriOf(o);
    const { Token } = await import('../../src/pkcs11/token.js');
    const { generateEd25519, keyUri } = await import('../../src/pkcs11/signer.js');
    const made = await hsm(async () => {
      const uri = keyUri(uriText);
      const token = Token.open({ uri });
      try {
        return await generateEd25519(token, uri);
      } finally {
        token.close();
      }
    });
    report(o, made.publicKey, 'generated');
  });
}

function keyImport(key: Command): void {
  common(
    key
      .command('import')
      .description(
        "import a PRIVATE+KEY file (e.g. a log's private/log.key) into the token, then print its key id and vkey",
      ),
  )
    .requiredOption('--key-file <path>', 'the key file (mode 0600) to import; its name must be --name')
    .action(async (o: KeyOpts & { keyFile: string }) => {
      const uriText = uriOf(o);
      const { parsePrivateKey, KeyFileError } = await import('../../src/keys/local-signer.js');
      let seed: Uint8Array;
      let publicKey: Uint8Array;
      try {
        const text = readFileSync(o.keyFile, 'utf8');
        const signer = parsePrivateKey(text);
        if (signer.name !== o.name)
          throw new KeyFileError(`${o.keyFile} is the key of ${signer.name}, not of ${o.name}`);
        publicKey = signer.publicKey;
        // parsePrivateKey checked the form and the key hash; the seed is the fifth field (after 0x01).
        const b64 = /^PRIVATE\+KEY\+[^+\s]+\+[0-9a-f]{8}\+([A-Za-z0-9+/=]+)$/.exec(text.trim())?.[1] ?? '';
        seed = new Uint8Array(Buffer.from(b64, 'base64').subarray(1));
      } catch (e) {
        if (e instanceof KeyFileError) throw new CliError(EXIT.USAGE, e.message);
        throw e;
      }
      const { Token } = await import('../../src/pkcs11/token.js');
      const { importEd25519, keyUri } = await import('../../src/pkcs11/signer.js');
      const made = await hsm(async () => {
        const uri = keyUri(uriText);
        const token = Token.open({ uri });
        try {
          return await importEd25519(token, uri, seed, publicKey);
        } finally {
          token.close();
        }
      });
      if (keyIdOf(made.publicKey) !== keyIdOf(publicKey))
        throw new CliError(EXIT.IO, 'the token holds a different public key than the file: check the token');
      report(o, made.publicKey, 'imported');
    });
}

function keyShow(key: Command): void {
  common(
    key
      .command('show')
      .description('print the key id and vkey of a key in the token (read from its public-key object)'),
  ).action(async (o: KeyOpts) => {
    const uriText = uriOf(o);
    const { Token } = await import('../../src/pkcs11/token.js');
    const { keyUri, readPublicKey } = await import('../../src/pkcs11/signer.js');
    const publicKey = await hsm(async () => {
      const uri = keyUri(uriText);
      const token = Token.open({ uri });
      try {
        return await token.withSession((s) => readPublicKey(token, s, uri));
      } finally {
        token.close();
      }
    });
    report(o, publicKey, 'key');
  });
}

function keyCheck(key: Command): void {
  common(
    key
      .command('check')
      .description('log in, sign a test note with the key and verify it with the ordinary note verifier'),
  ).action(async (o: KeyOpts) => {
    const uriText = uriOf(o);
    const { Pkcs11Signer } = await import('../../src/pkcs11/signer.js');
    const { signBody } = await import('../../src/core/note.js');
    const publicKey = await hsm(async () => {
      const signer = await Pkcs11Signer.open({ uri: uriText, name: o.name });
      try {
        const body = `stele key check\n${new Date().toISOString()}\n`;
        const { line } = await signBody(body, signer);
        openNote(`${body}\n${line}`, makeVerifier(o.name, SIG_ED25519, signer.publicKey));
        return signer.publicKey;
      } finally {
        signer.close();
      }
    });
    report(o, publicKey, 'signs and verifies:');
  });
}
