// A self-hosted log on Ceph's RADOS Gateway (test/helpers/rgw.ts, the bucket lock, no
// DynamoDB) with a real witness and a real tlog-mirror on loopback: `stele serve` on the S3
// backend sends each checkpoint to the witness before publishing it and pushes the entries
// to the mirror, advertises both in /api/ledger/key, and a client verifies under the
// advertised policy. With the witness down (threshold 1) nothing is published or
// acknowledged, and it all goes through once the witness is back; a sequencer restarted while
// the witness was down, and again with it up, carries on with the witness (it learns the
// witness's size from its 409 answer instead of asking forever), as does a second sequencer
// taking over the bucket lock. A log started afresh on an emptied bucket is refused: the
// witness holds a larger tree of it. The witnesses a sequencer was started with are kept in
// the bucket's private prefix: a restart that forgets them still publishes cosigned
// checkpoints, one that names another witness is refused until STELE_RECONFIGURE, and an API
// replica neither applies nor stores them.
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AwsLog, openAwsLog } from '../../src/serve/aws-log.js';
import { resolveServeConfig } from '../../src/serve/config.js';
import { anchorRequest } from '../../src/core/anchor.js';
import { type NoteVerifier, SIG_ED25519, SeedSigner, formatVkey, makeVerifier, openNote } from '../../src/core/note.js';
import { SequencerStoppedError } from '../../src/sequencer/contract.js';
import { openWitnessing, readWitnessSettings } from '../../src/serve/witnessing.js';
import { parsePolicy } from '../../src/core/tlog-policy.js';
import { type RunningMirror, startMirror } from '../../src/mirror/host.js';
import { loadOrCreateKey } from '../../src/keys/local-signer.js';
import { EXPLORER_CONFIG_KEY } from '../../src/store/layout.js';
import { type RunningWitness, startWitness } from '../../src/witness/host.js';
import { originHash } from '../../src/witness/protocol.js';
import { digestOf, getJson, postAnchor } from '../api/server.js';
import { type RunningServe, Sandbox, startServe } from '../helpers/cli.js';
import { type RgwServer, rgwLogEnv, rgwLogStorage, rgwStore, startRgwWithCli } from '../helpers/rgw.js';
import { scratchDir } from '../helpers/tmp.js';

const ORIGIN = 'rgw.witnessed.test/log';
const PREFIX = 'witnessed/';
const silent = pino({ level: 'silent' });
const POLL = { timeout: 60_000, interval: 200 };

let rgw: RgwServer;
const started: RunningServe[] = [];
let witness: RunningWitness | undefined;
let mirror: RunningMirror | undefined;

beforeAll(async () => {
  rgw = await startRgwWithCli();
}, 720_000); // may wait for another file's cluster (one per machine)

afterAll(async () => {
  for (const s of started) s.proc.kill('SIGKILL');
  await witness?.close();
  await mirror?.close();
  await rgw?.close();
});

/** `stele serve` on the gateway, its witness and mirror settings in STELE_* as the CDK stack would set them. */
async function serve(dataDir: string, settings: Record<string, string>, prefix = PREFIX): Promise<RunningServe> {
  const s = await startServe({
    dataDir,
    origin: ORIGIN,
    batchInterval: 50,
    env: {
      ...rgwLogEnv(rgw, ORIGIN, prefix),
      STELE_KEY_FILE: join(dataDir, 'log.key'),
      STELE_MIN_BATCH_SPACING_MS: '0',
      STELE_ANCHOR_TIMEOUT_MS: '3000',
      STELE_HEARTBEAT_MS: '0',
      ...settings,
    },
  });
  started.push(s);
  return s;
}

/** SIGKILL: the sequencer dies mid-whatever, as a crashed task would. */
async function kill(s: RunningServe): Promise<void> {
  const exited = once(s.proc, 'exit');
  s.proc.kill('SIGKILL');
  await exited;
}

/** The names of the cosigners of `note` among `by` whose signatures verify. */
const cosigners = (note: string, log: NoteVerifier, ...by: { verifier: NoteVerifier }[]) =>
  openNote(
    note,
    log,
    by.map((b) => b.verifier),
  ).cosignatures.map((c) => c.verifier.name);

