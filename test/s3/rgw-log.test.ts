// A whole self-hosted log on Ceph's RADOS Gateway (test/helpers/rgw.ts) with the lock in the
// bucket and no DynamoDB: two sequencers racing on one bucket lock; `stele serve` as the
// sequencer (a real process) with the CLI's verify --tiles and tlogcheck reading the tiles
// straight from the gateway (anonymous GETs under the public prefix, as a CDN would); and
// a SIGKILL of the sequencer mid-batch, then a restart that loses nothing acknowledged.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anchorRequest } from '../../src/core/anchor.js';
import { AwsConfigError } from '../../src/serve/aws-config.js';
import { openAwsLog } from '../../src/serve/aws-log.js';
import { openCheckpoint } from '../../src/core/checkpoint.js';
import { artifactId } from '../../src/core/entry.js';
import { bytesEqual, hashFromHex, leafHash, toHex } from '../../src/core/hash.js';
import { verifyInclusion } from '../../src/core/merkle.js';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import { LogReader } from '../../src/read/reader.js';
import { type AnchorReceipt, SequencerStoppedError } from '../../src/sequencer/contract.js';
import { Sequencer } from '../../src/sequencer/sequencer.js';
import { CHECKPOINT_KEY } from '../../src/store/layout.js';
import { StoreLock } from '../../src/store/lock.js';
import { digestOf, getJson, postAnchor } from '../api/server.js';
import { Sandbox } from '../helpers/cli.js';
import {
  type RgwServer,
  allowAnonymousLogReads,
  rgwLogEnv,
  rgwLogStorage,
  rgwStore,
  startRgwWithCli,
} from '../helpers/rgw.js';
import { repoRoot, runTlogcheck } from '../helpers/tlogcheck.js';
import { scratchDir } from '../helpers/tmp.js';
import { firstCandidate } from '../helpers/index-rows.js';

let rgw: RgwServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  rgw = await startRgwWithCli();
  await allowAnonymousLogReads(rgw);
}, 720_000); // may wait for another file's cluster (one per machine)

afterAll(async () => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await once(c, 'exit');
    }
  }
  await rgw?.close();
});

const uniq = () => randomBytes(4).toString('hex');
const store = (prefix: string) => rgwStore(rgw, prefix);

