// A real S3 server on loopback for tests and benchmarks: Ceph's RADOS Gateway (Debian's
// `radosgw`, `ceph-mon`, `ceph-osd`), as a one-node "micro" cluster — one monitor, one OSD
// on `memstore` (RAM, no disk set-up), one beast gateway — in a scratch directory, on free
// loopback ports, with authentication off inside the cluster (the gateway still checks
// SigV4 against the user it creates). Unlike s3rver it enforces If-None-Match / If-Match
// on PUT, atomically. Starting takes ~13 s on an idle machine; every step is bounded and a
// failed start stops what it started and says which step failed.
//
// The daemons run in the foreground (`-f`) as children of this process, so they are
// stopped by their PIDs (SIGTERM, then SIGKILL), also if the process exits without close().
// One cluster runs on a machine at a time: a second one started beside the first had its
// OSD exit during start-up (cause not found), so startRgw() waits for a lock directory in
// the temporary directory (freed by close(), or taken over when its process is gone).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, PutBucketPolicyCommand, S3Client } from '@aws-sdk/client-s3';
import type { AwsLogConfig } from '../../src/serve/aws-config.js';
import { S3ObjectStore } from '../../src/store/s3.js';
import { ensureBuilt } from './cli.js';
import { freePort } from './ports.js';

export interface RgwServer {
  readonly endpoint: string;
  readonly bucket: string;
  readonly region: string;
  readonly credentials: { accessKeyId: string; secretAccessKey: string };
  /** A path-style client for inspecting the bucket. */
  readonly client: S3Client;
  /** Another bucket on the same gateway (created now). */
  createBucket(name: string): Promise<void>;
  close(): Promise<void>;
}

export class RgwStartError extends Error {
  override name = 'RgwStartError';
}

/**
 * The environment `stele serve` and `stele log … --aws` read for a self-hosted log on this
 * gateway: the S3 settings, the bucket lock, and the public and staging prefixes under `prefix`.
 */
export function rgwLogEnv(rgw: RgwServer, origin: string, prefix = ''): Record<string, string> {
  return {
    STELE_BACKEND: 'aws',
    STELE_LOCK: 'bucket',
    STELE_ORIGIN: origin,
    AWS_REGION: rgw.region,
    AWS_ACCESS_KEY_ID: rgw.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: rgw.credentials.secretAccessKey,
    STELE_S3_BUCKET: rgw.bucket,
    STELE_S3_ENDPOINT: rgw.endpoint,
    STELE_S3_FORCE_PATH_STYLE: 'true',
    STELE_S3_PREFIX: `${prefix}log/`,
    STELE_S3_STAGING_PREFIX: `${prefix}private/`,
  };
}

const BINARIES = ['monmaptool', 'ceph-mon', 'ceph-osd', 'ceph', 'radosgw', 'radosgw-admin'];

