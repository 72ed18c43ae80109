// A child process for the key-file tests. `once <path>`: loads or creates the key and prints
// its public key in hex. `loop <dir>`: creates keys at <dir>/<n>/log.key, four at a time,
// until killed (it prints "ready" once the first exists).
import { join } from 'node:path';
import { loadOrCreateKey } from '../../src/keys/local-signer.js';

const [mode, target] = process.argv.slice(2) as [string, string];
if (mode === 'once') {
  const { signer } = await loadOrCreateKey(target, 'key.test/log');
  process.stdout.write(`${Buffer.from(signer.publicKey).toString('hex')}\n`);
} else {
  let n = 0;
  await loadOrCreateKey(join(target, String(n++), 'log.key'), 'key.test/log');
  process.stdout.write('ready\n');
  const creator = async () => {
    for (;;) await loadOrCreateKey(join(target, String(n++), 'log.key'), 'key.test/log');
  };
  await Promise.all([creator(), creator(), creator(), creator()]);
}
