// Ctrl-C while `ledger verify` hashes a large file, on a terminal (a pty from util-linux's
// `script`, since the bar is drawn only on a TTY): the bar's line is ended, the command says
// "interrupted" and exits 130 (128 + SIGINT), as a shell expects. The bar shows time left.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, ftruncateSync, mkdirSync, openSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { SIG_ED25519, formatVkey, keyIdOf, makeVerifier } from '../../src/core/note.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, Sandbox, ensureBuilt } from '../helpers/cli.js';

const hasScript = (() => {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!hasScript)('Ctrl-C during hashing', () => {
  let sb: Sandbox;

  beforeAll(async () => {
    await ensureBuilt();
    sb = new Sandbox('stele-interrupt-');
    // A configuration pinning some log at an endpoint nothing answers: hashing comes first.
    const vkey = formatVkey(makeVerifier('interrupt.test/log', SIG_ED25519, new Uint8Array(32).fill(3)));
    mkdirSync(dirname(sb.configFile), { recursive: true });
    writeFileSync(join(dirname(sb.configFile), 'ledger.policy'), `log ${vkey}\nquorum none\n`);
    writeFileSync(
      sb.configFile,
      `[ledger]\nendpoint = "http://127.0.0.1:9"\n\n[ledger.trust]\nkey_id = "${keyIdOf(new Uint8Array(32).fill(3))}"\ntree_size = 0\nroot_hash = "${'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'}"\norigin = "interrupt.test/log"\nvkey = "${vkey}"\npolicy = "ledger.policy"\n`,
    );
    // A sparse file: large enough for the bar (≥ 64 MiB) and seconds of hashing, no disk used.
    const fd = openSync(join(sb.work, 'big.bin'), 'w');
    ftruncateSync(fd, 4 * 2 ** 30);
    closeSync(fd);
  }, 120_000);

  afterAll(() => sb?.cleanup());

  it('ends the bar, says interrupted and exits 130', async () => {
    const command = `'${process.execPath}' '${CLI}' ledger verify big.bin`;
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      cwd: sb.work,
      env: { ...sb.env(), TERM: 'xterm' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString('utf8');
    });
    const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const deadline = Date.now() + 60_000;
    while (!/ left/.test(out) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(out).toMatch(/hashing big\.bin \[.*\] \d+% \| \d+\/4096 MiB \| \d+s elapsed, \d+s left/);
    // SIGINT to the CLI itself, as a terminal's Ctrl-C sends to the foreground process.
    execFileSync('pkill', ['-INT', '-f', `${CLI} ledger verify big.bin`]);
    const code = await exit;
    expect(out).toMatch(/\r?\nhashing big\.bin: interrupted\r?\n/);
    // `script -e` passes the child's status on: 128 + SIGINT.
    expect(code).toBe(130);
  }, 90_000);
});
