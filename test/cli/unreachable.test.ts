// A service a server command needs that cannot be reached is one line on stderr naming what
// was being reached, the setting that names it and the reason in words, exit 3 (issue 33):
// `stele serve` on the AWS backend with its S3 endpoint, its DynamoDB endpoint or its KMS
// key's endpoint down, and `stele log fsck --aws` with its S3 endpoint down. Each "down"
// endpoint is a loopback port nothing listens on; the others are s3rver and dynalite.
// And the start that succeeds prints only JSON lines on stderr: no runtime warning from a
// dependency (the AWS SDK's NodeVersionSupportWarning on Node 20) breaks the server's log.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, Sandbox, ensureBuilt } from '../helpers/cli.js';
import { type DynamoServer, startDynamoServer } from '../helpers/dynamo-server.js';
import { freePort } from '../helpers/ports.js';
import { type S3Server, startS3Server } from '../helpers/s3-server.js';

const ORIGIN = 'unreachable.test/log';
let sb: Sandbox;
let s3: S3Server;
let ddb: DynamoServer;
let down: string;

beforeAll(async () => {
  await ensureBuilt();
  [s3, ddb] = await Promise.all([startS3Server(), startDynamoServer()]);
  sb = new Sandbox('stele-unreachable-');
  down = `http://127.0.0.1:${await freePort()}`;
}, 120_000);
afterAll(async () => {
  await Promise.all([s3?.close(), ddb?.close()]);
  sb?.cleanup();
});

/** The AWS-backend environment of `stele serve`, on s3rver unless overridden. */
function awsEnv(extra: Record<string, string>): Record<string, string> {
  return {
    STELE_BACKEND: 'aws',
    STELE_ORIGIN: ORIGIN,
    STELE_S3_BUCKET: s3.bucket,
    STELE_S3_ENDPOINT: s3.endpoint,
    STELE_S3_FORCE_PATH_STYLE: 'true',
    // s3rver ignores If-Match, so the DynamoDB lock guards the log here.
    STELE_S3_REQUIRE_CONDITIONAL_WRITES: 'false',
    STELE_DYNAMO_TABLE: 'missing',
    STELE_DYNAMO_ENDPOINT: ddb.endpoint,
    STELE_KEY_FILE: `${sb.root}/log.key`,
    AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    AWS_REGION: 'us-east-1',
    ...extra,
  };
}

/**
 * Exit 3, and on stderr, besides the server's JSON log lines, exactly one line:
 * `stele: cannot reach <what> (<setting>): <reason>`.
 */
function expectUnreachable(r: { code: number; stderr: string }, what: string, setting: string): void {
  const lines = r.stderr.split('\n').filter((l) => l !== '' && !isJson(l));
  expect(lines, r.stderr).toEqual([expect.stringMatching(/^stele: cannot reach /)]);
  expect(lines[0]).toBe(`stele: cannot reach ${what} (${setting}): connection refused (nothing listens on that port)`);
  expect(r.code).toBe(3);
}

function isJson(line: string): boolean {
  try {
    return typeof JSON.parse(line) === 'object';
  } catch {
    return false;
  }
}

describe('an endpoint that cannot be reached names itself, its setting and the reason (exit 3)', () => {
  it('serve: the S3 endpoint (STELE_S3_ENDPOINT)', async () => {
    const r = await sb.run(['serve', '--port', '0'], awsEnv({ STELE_S3_ENDPOINT: down }));
    expectUnreachable(r, `the S3 endpoint ${down}`, 'STELE_S3_ENDPOINT');
  }, 60_000);

  it('serve: the DynamoDB endpoint of the lock (STELE_DYNAMO_ENDPOINT)', async () => {
    const r = await sb.run(['serve', '--port', '0'], awsEnv({ STELE_DYNAMO_ENDPOINT: down }));
    expectUnreachable(r, `the DynamoDB endpoint ${down}`, 'STELE_DYNAMO_ENDPOINT');
  }, 60_000);

  it("serve: the KMS key's endpoint (STELE_KMS_ENDPOINT)", async () => {
    const r = await sb.run(
      ['serve', '--port', '0'],
      awsEnv({ STELE_KEY_FILE: '', STELE_KMS_KEY_ID: 'alias/stele', STELE_KMS_ENDPOINT: down }),
    );
    expectUnreachable(r, `the KMS endpoint ${down} for the key alias/stele`, 'STELE_KMS_ENDPOINT');
  }, 60_000);

  it('log fsck --aws: the S3 endpoint (STELE_S3_ENDPOINT)', async () => {
    const r = await sb.run(['log', 'fsck', '--aws'], awsEnv({ STELE_S3_ENDPOINT: down }));
    expectUnreachable(r, `the S3 endpoint ${down}`, 'STELE_S3_ENDPOINT');
  }, 60_000);
});

describe('serve on the S3 backend', () => {
  it('starts with every stderr line JSON: no plain-text warning from a dependency', async () => {
    const table = 'startlog';
    await ddb.createTable(table);
    const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--json'], {
      cwd: sb.work,
      env: sb.env(
        awsEnv({ STELE_DYNAMO_TABLE: table, STELE_S3_PREFIX: 'start/log/', STELE_S3_STAGING_PREFIX: 'start/private/' }),
      ),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const banner = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        stdout += d;
        if (stdout.includes('\n')) resolve(stdout.slice(0, stdout.indexOf('\n')));
      });
      child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
    });
    expect(JSON.parse(banner)).toMatchObject({ origin: ORIGIN });
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    const lines = stderr.split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(0);
    expect(
      lines.filter((l) => !isJson(l)),
      stderr,
    ).toEqual([]);
  }, 60_000);
});