/** Whether the Ceph packages are installed (.ci/run installs them). */
export function rgwAvailable(): boolean {
  return BINARIES.every((b) => ['/usr/bin', '/usr/sbin', '/bin'].some((d) => existsSync(join(d, b))));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether a daemon has exited. */
const gone = (d: ChildProcess) => d.exitCode !== null || d.signalCode !== null;

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** The last lines of each daemon's log, for a start that failed. */
function logTails(logDir: string): string {
  try {
    return readdirSync(logDir)
      .map((f) => `--- ${f}\n${readFileSync(join(logDir, f), 'utf8').trimEnd().split('\n').slice(-8).join('\n')}`)
      .join('\n');
  } catch {
    return '';
  }
}

const live = new Set<ChildProcess>();
const MACHINE_LOCK = join(tmpdir(), 'stele-rgw.lock');
let holdingLock = false;
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
  if (holdingLock) rmSync(MACHINE_LOCK, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Waits until no other process on this machine runs a cluster, then marks this one's. */
async function acquireMachineLock(deadline: number): Promise<void> {
  for (;;) {
    try {
      mkdirSync(MACHINE_LOCK);
      writeFileSync(join(MACHINE_LOCK, 'pid'), String(process.pid));
      holdingLock = true;
      return;
    } catch {
      let pid = 0;
      try {
        pid = Number(readFileSync(join(MACHINE_LOCK, 'pid'), 'utf8'));
      } catch {
        // Just created by another process, its pid not yet written: wait for it.
      }
      if (pid > 0 && !alive(pid)) {
        rmSync(MACHINE_LOCK, { recursive: true, force: true });
        continue;
      }
      if (Date.now() >= deadline)
        throw new RgwStartError(
          `another Ceph test cluster is running on this machine (process ${pid || '?'}; ${MACHINE_LOCK})`,
        );
      await sleep(500);
    }
  }
}

function releaseMachineLock(): void {
  if (!holdingLock) return;
  holdingLock = false;
  rmSync(MACHINE_LOCK, { recursive: true, force: true });
}

/** The gateway as openAwsLog's storage: the log's public objects under `<prefix>log/`, its private ones under `<prefix>private/`. */
export function rgwLogStorage(rgw: RgwServer, prefix: string): Pick<AwsLogConfig, 'region' | 'credentials' | 's3'> {
  return {
    region: rgw.region,
    credentials: rgw.credentials,
    s3: {
      bucket: rgw.bucket,
      publicPrefix: `${prefix}log/`,
      stagingPrefix: `${prefix}private/`,
      endpoint: rgw.endpoint,
      forcePathStyle: true,
    },
  };
}

/** An object store on the gateway's bucket, under `prefix`. */
export function rgwStore(rgw: RgwServer, prefix: string): S3ObjectStore {
  return new S3ObjectStore({
    bucket: rgw.bucket,
    prefix,
    endpoint: rgw.endpoint,
    region: rgw.region,
    forcePathStyle: true,
    credentials: rgw.credentials,
  });
}

type RgwOptions = { bucket?: string; deadlineMs?: number; memoryBytes?: number; lockWaitMs?: number };

/** Lets anyone read the bucket's public prefixes (`<prefix>/log/…`) without credentials, as a CDN origin would. */
export async function allowAnonymousLogReads(rgw: RgwServer): Promise<void> {
  const policy = {
    Version: '2012-10-17',
    Statement: [
      { Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: `arn:aws:s3:::${rgw.bucket}/*/log/*` },
    ],
  };
  await rgw.client.send(new PutBucketPolicyCommand({ Bucket: rgw.bucket, Policy: JSON.stringify(policy) }));
}

/**
 * The gateway and the built CLI, for tests that run `stele` against it. Both settle before
 * either failure is thrown, so a failed build never leaves a cluster running.
 */
export async function startRgwWithCli(): Promise<RgwServer> {
  const [started, built] = await Promise.allSettled([startRgw(), ensureBuilt()]);
  if (started.status === 'rejected') throw started.reason;
  if (built.status === 'rejected') {
    await started.value.close();
    throw built.reason;
  }
  return started.value;
}

/**
 * Starts the cluster and creates `bucket`; a failed start is tried again from nothing, up to
 * three times in all, since the OSD now and then comes up with a zeroed cluster fsid ('wrong
 * fsid') and exits (a CI run had a start fail on both of two tries).
 */
export async function startRgw(options: RgwOptions = {}): Promise<RgwServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRgwOnce(options);
    } catch (e) {
      if (attempt >= 3 || !(e instanceof RgwStartError) || !rgwAvailable()) throw e;
    }
  }
}

/**
 * One start: `deadlineMs` bounds it (default 120 s: the machine may be busy); `memoryBytes`
 * bounds the OSD's RAM store.
 */
