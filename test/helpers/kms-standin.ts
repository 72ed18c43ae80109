// A STAND-IN for AWS KMS, for tests only. AWS KMS cannot run on this machine, so this is a
// small loopback HTTP endpoint that speaks the KMS wire protocol (AWS JSON 1.1, target
// TrentService.*) for exactly two operations, GetPublicKey and Sign, backed by a local
// Ed25519 seed and node:crypto (not by Stele's own signing code). It checks what a real
// ECC_NIST_EDWARDS25519 key would insist on (RAW messages ≤ 4,096 bytes, SigningAlgorithm
// ED25519_SHA_512) and can be told to fail (HTTP 500) or hang, to test how the sequencer
// behaves when KMS does. It does not check SigV4 signatures.
import { type KeyObject, createPrivateKey, createPublicKey, randomBytes, sign } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';

export type KmsFault = 'none' | 'error' | 'hang';

export interface KmsStandIn {
  readonly endpoint: string;
  readonly keyId: string;
  readonly keyArn: string;
  /** The raw 32-byte Ed25519 public key. */
  readonly publicKey: Uint8Array;
  readonly seed: Uint8Array;
  /** Requests by operation name. */
  readonly calls: Record<string, number>;
  /** What the next requests do: answer, fail with 500, or never answer. */
  fault: KmsFault;
  /** Overrides GetPublicKey's answer (to test key validation). */
  publicKeyOverride?: { PublicKey?: string; KeySpec?: string; KeyUsage?: string; SigningAlgorithms?: string[] };
  close(): Promise<void>;
}

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export async function startKmsStandIn(seed: Uint8Array = new Uint8Array(randomBytes(32))): Promise<KmsStandIn> {
  const privateKey: KeyObject = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(seed)]),
    format: 'der',
    type: 'pkcs8',
  });
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const keyId = '1234abcd-12ab-34cd-56ef-1234567890ab';
  const keyArn = `arn:aws:kms:us-east-1:111122223333:key/${keyId}`;
  const hung = new Set<ServerResponse>();

  const fail = (res: ServerResponse, status: number, type: string, message: string) => {
    res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': type });
    res.end(JSON.stringify({ __type: type, message }));
  };

  const handle = (req: IncomingMessage, body: string, res: ServerResponse) => {
    const target = String(req.headers['x-amz-target'] ?? '');
    const op = target.startsWith('TrentService.') ? target.slice('TrentService.'.length) : target;
    standIn.calls[op] = (standIn.calls[op] ?? 0) + 1;
    if (standIn.fault === 'hang') {
      hung.add(res);
      return;
    }
    if (standIn.fault === 'error') return fail(res, 500, 'KMSInternalException', 'stand-in told to fail');
    let input: Record<string, unknown>;
    try {
      input = JSON.parse(body) as Record<string, unknown>;
    } catch {
      return fail(res, 400, 'SerializationException', 'body is not JSON');
    }
    if (input.KeyId !== keyId && input.KeyId !== keyArn)
      return fail(res, 400, 'NotFoundException', `key ${String(input.KeyId)} not found`);
    const ok = (out: unknown) => {
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify(out));
    };
    if (op === 'GetPublicKey') {
      return ok({
        KeyId: keyArn,
        PublicKey: spki.toString('base64'),
        KeySpec: 'ECC_NIST_EDWARDS25519',
        CustomerMasterKeySpec: 'ECC_NIST_EDWARDS25519',
        KeyUsage: 'SIGN_VERIFY',
        SigningAlgorithms: ['ED25519_SHA_512', 'ED25519_PH_SHA_512'],
        ...standIn.publicKeyOverride,
      });
    }
    if (op === 'Sign') {
      if (input.SigningAlgorithm !== 'ED25519_SHA_512')
        return fail(res, 400, 'InvalidKeyUsageException', 'this stand-in signs ED25519_SHA_512 only');
      if (input.MessageType !== 'RAW')
        return fail(res, 400, 'ValidationException', 'ED25519_SHA_512 requires MessageType RAW');
      const message = Buffer.from(String(input.Message ?? ''), 'base64');
      if (message.length === 0 || message.length > 4096)
        return fail(res, 400, 'ValidationException', 'message must be 1..4096 bytes');
      return ok({
        KeyId: keyArn,
        Signature: sign(null, message, privateKey).toString('base64'),
        SigningAlgorithm: 'ED25519_SHA_512',
      });
    }
    return fail(res, 400, 'UnknownOperationException', `the KMS stand-in does not implement ${op}`);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, Buffer.concat(chunks).toString('utf8'), res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as { port: number };

  const standIn: KmsStandIn = {
    endpoint: `http://127.0.0.1:${port}`,
    keyId,
    keyArn,
    publicKey: new Uint8Array(spki.subarray(spki.length - 32)),
    seed,
    calls: {},
    fault: 'none',
    async close() {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return standIn;
}