/** The witness on `port` (0: any), its key and state kept in `dir` across restarts. */
const startW = (dir: string, log: NoteVerifier, port: number) =>
  startWitness({ dataDir: dir, name: 'w1.rgw.test', logs: [log], host: '127.0.0.1', port, logger: silent });

/** The old size of every add-checkpoint the witness is sent from now on, in order (a spy on the real witness). */
function oldSizes(w: RunningWitness): number[] {
  const seen: number[] = [];
  const add = w.witness.addCheckpoint.bind(w.witness);
  w.witness.addCheckpoint = (req) => {
    seen.push(req.oldSize);
    return add(req);
  };
  return seen;
}

/** The checkpoint note in the bucket: what a CDN serves, whatever the API process says. */
const bucketStore = (prefix: string) => rgwStore(rgw, prefix);

async function bucketObject(key: string, prefix = `${PREFIX}log/`): Promise<string> {
  return Buffer.from((await bucketStore(prefix).get(key))!).toString('utf8');
}
const bucketCheckpoint = (prefix = PREFIX) => bucketObject('checkpoint', `${prefix}log/`);

describe('stele serve on RGW with a witness and a mirror', () => {
  it('publishes only witnessed checkpoints, advertises the witness, policy and mirror, and survives restarts and an outage', async () => {
    const dataDir = scratchDir('stele-rgw-witnessed-');
    const { signer } = await loadOrCreateKey(join(dataDir, 'log.key'), ORIGIN);
    const logVerifier = makeVerifier(ORIGIN, SIG_ED25519, signer.publicKey);
    const witnessDir = join(dataDir, 'witness');
    witness = await startW(witnessDir, logVerifier, 0);
    const witnessPort = Number(new URL(witness.url).port);
    const w = { name: witness.name, vkey: witness.vkey, verifier: witness.verifier };
    mirror = await startMirror({
      dataDir: join(dataDir, 'mirror'),
      name: 'm1.rgw.test',
      logs: [{ verifier: logVerifier }],
      host: '127.0.0.1',
      port: 0,
      logger: silent,
    });
    const settings = {
      STELE_WITNESSES: `${w.vkey}=${witness.url}`,
      STELE_WITNESS_THRESHOLD: '1',
      STELE_MIRRORS: `${mirror.vkey}=${mirror.url}`,
    };
    const cosignersOf = (note: string) => cosigners(note, logVerifier, witness!, mirror!);
    const size = (note: string) => Number(note.split('\n')[1]);

    let log = await serve(dataDir, settings);
    const anchored = await Promise.all(
      Array.from({ length: 5 }, (_, i) => postAnchor(log.url, { digest: digestOf(i), artifact: `a${i}` })),
    );
    expect(anchored.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);

    // The published checkpoint, in the bucket itself, carries the witness's cosignature.
    const note = await bucketCheckpoint();
    expect(size(note)).toBe(5);
    expect(cosignersOf(note)).toEqual([w.name]);
    expect(anchored[4]!.body.checkpoint.note).toMatch(/^— w1\.rgw\.test /m);

    // /api/ledger/key: the witness, the policy (the log, the witness and the mirror) and where the mirror serves.
    const key = (await getJson(`${log.url}/api/ledger/key`)).body;
    expect(key.witnesses.map((x: { name: string }) => x.name)).toEqual([w.name]);
    const policy = parsePolicy(key.witnessPolicy.policy);
    expect(policy.logs).toEqual([{ vkey: formatVkey(logVerifier) }]);
    expect(policy.witnesses.map((x) => x.vkey).sort()).toEqual([w.vkey, mirror.vkey].sort());
    expect(key.witnessPolicy.threshold).toBe(1);
    expect(key.mirrors).toEqual([
      { name: 'm1.rgw.test', vkey: mirror.vkey, tiles: `${mirror.url}/${originHash(ORIGIN)}/` },
    ]);
    // An API replica given the same settings asks no witness but advertises the same.
    const replica = await serve(scratchDir('stele-rgw-witnessed-api-'), {
      ...settings,
      STELE_ROLE: 'api',
      STELE_VKEY: formatVkey(logVerifier),
    });
    const replicaKey = (await getJson(`${replica.url}/api/ledger/key`)).body;
    for (const field of ['witnesses', 'witnessPolicy', 'mirrors']) expect(replicaKey[field], field).toEqual(key[field]);
    await replica.stop();
    // The explorer's config in the bucket says the same.
    const explorer = JSON.parse(await bucketObject(EXPLORER_CONFIG_KEY)) as { witnesses: string[]; policy: string };
    expect(explorer.witnesses).toEqual([w.vkey]);
    expect(explorer.policy).toBe(key.witnessPolicy.policy);

    // The mirror receives the entries after each publish (no mirror quorum) and cosigns its copy.
    const mirrored = `${mirror.url}/${originHash(ORIGIN)}/checkpoint`;
    const mirrorSize = async () => {
      const res = await fetch(mirrored);
      return res.status === 200 ? size(await res.text()) : -1;
    };
    await expect.poll(mirrorSize, POLL).toBe(5);

    // A client pins the log with the policy it advertises, anchors, and verifies: rule 5 (witnesses) passes.
    const sb = new Sandbox('stele-rgw-witnessed-cli-');
    try {
      sb.file('release.tgz', 'a release on a witnessed self-hosted log\n');
      const init = await sb.run(['ledger', 'init', '--endpoint', log.url, '--trust-key', log.keyId]);
      expect(init.code, init.stderr).toBe(0);
      const a = await sb.json(['ledger', 'anchor', 'release.tgz']);
      expect(a.code, a.stderr).toBe(0);
      const v = await sb.json(['ledger', 'verify', 'release.tgz']);
      expect(v.code, v.stderr).toBe(0);
      const rule5 = (v.out.checks as { rule: number; status: string }[]).find((c) => c.rule === 5);
      expect(rule5?.status).toBe('PASS');
    } finally {
      sb.cleanup();
    }

    // The witness goes down: an anchor is committed but neither published nor acknowledged.
    await witness.close();
    const before = await bucketCheckpoint();
    const late = await postAnchor(log.url, { digest: digestOf(100) });
    expect(late.status).toBe(503);
    expect(late.body.error.code).toBe('anchor_timeout');
    // Not ready (for an operator's probe), though the API still answers reads.
    expect((await fetch(`${log.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${log.url}/api/ledger/checkpoint`)).status).toBe(200);
    expect(await bucketCheckpoint()).toBe(before);
    expect((await getJson(`${log.url}/api/ledger/entry?hash=${digestOf(100)}`)).status).toBe(404);

    // The sequencer is killed while the witness is still down, and started again: the
    // committed anchor stays unpublished until the witness is back.
    await kill(log);
    log = await serve(dataDir, settings);
    expect(await bucketCheckpoint()).toBe(before);
    expect((await postAnchor(log.url, { digest: digestOf(101) })).status).toBe(503);

    // The witness comes back (same port, same state): this sequencer never learnt its size at
    // start, asks from size 0, is told the size it holds (409) and sends the proof from there.
    witness = await startW(witnessDir, logVerifier, witnessPort);
    let asked = oldSizes(witness);
    await expect.poll(async () => size(await bucketCheckpoint()), POLL).toBeGreaterThanOrEqual(size(before) + 2);
    const after = await bucketCheckpoint();
    expect(cosignersOf(after)).toEqual([w.name]);
    // Old size 0, answered 409 with the size it holds, then from that size: one exchange, no loop.
    expect(asked.slice(0, 2)).toEqual([0, size(before)]);
    for (const d of [100, 101]) {
      const e = await getJson(`${log.url}/api/ledger/entry?hash=${digestOf(d)}`);
      expect(e.status, `anchor ${d}`).toBe(200);
    }
    expect((await postAnchor(log.url, { digest: digestOf(102) })).status).toBe(201);

    // A clean restart with the witness up: it checks the witness's size at start and carries on.
    await log.stop();
    asked = oldSizes(witness);
    log = await serve(dataDir, settings);
    const held = size(await bucketCheckpoint());
    const resumed = await postAnchor(log.url, { digest: digestOf(103) });
    expect(resumed.status).toBe(201);
    expect(resumed.body.checkpoint.note).toMatch(/^— w1\.rgw\.test /m);
    // At start it asks at its own size (which the witness holds), then cosigns on from there.
    expect(asked.slice(0, 2)).toEqual([held, held]);
    expect((await fetch(`${log.url}/readyz`)).status).toBe(200);
    const final = await bucketCheckpoint();
    expect(cosignersOf(final)).toEqual([w.name]);
    await expect.poll(mirrorSize, POLL).toBe(size(final));
    await log.stop();

    // The bucket is lost and the log started afresh under the same key: the witness holds a
    // larger tree of it, so the new sequencer refuses to start instead of forking the log.
    const all = bucketStore(PREFIX);
    for await (const k of all.list('')) await all.delete(k);
    await expect(serve(dataDir, settings)).rejects.toThrow(
      // Exit 4 (log_state): the operator recovers the log from what was published.
      new RegExp(`exited with 4: .*witness w1\\.rgw\\.test has cosigned size ${size(final)} of this log`, 's'),
    );
  }, 600_000); // generous: a shared, loaded machine

  it('a second sequencer taking over the bucket lock carries on with the witness; the first stops', async () => {
    const origin = 'takeover.rgw.test/log';
    const logSigner = new SeedSigner(origin, new Uint8Array(32).fill(3));
    const logKey = makeVerifier(origin, SIG_ED25519, logSigner.publicKey);
    const dir = scratchDir('stele-rgw-takeover-');
    const w = await startW(join(dir, 'w'), logKey, 0);
    try {
      const settings = readWitnessSettings(
        resolveServeConfig({ witnesses: `${w.vkey}=${w.url}`, witnessThreshold: '1' }, {}),
      );
      const prefix = `takeover-${Date.now()}/`;
      // Each instance as `stele serve` composes it: its own clients, collector and lock handle.
      const open = () =>
        openAwsLog({
          origin,
          ...rgwLogStorage(rgw, prefix),
          lock: 'bucket',
          index: false,
          batchInterval: 20,
          minBatchSpacing: 0,
          heartbeatMs: 0,
          signer: { kind: 'signer', signer: logSigner },
          witnessing: async ({ verifier, store }) =>
            (await openWitnessing(settings, verifier, store, silent, dir)).hook,
        });
      const anchor = (log: AwsLog, n: number) =>
        log.sequencer.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(n)));
      const first = await open();
      await Promise.all([0, 1, 2].map((n) => anchor(first, n)));
      const second = await open(); // resumes from the lock, asks the witness its size
      const taken = await Promise.all([3, 4].map((n) => anchor(second, n)));
      expect(taken.map((r) => r.seq)).toEqual([3, 4]);
      expect(cosigners(second.sequencer.checkpoint.note, logKey, w)).toEqual([w.name]);
      // The witness holds what the second published; the first loses the lock at its next batch.
      expect((await w.witness.stateOf(origin)).size).toBe(5);
      await expect(anchor(first, 99)).rejects.toBeInstanceOf(SequencerStoppedError);
      await second.close();
      await first.close().catch(() => undefined);
    } finally {
      await w.close();
    }
  }, 120_000);

  it('keeps the witnesses in the private prefix: a restart that omits them uses them, another witness needs STELE_RECONFIGURE, a replica is not affected', async () => {
    const prefix = `settings-${Date.now()}/`;
    const dataDir = scratchDir('stele-rgw-settings-');
    const { signer } = await loadOrCreateKey(join(dataDir, 'log.key'), ORIGIN);
    const logVerifier = makeVerifier(ORIGIN, SIG_ED25519, signer.publicKey);
    const [w1, w2] = await Promise.all([
      startW(join(dataDir, 'w1'), logVerifier, 0),
      startWitness({
        dataDir: join(dataDir, 'w2'),
        name: 'w2.rgw.test',
        logs: [logVerifier],
        host: '127.0.0.1',
        port: 0,
        logger: silent,
      }),
    ]);
    try {
      const spec = (w: RunningWitness) => `${w.vkey}=${w.url}`;
      const stored = async () =>
        JSON.parse(await bucketObject('log-settings.json', `${prefix}private/`)) as { witnesses: string[] | null };
      const anchoredBy = async (log: RunningServe, n: number) => {
        const r = await postAnchor(log.url, { digest: digestOf(n) });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        return cosigners(await bucketCheckpoint(prefix), logVerifier, w1, w2);
      };

      // First start: the witness is stored beside the staged batches, never among the served objects.
      let log = await serve(dataDir, { STELE_WITNESSES: spec(w1) }, prefix);
      expect(await anchoredBy(log, 0)).toEqual([w1.name]);
      expect((await stored()).witnesses).toEqual([spec(w1)]);
      expect(await bucketStore(`${prefix}log/`).get('log-settings.json')).toBeNull();
      await log.stop();

      // A restart that forgets the witness (the CDK parameter emptied, an env file lost) uses the stored one.
      log = await serve(dataDir, {}, prefix);
      expect(await anchoredBy(log, 1)).toEqual([w1.name]);
      expect((await getJson(`${log.url}/api/ledger/key`)).body.witnesses.map((x: { name: string }) => x.name)).toEqual([
        w1.name,
      ]);
      await log.stop();

      // Another witness is refused with one line, exit 2 (as on a local directory), and nothing changes.
      const refused = await serve(dataDir, { STELE_WITNESSES: spec(w2) }, prefix).then(
        () => '',
        (e: Error) => e.message,
      );
      // One line from stele (Node may print its own warnings before it), at the end.
      expect(refused).toMatch(/^stele serve exited with 2: /);
      // What serve printed follows the prefix: its one line, after any warnings Node printed first.
      const lines = refused
        .replace(/^stele serve exited with 2: /, '')
        .split('\n')
        .filter((l) => l.startsWith('stele: '));
      expect(lines).toHaveLength(1);
      expect(refused.trimEnd().endsWith(lines[0]!)).toBe(true);
      expect(lines[0]).toMatch(
        /this log was started with witnesses \(--witness\) w1\.rgw\.test, and this start gives w2\.rgw\.test: .*pass --reconfigure/,
      );
      expect((await stored()).witnesses).toEqual([spec(w1)]);

      // An API replica publishes nothing: it advertises what it is given and neither applies nor stores settings.
      const replica = await serve(
        scratchDir('stele-rgw-settings-api-'),
        { STELE_ROLE: 'api', STELE_VKEY: formatVkey(logVerifier), STELE_WITNESSES: spec(w2) },
        prefix,
      );
      const advertised = (await getJson(`${replica.url}/api/ledger/key`)).body.witnesses;
      expect(advertised.map((x: { name: string }) => x.name)).toEqual([w2.name]);
      await replica.stop();
      expect((await stored()).witnesses).toEqual([spec(w1)]);

      // On purpose, with STELE_RECONFIGURE: the new witness cosigns, and it is what is stored now.
      log = await serve(dataDir, { STELE_WITNESSES: spec(w2), STELE_RECONFIGURE: 'true' }, prefix);
      expect(await anchoredBy(log, 2)).toEqual([w2.name]);
      expect((await stored()).witnesses).toEqual([spec(w2)]);
      await log.stop();
    } finally {
      await Promise.all([w1.close(), w2.close()]);
    }
  }, 180_000);

  it('refuses demo witnesses, and a witness policy for another log, with one line (exit 2)', async () => {
    const dataDir = scratchDir('stele-rgw-refused-');
    await loadOrCreateKey(join(dataDir, 'log.key'), ORIGIN);
    await expect(serve(dataDir, { STELE_DEMO_WITNESSES: '1' })).rejects.toThrow(
      /exited with 2: .*demo witnesses are for a local data directory only/s,
    );
    // The policy's settings are bound to the log once its key is open, inside openAwsLog.
    const other = makeVerifier('other.test/log', SIG_ED25519, new Uint8Array(32).fill(9));
    const w = await startW(join(dataDir, 'w'), other, 0);
    await w.close();
    const policy = join(dataDir, 'witnesses.policy');
    writeFileSync(policy, `log ${formatVkey(other)}\nwitness w1 ${w.vkey} ${w.url}\nquorum w1\n`);
    await expect(serve(dataDir, { STELE_WITNESS_POLICY: policy })).rejects.toThrow(
      /exited with 2: .*witnesses\.policy: the witness policy lists 1 log\(s\), but not this log/s,
    );
  }, 60_000);
});