describe('the bucket lock on Ceph RGW', () => {
  it('two sequencers racing on one bucket: exactly one publishes each size, the other stops, the log never forks', async () => {
    const origin = 'race.rgw.example/log';
    const signer = new SeedSigner(origin, new Uint8Array(32).fill(5));
    const prefix = `race-${uniq()}/`;
    // Every sequencer gets its own clients, as separate processes would.
    const open = async () => {
      const staging = store(`${prefix}private/`);
      await staging.probeConditionalWrites(); // as openAwsLog does: finds RGW's If-Match form
      return Sequencer.open({
        origin,
        signer,
        store: store(`${prefix}log/`),
        staging,
        lock: new StoreLock(staging, 'lock.json'),
        batchInterval: 20,
      });
    };
    const published = new Map<number, string[]>();
    const watch = (s: Sequencer, name: string) =>
      s.onPublished((c) => published.set(c.size, [...(published.get(c.size) ?? []), `${name}:${toHex(c.root)}`]));

    const acked: AnchorReceipt[] = [];
    let n = 0;
    let winner = await open();
    watch(winner, 'w0');
    for (let round = 1; round <= 3; round++) {
      const challenger = await open(); // resumes from the lock at the current size
      watch(challenger, `c${round}`);
      const submitTo = (s: Sequencer, k: number) =>
        Array.from({ length: k }, () => s.submit(anchorRequest('ledger_anchor', 'Anchored', digestOf(n++))));
      const results = await Promise.allSettled([...submitTo(winner, 5 + round), ...submitTo(challenger, 3 + round)]);
      const stopped = [winner, challenger].filter((s) => s.failure);
      expect(stopped).toHaveLength(1);
      expect(stopped[0]!.failure).toBeInstanceOf(SequencerStoppedError);
      for (const r of results) {
        if (r.status === 'fulfilled') acked.push(r.value);
        else expect(r.reason).toBeInstanceOf(SequencerStoppedError);
      }
      winner = winner.failure ? challenger : winner;
      acked.push(...(await Promise.all(submitTo(winner, 2))));
    }
    await winner.close();

    for (const [size, roots] of published) expect(roots, `size ${size}`).toHaveLength(1);
    const reader = new LogReader(store(`${prefix}log/`), { unverified: true });
    const note = Buffer.from((await reader.source.get(CHECKPOINT_KEY))!).toString('utf8');
    const cp = openCheckpoint(note, makeVerifier(origin, SIG_ED25519, signer.publicKey));
    expect(cp.size).toBe(acked.length);
    expect(new Set(acked.map((a) => a.seq)).size).toBe(acked.length);
    for (const a of acked) {
      const e = await reader.entry(a.seq, cp.size);
      expect(bytesEqual(e.entryHash, a.entryHash)).toBe(true);
      expect(
        verifyInclusion(a.seq, cp.size, leafHash(a.entryHash), await reader.inclusionProof(a.seq, cp.size), cp.root),
      ).toBe(true);
    }
    for (const [size, [root]] of published)
      if (size > 0) expect(toHex(await reader.treeHash(size))).toBe(root!.split(':')[1]);
    const lock = await new StoreLock(store(`${prefix}private/`), 'lock.json').read();
    expect(lock?.state.size).toBe(cp.size);
  });

  it('is refused on an endpoint whose conditional writes are not verified', async () => {
    const p = `refuse-${uniq()}/`;
    await expect(
      openAwsLog({
        origin: 'refuse.rgw.example/log',
        ...rgwLogStorage(rgw, p),
        s3: { ...rgwLogStorage(rgw, p).s3, requireConditionalWrites: false },
        lock: 'bucket',
        index: false,
        signer: { kind: 'signer', signer: new SeedSigner('refuse.rgw.example/log', new Uint8Array(32).fill(1)) },
      }),
    ).rejects.toBeInstanceOf(AwsConfigError);
  });
});