async function startRgwOnce(options: RgwOptions): Promise<RgwServer> {
  if (!rgwAvailable()) {
    throw new RgwStartError(
      `Ceph is not installed (need ${BINARIES.join(', ')}): apt-get install --no-install-recommends ceph-mon ceph-osd radosgw ceph-common uuid-runtime`,
    );
  }
  const bucket = options.bucket ?? 'stele';
  await acquireMachineLock(Date.now() + (options.lockWaitMs ?? 600_000));
  const deadline = Date.now() + (options.deadlineMs ?? 120_000);
  const left = () => Math.max(1, deadline - Date.now());
  const dir = mkdtempSync(join(tmpdir(), 'stele-rgw-'));
  const conf = join(dir, 'ceph.conf');
  const [monPort, rgwPort] = [await freePort(), await freePort()];
  const credentials = {
    accessKeyId: `STELE${randomBytes(6).toString('hex').toUpperCase()}`,
    secretAccessKey: randomBytes(24).toString('base64url'),
  };
  for (const d of ['run', 'log', 'mon-a', 'osd-0']) mkdirSync(join(dir, d));
  writeFileSync(
    conf,
    [
      '[global]',
      `fsid = ${randomUUID()}`,
      `mon host = v1:127.0.0.1:${monPort}`,
      'auth cluster required = none',
      'auth service required = none',
      'auth client required = none',
      'osd pool default size = 1',
      'osd pool default min size = 1',
      'osd pool default pg num = 8',
      'osd pool default pgp num = 8',
      'mon max pg per osd = 1000',
      'osd crush chooseleaf type = 0',
      'mon allow pool size one = true',
      'mon warn on pool no redundancy = false',
      'osd objectstore = memstore',
      `memstore device bytes = ${options.memoryBytes ?? 1024 ** 3}`,
      `run dir = ${dir}/run`,
      `log file = ${dir}/log/$name.log`,
      `admin socket = ${dir}/run/$name.asok`,
      `mon data = ${dir}/mon-$id`,
      `osd data = ${dir}/osd-$id`,
      '[client.rgw.a]',
      `rgw frontends = beast endpoint=127.0.0.1:${rgwPort}`,
      'rgw dns name = 127.0.0.1',
      '',
    ].join('\n'),
  );

  const daemons: ChildProcess[] = [];
  let step = 'configuring';
  const run = (cmd: string, args: string[]): Promise<string> =>
    new Promise((resolve, reject) => {
      execFile(
        cmd,
        ['-c', conf, ...args],
        { timeout: Math.min(left(), 60_000), encoding: 'utf8' },
        (err, stdout, stderr) => {
          if (err)
            reject(
              new RgwStartError(
                `${cmd} ${args.join(' ')}: ${(stderr || err.message).trim().split('\n').slice(-3).join(' | ')}`,
              ),
            );
          else resolve(stdout);
        },
      );
    });
  const daemon = (cmd: string, args: string[]) => {
    const c = spawn(cmd, ['-f', '-c', conf, ...args], { stdio: 'ignore' });
    live.add(c);
    c.once('exit', () => live.delete(c));
    daemons.push(c);
    return c;
  };
  const until = async (what: string, check: () => Promise<boolean>) => {
    step = `waiting for ${what}`;
    while (!(await check().catch(() => false))) {
      if (Date.now() >= deadline) throw new RgwStartError(`timed out ${step}`);
      if (daemons.some(gone)) throw new RgwStartError(`a daemon exited while ${step}`);
      await sleep(250);
    }
  };
  const stop = async () => {
    for (const d of daemons.reverse()) if (!gone(d)) d.kill('SIGTERM');
    for (let i = 0; i < 40 && !daemons.every(gone); i++) await sleep(100);
    for (const d of daemons) if (!gone(d)) d.kill('SIGKILL');
    for (let i = 0; i < 40 && !daemons.every(gone); i++) await sleep(50);
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
    releaseMachineLock();
  };

  let client: S3Client | undefined;
  try {
    step = 'creating the monitor';
    const monmap = join(dir, 'monmap');
    const fsid = /fsid = (\S+)/.exec(readFileSync(conf, 'utf8'))![1]!;
    await run('monmaptool', ['--create', '--add', 'a', `v1:127.0.0.1:${monPort}`, '--fsid', fsid, monmap]);
    await run('ceph-mon', ['--mkfs', '-i', 'a', '--monmap', monmap]);
    step = 'starting the monitor';
    daemon('ceph-mon', ['-i', 'a']);
    step = 'creating the OSD';
    await run('ceph', ['--connect-timeout', '30', 'osd', 'create']);
    await run('ceph-osd', ['-i', '0', '--mkfs']);
    // Now and then the OSD asks the monitor to place it before it has the cluster's fsid
    // ('wrong fsid' in its log) and exits (a CI run failed on it after three starts of the
    // whole cluster), so the OSD alone is started again, up to four times in all.
    for (let start = 1; ; start++) {
      const osd = daemon('ceph-osd', ['-i', '0']);
      try {
        await until('the OSD to come up', async () =>
          /\b1 up\b/.test(await run('ceph', ['--connect-timeout', '10', 'osd', 'stat'])),
        );
        break;
      } catch (e) {
        if (start >= 4 || !gone(osd) || daemons.some((d) => d !== osd && gone(d))) throw e;
        daemons.splice(daemons.indexOf(osd), 1);
      }
    }
    step = 'starting the gateway';
    daemon('radosgw', ['-n', 'client.rgw.a']);
    await until('the gateway port', () => portOpen(rgwPort));
    step = 'creating the S3 user';
    await run('radosgw-admin', [
      'user',
      'create',
      '--uid=stele',
      '--display-name=stele',
      `--access-key=${credentials.accessKeyId}`,
      `--secret-key=${credentials.secretAccessKey}`,
    ]);
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    const region = 'us-east-1';
    const c = (client = new S3Client({ endpoint, region, forcePathStyle: true, credentials }));
    const createBucket = async (name: string) => {
      await c.send(new CreateBucketCommand({ Bucket: name }));
    };
    step = 'creating the bucket';
    await createBucket(bucket);
    return {
      endpoint,
      bucket,
      region,
      credentials,
      client: c,
      createBucket,
      async close() {
        c.destroy();
        await stop();
      },
    };
  } catch (e) {
    client?.destroy();
    const logs = logTails(join(dir, 'log'));
    await stop();
    const message = e instanceof RgwStartError ? e.message : `${step}: ${(e as Error).message}`;
    throw new RgwStartError(logs ? `${message}\n${logs}` : message);
  }
}
