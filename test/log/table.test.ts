// Issue 31, item 4: `stele log fsck`, `stele log recover` and `stele serve` agree on a log's
// storage. Walks the table of README.md ("When the log's storage is not what the lock record
// says"): each row damages a copy of one real log (written by the real sequencer), then runs
// the three commands as subprocesses on it, checks each one's exit code and what it says,
// then takes the row's next step and checks that fsck passes and serve starts afterwards.
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { LmdbIndex } from '../../src/index/lmdb.js';
import { openLocalLog } from '../../src/serve/local-log.js';
import { CLI, type CliRun, Sandbox, copyLogKey, ensureBuilt } from '../helpers/cli.js';
import { copyLog, digestOf } from '../helpers/logs.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'table.test/log';
/** Published sizes of the log: 300 (saved as a backup), then 450. */
const WAVES = [300, 150];

let root: string;
let pristine: string;
let sb: Sandbox;
let copies = 0;
const saved = {
  /** log/ as it was at size 300. */
  log300: '',
  /** The lock record at 300 (the batch to 300 staged in it). */
  lock300: '',
  /** The lock record at 450 before the close, naming its staged batch (from 300). */
  lock450Staged: '',
  /** A lock record at 450 of another tree, signed by the same key. */
  forkLock450: '',
};

/** Writes the log as `stele serve` does, with its lookup index (a start without one rebuilds it from every record). */
async function writeLog(dataDir: string, label: string, onSize: (size: number) => void): Promise<void> {
  const index = new LmdbIndex(join(dataDir, 'private', 'index'));
  const { sequencer } = await openLocalLog({
    dataDir,
    origin: ORIGIN,
    fsync: false,
    batchInterval: 5,
    listeners: [index],
  });
  let n = 0;
  for (const count of WAVES) {
    await Promise.all(
      Array.from({ length: count }, () =>
        sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(label, n++))),
      ),
    );
    onSize(sequencer.checkpoint.size);
  }
  await sequencer.close();
  await index.close();
}

beforeAll(async () => {
  await ensureBuilt();
  sb = new Sandbox('stele-table-');
  root = scratchDir('stele-table-');
  pristine = join(root, 'pristine');
  const save = (from: string, to: string) => {
    cpSync(join(pristine, from), join(root, to), { recursive: true });
    return join(root, to);
  };
  await writeLog(pristine, ORIGIN, (size) => {
    if (size === 300) {
      saved.log300 = save('log', 'log-300');
      saved.lock300 = save('private/lock.json', 'lock-300.json');
    }
    if (size === 450) saved.lock450Staged = save('private/lock.json', 'lock-450-staged.json');
  });
  const fork = join(root, 'fork');
  await copyLogKey(pristine, fork);
  await writeLog(fork, 'fork', () => undefined);
  saved.forkLock450 = join(fork, 'private', 'lock.json');
}, 120_000);

afterAll(() => sb?.cleanup());

const fresh = (): string => copyLog(pristine, join(root, `copy-${++copies}`));
const file = (d: string, key: string) => join(d, 'log', key);
const flipByte = (path: string, at: number) => {
  const b = readFileSync(path);
  b[at]! ^= 1;
  writeFileSync(path, b);
};
/** Replaces `d`'s log directory with the one saved at size 300. */
const restoreLog300 = (d: string) => {
  rmSync(join(d, 'log'), { recursive: true });
  cpSync(saved.log300, join(d, 'log'), { recursive: true });
};

type ServeOutcome = { code: number; says: string } | { started: true; url: string; proc: ChildProcess };