describe('stele serve on RGW with the bucket lock (no DynamoDB)', () => {
  const ORIGIN = 'rgw.serve.test/log';
  const TOKEN = 'tok_0123456789abcdef0123';
  const auth = { authorization: `Bearer ${TOKEN}` };

  function serve(
    dataDir: string,
    keyFile: string,
  ): Promise<{ child: ChildProcess; url: string; keyId: string; vkey: string }> {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('STELE_')) delete env[k];
    Object.assign(env, {
      ...rgwLogEnv(rgw, ORIGIN, 'serve/'),
      STELE_ROLE: 'sequencer',
      STELE_MODE: 'production',
      STELE_ANCHOR_TOKENS: `ci=${TOKEN}@acme`, // the CLI below sends tenant acme: in production the token must grant it
      STELE_ANCHOR_RATE: '1000000',
      STELE_KEY_FILE: keyFile,
      STELE_BATCH_INTERVAL_MS: '50',
      STELE_HEARTBEAT_MS: '0',
    });
    const child = spawn(
      process.execPath,
      [
        'dist/cli/main.js',
        'serve',
        '--lock',
        'bucket',
        '--data-dir',
        dataDir,
        '--port',
        '0',
        '--json',
        '--log-level',
        'error',
      ],
      {
        cwd: repoRoot,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    children.push(child);
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    return Promise.race([
      once(child.stdout!, 'data').then(([line]) => ({
        child,
        ...(JSON.parse(String(line)) as { url: string; keyId: string; vkey: string }),
      })),
      once(child, 'exit').then(() => {
        throw new Error(`serve exited: ${err}`);
      }),
    ]);
  }

  it('anchors, verify --tiles and tlogcheck from the gateway; a SIGKILL mid-batch loses nothing acknowledged', async () => {
    const dataDir = scratchDir('stele-rgw-serve-');
    const keyFile = join(dataDir, 'log.key');
    const first = await serve(dataDir, keyFile);
    const tiles = `${rgw.endpoint}/${rgw.bucket}/serve/log`;

    // Sizes that cross a tile boundary, in batches.
    for (const [from, n] of [
      [0, 1],
      [1, 260],
      [261, 40],
    ] as const) {
      const rs = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          postAnchor(first.url, { digest: digestOf(from + i), artifact: `f${from + i}` }, auth),
        ),
      );
      expect(rs.map((r) => r.status).filter((s) => s !== 201)).toEqual([]);
    }
    // The lock record is a private object beside the staged batches; the public prefix has no lock.
    expect((await fetch(`${tiles}/checkpoint`)).status).toBe(200);
    expect((await fetch(`${rgw.endpoint}/${rgw.bucket}/serve/private/lock.json`)).status).toBe(403);
    expect(JSON.parse(Buffer.from((await store('serve/private/').get('lock.json'))!).toString()).size).toBe(301);

    // The CLI verifies an anchored file from the gateway's tiles alone.
    const sb = new Sandbox('stele-rgw-cli-');
    try {
      sb.file('release.tar.gz', 'the release bytes\n');
      expect(
        (
          await sb.run([
            'ledger',
            'init',
            '--endpoint',
            first.url,
            '--tenant',
            'acme',
            '--scope',
            'rel',
            '--trust-key',
            first.keyId,
          ])
        ).code,
      ).toBe(0);
      const a = await sb.json(['ledger', 'anchor', 'release.tar.gz'], { STELE_LEDGER_TOKEN: TOKEN });
      expect(a.code, a.stderr).toBe(0);
      const v = await sb.json(['ledger', 'verify', 'release.tar.gz', '--tiles', tiles]);
      expect(v.code, v.stderr).toBe(0);
      expect(v.out).toMatchObject({ result: 'PASS', mode: 'tiles', leafIndex: 301 });
    } finally {
      sb.cleanup();
    }

    // SIGKILL while a stream of anchors is in flight.
    const acked = new Map<string, number>();
    let stop = false;
    const stream = (async () => {
      for (let i = 0; !stop; i++) {
        const batch = await Promise.all(
          Array.from({ length: 25 }, (_, j) =>
            postAnchor(first.url, { digest: digestOf(100_000 + i * 25 + j) }, auth).catch(() => null),
          ),
        );
        for (const [j, r] of batch.entries())
          if (r?.status === 201) acked.set(digestOf(100_000 + i * 25 + j), r.body.leafIndex as number);
        if (batch.some((r) => r === null || r.status !== 201)) return;
      }
    })();
    while (acked.size < 100) await new Promise((r) => setTimeout(r, 20));
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    stop = true;
    await stream;
    expect(acked.size).toBeGreaterThanOrEqual(100);

    // Restart: the batch the lock committed is re-applied; every acknowledged anchor is there.
    const second = await serve(dataDir, keyFile);
    const cp = (await getJson(`${second.url}/api/ledger/checkpoint`)).body;
    expect(cp.treeSize).toBeGreaterThanOrEqual(302 + acked.size);
    for (const [digest, leafIndex] of acked) {
      const e = await getJson(`${second.url}/api/ledger/entry?hash=${digest}`);
      expect(e.status, digest).toBe(200);
      expect(e.body.leafIndex).toBe(leafIndex);
      expect(
        verifyInclusion(
          e.body.leafIndex,
          e.body.treeSize,
          leafHash(hashFromHex(e.body.entry.proof.entryHash)),
          e.body.auditPath.map(hashFromHex),
          hashFromHex(e.body.rootHash),
        ),
      ).toBe(true);
    }
    expect((await postAnchor(second.url, { digest: digestOf(999_999) }, auth)).status).toBe(201);

    // tlogcheck over the tiles the gateway serves (the API only for the entry lookups).
    const old = join(dataDir, 'old.checkpoint');
    writeFileSync(old, (await getJson(`${second.url}/api/ledger/entry?leaf=260`)).body.checkpoint.note);
    const result = await runTlogcheck([
      '-src',
      tiles,
      '-vkey',
      second.vkey,
      '-api',
      second.url,
      '-entry-url-template',
      '/api/ledger/entry?leaf=%d',
      '-samples',
      '60',
      '-old-size',
      '1,256,261',
      '-old-checkpoint',
      old,
    ]);
    expect(result.failures).toEqual([]);
    expect(result.failed).toBe(0);
    expect(result.passed).toBeGreaterThan(50);
    second.child.kill('SIGTERM');
    await once(second.child, 'exit');

    // The operator commands read the bucket lock: fsck passes; a lost lock object is
    // reported and rebuilt from the published checkpoint by recover.
    const ops = new Sandbox('stele-rgw-ops-');
    try {
      const env = { ...rgwLogEnv(rgw, ORIGIN, 'serve/'), STELE_KEY_FILE: keyFile };
      const clean = await ops.json(['log', 'fsck', '--aws'], env);
      expect(clean.code, clean.stderr).toBe(0);
      // The checks verify with the public key alone, as a replica does.
      const byVkey = await ops.json(['log', 'fsck', '--aws'], {
        ...rgwLogEnv(rgw, ORIGIN, 'serve/'),
        STELE_VKEY: second.vkey,
      });
      expect(byVkey.code, byVkey.stderr).toBe(0);
      const size = clean.out.checkpoint.size as number;
      expect(clean.out.lock).toMatchObject({ relation: 'equal', size });
      await store('serve/private/').delete('lock.json');
      const lost = await ops.json(['log', 'fsck', '--aws'], env);
      expect(lost.code).toBe(1);
      expect(lost.out.lock.relation).toBe('missing');
      const r = await ops.json(['log', 'recover', '--aws'], env);
      expect(r.code, r.stderr).toBe(0);
      expect(r.out).toMatchObject({ result: 'recovered', size });
      expect((await ops.json(['log', 'fsck', '--aws'], env)).out.lock.relation).toBe('equal');
    } finally {
      ops.cleanup();
    }
  }, 600_000); // generous: a shared, loaded machine
});

