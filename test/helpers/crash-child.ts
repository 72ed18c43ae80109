// Child process of test/sequencer/crash.test.ts: a real sequencer (fsync on) under continuous load.
//
//   node --import tsx test/helpers/crash-child.ts <dataDir> [--finish]
//
// Prints `ready <size>` once the log is open (after any recovery), then one line
// `ack <seq> <entry hash hex> <digest>` per anchor, written as soon as its
// promise resolves, i.e. only after its tiles and checkpoint are durably stored. The parent
// SIGKILLs it at random moments. With --finish it integrates a few more anchors, closes
// cleanly and prints `done <size>`.
import { createHash, randomBytes } from 'node:crypto';
import { anchorRequest } from '../../src/core/anchor.js';
import { toHex } from '../../src/core/hash.js';
import { openLocalLog } from '../../src/serve/local-log.js';

// The parent (test/sequencer/crash.test.ts) uses the same origin and pre-writes the key file.
// The parent (test/sequencer/crash.test.ts) uses the same origin and writes the key file first.
const CRASH_ORIGIN = 'test.example/crash';

// process.stdout on a pipe writes at once when it can and queues otherwise; a line lost in
// the queue at the kill only means the parent learns of fewer acknowledgements.
const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

async function main(): Promise<void> {
  const dataDir = process.argv[2];
  if (!dataDir) throw new Error('usage: crash-child.ts <dataDir> [--finish]');
  const finish = process.argv.includes('--finish');
  const { sequencer } = await openLocalLog({
    dataDir,
    origin: CRASH_ORIGIN,
    fsync: true,
    batchInterval: 20,
    maxBatch: 3000,
  });
  out(`ready ${sequencer.checkpoint.size}`);

  const salt = randomBytes(6).toString('hex');
  let n = 0;
  const next = () => {
    const i = n++;
    const digest = createHash('sha256').update(`${salt}/${i}`).digest('hex');
    // Entries of varied lengths: some bare, some with an artifact label of 1..300 bytes and a scope.
    const labels =
      i % 4 === 0 ? {} : { artifact: `artifact-${salt}-${'x'.repeat(i % 300)}`, scope: i % 3 === 0 ? 'ci' : undefined };
    return { request: anchorRequest('ledger_anchor', 'Anchored', digest, labels), digest };
  };

  if (finish) {
    const rs = await Promise.all(
      Array.from({ length: 10 }, () => {
        const { request, digest } = next();
        return sequencer.submit(request).then((r) => out(`ack ${r.seq} ${toHex(r.entryHash)} ${digest}`));
      }),
    );
    void rs;
    await sequencer.close();
    out(`done ${sequencer.checkpoint.size}`);
    return;
  }

  // Keep a bounded number of anchors in flight; each acknowledgement submits the next one.
  const IN_FLIGHT = 2000;
  const one = (): void => {
    const { request, digest } = next();
    sequencer.submit(request).then(
      (r) => {
        out(`ack ${r.seq} ${toHex(r.entryHash)} ${digest}`);
        one();
      },
      (e: Error) => {
        out(`err ${e.name}: ${e.message}`);
        process.exit(3);
      },
    );
  };
  for (let k = 0; k < IN_FLIGHT; k++) one();
}

main().catch((e: Error) => {
  out(`err ${e.name}: ${e.message}`);
  process.exit(2);
});