/** Starts `stele serve` on `d`: it either prints its ready line (and is returned running) or exits. */
function serve(d: string): Promise<ServeOutcome> {
  const args = [CLI, 'serve', '--data-dir', d, '--origin', ORIGIN, '--host', '127.0.0.1', '--port', '0'];
  const proc = spawn(process.execPath, [...args, '--log-level', 'error', '--json'], {
    env: sb.env(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (c) => (err += c));
  return new Promise((resolve) => {
    proc.stdout!.on('data', (c) => {
      out += c;
      const line = out.split('\n')[0]!;
      if (out.includes('\n') && line.includes('"url"'))
        resolve({ started: true, url: (JSON.parse(line) as { url: string }).url, proc });
    });
    // Under --json the error document goes to stdout and the one line to stderr.
    proc.once('exit', (code) => resolve({ code: code ?? 128, says: err.trim() }));
  });
}

async function stop(proc: ChildProcess): Promise<void> {
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

/** What a started server answers for /readyz and /checkpoint. */
async function probe(url: string): Promise<{ ready: number; checkpoint: number }> {
  return {
    ready: (await fetch(`${url}/readyz`)).status,
    checkpoint: (await fetch(`${url}/checkpoint`)).status,
  };
}

interface Row {
  readonly situation: string;
  readonly make: (d: string) => void;
  readonly fsck: readonly [number, RegExp];
  readonly recover: readonly [number, RegExp];
  /** serve's exit code and one line, or that it starts (with what /readyz and /checkpoint answer). */
  readonly serve: readonly [number, RegExp] | { ready: number; checkpoint: number };
  /** The row's next step after recover (if any); then fsck passes and serve starts. Absent: no step is checked. */
  readonly next?: (d: string) => Promise<void> | void;
}

const copyFromPristine = (d: string, keys: readonly string[]) => {
  for (const key of keys) cpSync(file(pristine, key), file(d, key));
};

const ROWS: Row[] = [
  {
    situation: 'everything agrees',
    make: () => undefined,
    fsck: [0, /Result: PASS/],
    recover: [0, /nothing to recover/],
    serve: { ready: 200, checkpoint: 200 },
    next: () => undefined,
  },
  {
    situation: 'lock record missing',
    make: (d) => rmSync(join(d, 'private/lock.json')),
    fsck: [1, /there is no lock record/],
    recover: [0, /recovered private\/lock\.json \(it was missing\): size 450/],
    serve: [4, /no lock record: the lock was lost/],
    next: () => undefined,
  },
  {
    situation: 'lock record older than log/ (restored from a backup)',
    make: (d) => cpSync(saved.lock300, join(d, 'private/lock.json')),
    fsck: [1, /older than the published checkpoint/],
    recover: [0, /recovered private\/lock\.json \(it was at size 300\): size 450/],
    serve: [4, /older than the published checkpoint/],
    next: () => undefined,
  },
  {
    situation: 'lock record newer than the published checkpoint (stopped before publishing)',
    make: (d) => {
      for (const key of ['checkpoint', 'checkpoint.json']) cpSync(join(saved.log300, key), file(d, key));
    },
    fsck: [0, /lock record: newer/],
    recover: [1, /nothing to recover: the lock record \(size 450\) is newer/],
    serve: { ready: 200, checkpoint: 200 },
    next: () => undefined,
  },
  {
    situation: 'log/ older than the lock record, its staged batch in the lock',
    make: (d) => {
      restoreLog300(d);
      cpSync(saved.lock450Staged, join(d, 'private/lock.json'));
    },
    fsck: [0, /lock record's tree \(size 450\)/],
    recover: [1, /nothing to recover: the lock record \(size 450\) is newer/],
    serve: { ready: 200, checkpoint: 200 },
    next: () => undefined,
  },
  {
    situation: 'log/ older than the lock record (restored from a backup)',
    make: restoreLog300,
    fsck: [1, /tile\/0\/001\.p\/194 is missing.*lock record's tree of size 450/],
    recover: [
      1,
      /lacks 3 objects of the tree its lock record commits to \(size 450\): .*tile\/0\/001\.p\/194.*mirror.*--objects-from/,
    ],
    serve: [4, /tile\/\S+\/001\.p\/194 is missing from the log: .*log fsck/],
    // The objects, from the tiles of a server of the log as it was (a mirror serves the same paths).
    next: async (d) => {
      const source = await serve(copyLog(pristine, `${d}-source`));
      if (!('started' in source)) throw new Error(`the source did not start: ${source.says}`);
      try {
        const r = await sb.run(['log', 'recover', '--data-dir', d, '--objects-from', source.url]);
        expect([r.code, said(r)]).toEqual([
          0,
          expect.stringMatching(/copied 3 objects of the tree of size 450 from .*publishes it at start/),
        ]);
      } finally {
        await stop(source.proc);
      }
    },
  },
  {
    situation: 'log/ older than the lock record, and the copy offered lacks them too or does not verify',
    make: restoreLog300,
    fsck: [1, /is missing/],
    recover: [1, /--objects-from/],
    serve: [4, /is missing from the log/],
    next: async (d) => {
      const lacking = await sb.run(['log', 'recover', '--data-dir', d, '--objects-from', saved.log300]);
      expect([lacking.code, said(lacking)]).toEqual([1, expect.stringMatching(/lacks 3 of the 3 missing objects too/)]);
      const forked = await sb.run(['log', 'recover', '--data-dir', d, '--objects-from', join(root, 'fork', 'log')]);
      expect([forked.code, said(forked)]).toEqual([
        1,
        expect.stringMatching(/do not complete the tree \(size 450\): .*nothing was written/),
      ]);
      expect(existsSync(file(d, 'tile/0/001.p/194'))).toBe(false);
      copyFromPristine(d, ['tile/0/001.p/194', 'tile/entries/001.p/194', 'tile/records/001.p/194']);
    },
  },
  {
    situation: 'tiles and bundles older than the checkpoint and the lock record',
    make: (d) => {
      rmSync(file(d, 'tile'), { recursive: true });
      cpSync(join(saved.log300, 'tile'), file(d, 'tile'), { recursive: true });
    },
    fsck: [1, /tile\/0\/001\.p\/194 is missing .*checkpoint of size 450 needs it/],
    recover: [1, /lacks 3 objects of the tree of its published checkpoint \(size 450\).*--objects-from/],
    serve: [4, /is missing from the log: .*log fsck/],
    next: async (d) => {
      const r = await sb.run(['log', 'recover', '--data-dir', d, '--objects-from', join(pristine, 'log')]);
      expect([r.code, said(r)]).toEqual([0, expect.stringMatching(/copied 3 objects of the tree of size 450/)]);
    },
  },
  {
    situation: 'lock record of another tree at the same size (a fork)',
    make: (d) => cpSync(saved.forkLock450, join(d, 'private/lock.json')),
    fsck: [1, /sign two different roots for size 450: the log forked/],
    recover: [1, /the log forked/],
    serve: [4, /different roots at size 450: the log has forked/],
  },
  {
    situation: 'lock record unreadable',
    make: (d) => writeFileSync(join(d, 'private/lock.json'), '{"size":'),
    fsck: [1, /cannot be read/],
    recover: [1, /move it aside and run recover again/],
    serve: [4, /lock record is not JSON: the log's storage/],
    next: (d) => {
      renameSync(join(d, 'private/lock.json'), join(d, 'private/lock.json.bad'));
      return sb.run(['log', 'recover', '--data-dir', d]).then((r) => expect(r.code).toBe(0));
    },
  },
  {
    situation: 'a full tile or bundle corrupted',
    make: (d) => flipByte(file(d, 'tile/0/000'), 5),
    fsck: [1, /first bad object: tile\/0\/000/],
    recover: [1, /does not verify.*tile\/0\/000/],
    serve: { ready: 200, checkpoint: 200 },
    next: (d) => copyFromPristine(d, ['tile/0/000']),
  },
  {
    situation: 'a right-edge tile or bundle missing',
    make: (d) => rmSync(file(d, 'tile/entries/001.p/194')),
    fsck: [1, /tile\/entries\/001\.p\/194 is missing/],
    recover: [1, /lacks 1 object of the tree of its published checkpoint \(size 450\): tile\/entries\/001\.p\/194/],
    serve: [4, /tile\/entries\/001\.p\/194 is missing from the log: the log's storage/],
    next: async (d) => {
      const r = await sb.run(['log', 'recover', '--data-dir', d, '--objects-from', join(pristine, 'log')]);
      expect([r.code, said(r)]).toEqual([0, expect.stringMatching(/copied 1 object of the tree of size 450/)]);
    },
  },
  {
    situation: 'a right-edge tile or bundle corrupted',
    make: (d) => flipByte(file(d, 'tile/0/001.p/194'), 40),
    fsck: [1, /first bad object: tile\/0\/001\.p\/194/],
    recover: [1, /does not verify/],
    serve: [4, /does not match its hash tile: the log's storage does not hold the tree/],
    next: (d) => copyFromPristine(d, ['tile/0/001.p/194']),
  },
  {
    situation: 'objects beyond the lock record',
    make: (d) => cpSync(file(d, 'tile/0/001.p/194'), file(d, 'tile/0/001.p/200')),
    fsck: [1, /tile\/0\/001\.p\/200 is beyond the tree/],
    recover: [1, /objects lie beyond the published tree/],
    serve: [4, /tile\/0\/001\.p\/200 lies beyond the lock record's tree size 450/],
  },
  {
    situation: 'log/checkpoint does not verify',
    make: (d) => flipByte(file(d, 'checkpoint'), 30),
    fsck: [1, /checkpoint does not verify under the log key/],
    recover: [0, /rewrote checkpoint from the verified checkpoint of size 450/],
    serve: { ready: 503, checkpoint: 500 },
    next: () => undefined,
  },
  {
    situation: 'log/checkpoint.json does not verify',
    make: (d) => writeFileSync(file(d, 'checkpoint.json'), '{}'),
    fsck: [1, /checkpoint\.json does not verify under the log key/],
    recover: [0, /rewrote checkpoint\.json from the verified checkpoint of size 450/],
    serve: { ready: 200, checkpoint: 200 },
    next: () => undefined,
  },
  {
    situation: 'no checkpoint published',
    make: (d) => {
      for (const key of ['checkpoint', 'checkpoint.json']) rmSync(file(d, key));
    },
    fsck: [0, /published no checkpoint: the next start publishes the lock record's \(size 450\)/],
    recover: [1, /nothing to recover: no checkpoint is published/],
    serve: { ready: 200, checkpoint: 200 },
    next: () => undefined,
  },
  {
    situation: 'a leftover of a crashed write',
    make: (d) => writeFileSync(file(d, 'tile/0/001.tmp-4242-abcdef'), 'half'),
    fsck: [1, /leftover of a crashed write/],
    recover: [0, /nothing to recover/],
    serve: { ready: 200, checkpoint: 200 },
    next: () => undefined,
  },
];

const said = (r: CliRun) => `${r.stdout}${r.stderr}`;

describe("the README's table: fsck, recover and serve on each situation", () => {
  for (const row of ROWS) {
    it(row.situation, async () => {
      const d = fresh();
      row.make(d);
      const before = copyLog(d, `${d}-serve`);

      const fsck = await sb.run(['log', 'fsck', '--data-dir', d]);
      expect([fsck.code, said(fsck)], 'fsck').toEqual([row.fsck[0], expect.stringMatching(row.fsck[1])]);

      const served = await serve(before);
      if ('started' in served) {
        const seen = await probe(served.url);
        await stop(served.proc);
        expect(seen, 'serve').toEqual(row.serve);
      } else {
        expect([served.code, served.says], 'serve').toEqual([
          (row.serve as readonly [number, RegExp])[0],
          expect.stringMatching((row.serve as readonly [number, RegExp])[1]),
        ]);
        expect(served.says.split('\n'), 'one line').toHaveLength(1);
      }

      const recover = await sb.run(['log', 'recover', '--data-dir', d]);
      expect([recover.code, said(recover)], 'recover').toEqual([row.recover[0], expect.stringMatching(row.recover[1])]);

      if (!row.next) return;
      await row.next(d);
      const after = await serve(d);
      expect('started' in after, `serve after the next step: ${'says' in after ? after.says : ''}`).toBe(true);
      if ('started' in after) {
        expect(await probe(after.url)).toEqual({ ready: 200, checkpoint: 200 });
        await stop(after.proc);
      }
      const again = await sb.run(['log', 'fsck', '--data-dir', d]);
      expect([again.code, said(again)], 'fsck after the next step').toEqual([0, expect.stringMatching(/Result: PASS/)]);
      expect(existsSync(join(d, 'private/lock.json'))).toBe(true);
    });
  }
});