describe('API replicas that follow the log on RGW (their own LMDB index, no DynamoDB)', () => {
  const ORIGIN = 'rgw.follow.test/log';

  /** A replica process given only the log's public key (`key`: its environment for the key). */
  function replica(
    dataDir: string,
    key: NodeJS.ProcessEnv,
    prefix: string,
  ): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('STELE_')) delete env[k];
    Object.assign(env, { ...rgwLogEnv(rgw, ORIGIN, prefix), STELE_ROLE: 'api', ...key });
    const child = spawn(
      process.execPath,
      ['dist/cli/main.js', 'serve', '--data-dir', dataDir, '--port', '0', '--json', '--log-level', 'info'],
      { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    // 'close': stderr is read to its end.
    const exited = once(child, 'close').then(([code]) => {
      throw new Error(`replica exited ${code}: ${err}`);
    });
    return Promise.race([
      once(child.stdout!, 'data').then(([line]) => {
        const ready = JSON.parse(String(line)) as { url?: string };
        // Under --json a refusal is also a JSON error on stdout: wait for the exit it precedes.
        if (ready.url === undefined) return exited;
        return { child, url: ready.url, stderr: () => err };
      }),
      exited,
    ]);
  }

  const until = async (what: string, check: () => Promise<boolean>, ms = 60_000) => {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  it("a replica catches up from empty, answers lookups as the sequencer's index does, follows new checkpoints, and never serves one it could not verify", async () => {
    const prefix = `follow-${uniq()}/`;
    const dir = scratchDir('stele-rgw-follow-');
    const keyFile = join(dir, 'log.key');
    const log = await openAwsLog({
      origin: ORIGIN,
      ...rgwLogStorage(rgw, prefix),
      lock: 'bucket',
      indexDir: join(dir, 'sequencer-index'),
      signer: { kind: 'key-file', path: keyFile },
      batchInterval: 20,
      heartbeatMs: 0,
    });
    const anchor = (from: number, n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          log.sequencer.submit(
            anchorRequest('ledger_anchor', 'Anchored', digestOf(from + i), { artifact: `build-${(from + i) % 50}` }),
          ),
        ),
      );
    await anchor(0, 300);
    await anchor(300, 300);
    // What the sequencer prints; the replicas are given this and nothing secret.
    const vkey = formatVkey(makeVerifier(ORIGIN, SIG_ED25519, log.signer.publicKey));

    // A replica refuses the private key file: it must never need the log's signing key.
    await expect(replica(join(dir, 'r0'), { STELE_KEY_FILE: keyFile }, prefix)).rejects.toThrow(
      /exited 2: .*API replica verifies with the log's public key only.*STELE_VKEY/,
    );
    // And a vkey of another log is refused before anything is served.
    const other = formatVkey(makeVerifier('other.example/log', SIG_ED25519, log.signer.publicKey));
    await expect(replica(join(dir, 'r0'), { STELE_VKEY: other }, prefix)).rejects.toThrow(
      /exited 2: .*STELE_VKEY is the key of other\.example\/log/,
    );

    // It serves the verified checkpoint at once, its own index catching up beside it: a lookup
    // meanwhile is found or a 503 index_not_ready, never a 404.
    const first = await replica(join(dir, 'r1'), { STELE_VKEY: vkey }, prefix);
    expect((await getJson(`${first.url}/api/ledger/checkpoint`)).body.treeSize).toBe(600);
    const early = await getJson(`${first.url}/api/ledger/entry?hash=${digestOf(599)}`);
    if (early.status === 503) expect(early.body.error.code).toBe('index_not_ready');
    else expect(early.status).toBe(200);
    const indexed = (url: string, size: number) =>
      until(
        'the replica to index the log',
        async () => (await getJson(`${url}/api/ledger/entry?hash=${digestOf(size - 1)}`)).status === 200,
      );
    await indexed(first.url, 600);
    expect(first.stderr()).toContain('replica index catching up from the record bundles');
    const compare = async (url: string, size: number) => {
      for (let i = 0; i < size; i += 37) {
        const byHash = await getJson(`${url}/api/ledger/entry?hash=${digestOf(i)}`);
        expect(byHash.status).toBe(200);
        expect(byHash.body.leafIndex).toBe(await log.index!.findByDigest(digestOf(i), firstCandidate));
      }
      for (let a = 0; a < 50; a += 7) {
        const id = artifactId(`build-${a}`);
        const seq = await log.index!.findByArtifact(id, firstCandidate);
        expect(seq).toBeDefined();
        expect((await getJson(`${url}/api/ledger/entry?artifact=${id}`)).body.leafIndex).toBe(seq);
      }
    };
    expect((await getJson(`${first.url}/api/ledger/checkpoint`)).body.treeSize).toBe(600);
    await compare(first.url, 600);
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    expect(await (await fetch(`${first.url}/metrics`)).text()).toMatch(/^stele_follower_lag_entries 0$/m);

    // It follows: new batches become visible once indexed.
    await anchor(600, 90);
    await until(
      'the replica to serve size 690',
      async () => (await getJson(`${first.url}/api/ledger/checkpoint`)).body.treeSize === 690,
    );
    const late = await getJson(`${first.url}/api/ledger/entry?hash=${digestOf(689)}`);
    expect(late.body.leafIndex).toBe(689);

    // A replica restarted from an empty directory catches up to the same answers.
    first.child.kill('SIGTERM');
    await once(first.child, 'exit');
    const vkeyFile = join(dir, 'log.vkey');
    writeFileSync(vkeyFile, `${vkey}\n`);
    const second = await replica(join(dir, 'r2'), { STELE_VKEY_FILE: vkeyFile }, prefix);
    expect((await getJson(`${second.url}/api/ledger/key`)).body.vkey).toBe(vkey);
    expect((await getJson(`${second.url}/api/ledger/checkpoint`)).body.treeSize).toBe(690);
    await indexed(second.url, 690);
    await compare(second.url, 690);
    await log.close(); // before the forgery below, which would stop it

    // A checkpoint the replica cannot verify (its size raised, the signature no longer
    // matching) is never served: the replica keeps the last verified one and is not ready.
    const store = rgwStore(rgw, `${prefix}log/`);
    const real = await store.getVersioned('checkpoint.json');
    const doc = JSON.parse(Buffer.from(real!.data).toString()) as { note: string };
    doc.note = doc.note.replace(/\n690\n/, '\n700\n');
    await store.swap('checkpoint.json', Buffer.from(JSON.stringify(doc)), real!.version);
    await until(
      'the replica to refuse the forged checkpoint',
      async () => (await fetch(`${second.url}/readyz`)).status === 503,
      30_000,
    );
    expect((await getJson(`${second.url}/api/ledger/checkpoint`)).body.treeSize).toBe(690);
    expect((await getJson(`${second.url}/api/ledger/entry?leaf=695`)).status).toBe(404);
    second.child.kill('SIGTERM');
    await once(second.child, 'exit');
  }, 600_000); // generous: a shared, loaded machine
});

