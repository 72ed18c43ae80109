// `npm run test:quick`: the pure and unit tests, for the edit loop (issue 33). A test file is
// in it unless its source starts something heavy: a server, a subprocess, a browser, a Ceph,
// SoftHSM or Go check, or the built CLI. The list is computed from the files each run, so a
// new test joins the tier it belongs to without being listed. `npm test` stays the whole suite.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

const HEAVY = new RegExp(
  [
    // processes and servers started by the test itself
    String.raw`\b(spawn|spawnSync|execFile|execFileSync|execSync|fork|createServer)\(`,
    String.raw`\bnew Worker\(`,
    String.raw`\.listen\(`,
    // helpers that start servers, browsers, Ceph, SoftHSM, Go checks or the built CLI
    String.raw`\b(ensureBuilt|startServe|startTestServer|startServer|startS3Server|startDynamoServer|startKmsStandIn|startRgw|softHsm|launchBrowser|runTlogcheck|runSteleinterop)\(`,
    String.raw`helpers/(browser|rgw|explorer-servers|fake-log-server|oidc|s3-server|dynamo-server|cli)\.js`,
    String.raw`api/server\.js`,
  ].join('|'),
);

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return testFiles(p);
    return e.name.endsWith('.test.ts') ? [p] : [];
  });
}

const quick = testFiles('test').filter((f) => !HEAVY.test(readFileSync(f, 'utf8')));

export default defineConfig({
  ...base,
  test: { ...base.test, include: quick, reporters: ['default'], outputFile: undefined },
});