describe("the README's self-hosted deployment, as written, on RGW", () => {
  /** The section's `stele.env`, its `docker run` lines' `-e` settings and the vkey pipeline. */
  function readmeDeployment() {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Self-hosted on any S3-compatible store'));
    const [envBlock, runBlock] = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const envFile = Object.fromEntries(
      envBlock!
        .split('\n')
        .filter((l) => /^[A-Z_0-9]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    const lines = runBlock!
      .replace(/\\\n\s*/g, ' ')
      .split('\n')
      .map((l) => l.trim());
    const run = (role: string) => lines.find((l) => l.startsWith('docker run') && l.includes(`STELE_ROLE=${role}`));
    const settings = (line: string | undefined) => {
      expect(line).toBeDefined();
      expect(line).toMatch(/--env-file stele\.env .* stele$/);
      return Object.fromEntries(
        [...line!.matchAll(/-e (\w+)=('[^']*'|\S+)/g)].map((m) => [m[1]!, m[2]!.replace(/^'|'$/g, '')]),
      );
    };
    const logs = lines.find((l) => l.startsWith('docker logs stele-seq |'));
    expect(logs).toBeDefined();
    return {
      envFile,
      sequencer: settings(run('sequencer')),
      replica: settings(run('api')),
      vkeyFilter: logs!.slice(logs!.indexOf('|') + 1).replace(/\s+#.*$/, ''),
    };
  }

  /** The image's command (`node dist/cli/main.js serve`) with `env`; resolves with its stdout once it printed the vkey. */
  function container(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; stdout: string }> {
    const child = spawn(process.execPath, ['dist/cli/main.js', 'serve'], {
      cwd: repoRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    return new Promise((resolve, reject) => {
      child.stdout!.on('data', (d) => {
        stdout += d;
        if (/^ {2}vkey /m.test(stdout)) resolve({ child, stdout });
      });
      child.once('close', (code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
    });
  }

  it('one sequencer and a replica given only the vkey the sequencer printed: anchors are served by the replica', async () => {
    const { envFile, sequencer, replica, vkeyFilter } = readmeDeployment();
    // Only what differs on this machine: the gateway's endpoint and user, loopback and a free
    // port instead of the image's 0.0.0.0:8080, and scratch directories for the volumes.
    expect(envFile).toMatchObject({ STELE_BACKEND: 'aws', STELE_LOCK: 'bucket', STELE_S3_FORCE_PATH_STYLE: 'true' });
    expect(envFile.STELE_KEY_FILE).toBeUndefined(); // the private key is the sequencer's alone
    await rgw.createBucket(envFile.STELE_S3_BUCKET!);
    const base: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(base)) if (k.startsWith('STELE_')) delete base[k];
    const here = {
      STELE_S3_ENDPOINT: rgw.endpoint,
      AWS_ACCESS_KEY_ID: rgw.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: rgw.credentials.secretAccessKey,
      STELE_HOST: '127.0.0.1',
      STELE_PORT: '0',
    };
    /** A container's environment: the env file, this machine's settings, its volume at `dir` for /data, its -e settings. */
    const containerEnv = (dir: string, settings: Record<string, string>, placeholders: Record<string, string>) => ({
      ...base,
      ...envFile,
      ...here,
      STELE_DATA_DIR: dir,
      ...Object.fromEntries(
        Object.entries(settings).map(([k, v]) => [k, placeholders[v] ?? v.replace(/^\/data\b/, dir)]),
      ),
    });
    const token = `tok_${randomBytes(16).toString('hex')}`;
    const seqDir = scratchDir('stele-readme-seq-');
    const seq = await container(containerEnv(seqDir, sequencer, { 'ci=<long random token>@acme': `ci=${token}@acme` }));
    expect(statSync(join(seqDir, 'log.key')).mode & 0o777).toBe(0o600);
    const url = /at (http:\/\/\S+)/.exec(seq.stdout)![1]!;

    // The README's pipeline, run by a shell on what the sequencer printed.
    const filter = spawnSync('sh', ['-c', vkeyFilter], { input: seq.stdout, encoding: 'utf8' });
    const vkey = filter.stdout.trim();
    expect(vkey).toBe((await getJson(`${url}/api/ledger/key`)).body.vkey);
    const api = await container(containerEnv(scratchDir('stele-readme-api-'), replica, { '<vkey>': vkey }));
    expect(replica.STELE_VKEY).toBe('<vkey>');
    const apiUrl = /at (http:\/\/\S+)/.exec(api.stdout)![1]!;

    const digest = digestOf(424_242);
    expect((await postAnchor(url, { digest }, { authorization: `Bearer ${token}` })).status).toBe(201);
    const deadline = Date.now() + 60_000;
    let found = await getJson(`${apiUrl}/api/ledger/entry?hash=${digest}`);
    while (found.status !== 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      found = await getJson(`${apiUrl}/api/ledger/entry?hash=${digest}`);
    }
    expect(found.status).toBe(200);
    expect(found.body.entry.digest).toBe(digest);
    // The README's client of tenant acme, as written: init, then anchor with the token in the environment.
    const sb = new Sandbox('stele-readme-client-');
    try {
      sb.file('release.tar.gz', 'the self-hosted release\n');
      const keyId = (await getJson(`${url}/api/ledger/key`)).body.keyId as string;
      const init = await sb.run([
        'ledger',
        'init',
        '--endpoint',
        url,
        '--tenant',
        'acme',
        '--scope',
        'releases',
        '--trust-key',
        keyId,
      ]);
      expect(init.code, init.stderr).toBe(0);
      const anchored = await sb.json(['ledger', 'anchor', 'release.tar.gz'], { STELE_LEDGER_TOKEN: token });
      expect(anchored.code, anchored.stderr).toBe(0);
      expect(anchored.out.entry).toMatchObject({ tenant: 'acme', scope: 'releases' });
    } finally {
      sb.cleanup();
    }
    // The public prefix is at log/ in the bucket the env file names.
    const cp = await rgw.client.send(new GetObjectCommand({ Bucket: envFile.STELE_S3_BUCKET!, Key: 'log/checkpoint' }));
    expect(await cp.Body!.transformToString()).toMatch(new RegExp(`^${envFile.STELE_ORIGIN}\n`));
    for (const c of [api.child, seq.child]) {
      c.kill('SIGTERM');
      await once(c, 'exit');
    }
  }, 600_000); // generous: a shared, loaded machine
});
