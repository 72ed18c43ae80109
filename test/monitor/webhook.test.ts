// `stele monitor --webhook` as a subprocess against a real HTTP receiver: each watched entry
// is alerted exactly once across a kill -9 that lands while an alert is out for delivery (a
// webhook that takes the request and never answers), on stdout and at the webhook; failed
// deliveries are retried with backoff; a second run finds nothing left to send.
import { type ChildProcess, spawn } from 'node:child_process';
import { type Server, createServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIG_ED25519, SeedSigner, formatVkey, makeVerifier } from '../../src/core/note.js';
import { writeTestKey } from '../helpers/audit.js';
import { CLI, Sandbox, ensureBuilt } from '../helpers/cli.js';
import { makeLog } from '../helpers/logs.js';

const ORIGIN = 'webhook.test/log';
const VKEY = formatVkey(
  makeVerifier(ORIGIN, SIG_ED25519, new SeedSigner(ORIGIN, new Uint8Array(32).fill(37)).publicKey),
);
/** makeLog gives its i-th entry the artifact a{(i+1) % 7}. */
const A3 = Array.from({ length: 300 }, (_, i) => i).filter((i) => (i + 1) % 7 === 3);

/** A webhook receiver: 'stall' takes requests and never answers; 'fail' answers 500 `failFirst` times, then 200. */
class Receiver {
  mode: 'stall' | 'fail' = 'stall';
  failFirst = 0;
  readonly received: string[] = [];
  readonly acked: string[] = [];
  readonly keys: string[] = [];
  private server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const id = (JSON.parse(body) as { id: string }).id;
      this.received.push(id);
      this.keys.push(String(req.headers['idempotency-key']));
      if (this.mode === 'stall') return;
      if (this.failFirst > 0) {
        this.failFirst--;
        res.writeHead(500).end();
        return;
      }
      this.acked.push(id);
      res.writeHead(204).end();
    });
  });
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/hook?token=s3cret`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

const lines = (stdout: string) =>
  stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { alert: string; id: string; seq: number });

async function until(what: string, cond: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('stele monitor --webhook', () => {
  const sb = new Sandbox('stele-monitor-webhook-');
  const logDir = join(sb.root, 'a');
  const state = join(sb.root, 'monitor.state');
  const hook = new Receiver();
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    await ensureBuilt();
    await writeTestKey(logDir, ORIGIN, 37);
    await makeLog(logDir, ORIGIN, [300]);
    await hook.start();
  }, 180_000);
  afterAll(async () => {
    child?.kill('SIGKILL');
    await hook.close();
    sb.cleanup();
  });

  const args = ['monitor', join(logDir, 'log'), '--vkey', VKEY, '--state', state, '--watch-artifact', 'a3'];

  it('alerts each watched entry exactly once across a kill -9 during delivery, retrying a failing webhook', async () => {
    // Run 1 follows the log; the webhook takes the first alert and never answers; kill -9 then.
    child = spawn(process.execPath, [CLI, ...args, '--webhook', hook.url, '--interval', '50'], {
      cwd: sb.work,
      env: sb.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out1 = '';
    let err1 = '';
    child.stdout!.on('data', (d) => (out1 += d));
    child.stderr!.on('data', (d) => (err1 += d));
    const exited = new Promise<void>((r) => child!.once('close', () => r()));
    await until('the webhook to get an alert', () => hook.received.length > 0).catch((e: Error) => {
      throw new Error(`${e.message}: ${err1}`);
    });
    child.kill('SIGKILL');
    await exited;
    expect(hook.acked).toEqual([]);
    const stalled = hook.received[0]!;
    expect(stalled).toBe(`${ORIGIN}/watch/${A3[0]}`);

    // Run 2 (one-shot): the webhook fails twice, then answers; every alert gets there once.
    hook.mode = 'fail';
    hook.failFirst = 2;
    const r2 = await sb.run([...args, '--webhook', hook.url, '--once']);
    const shown = [...lines(out1), ...lines(r2.stdout)];
    expect(shown.map((a) => a.seq)).toEqual(A3);
    expect(hook.acked).toEqual(A3.map((s) => `${ORIGIN}/watch/${s}`));
    expect(hook.received.filter((id) => id === stalled)).toHaveLength(1 + 2 + 1); // stalled, 2 × 500, delivered
    expect(hook.keys.every((k, i) => k === hook.received[i])).toBe(true);
    expect(lines(out1).length).toBeGreaterThan(0); // the stdout sink took bundle 0 before the stall
    expect(r2.code, r2.stderr).toBe(1);
    expect(`${err1}${r2.stderr}`).not.toContain('s3cret');

    // Run 3: nothing new, nothing left to deliver.
    const before = hook.received.length;
    const r3 = await sb.run([...args, '--webhook', hook.url, '--once']);
    expect(r3.code, r3.stderr).toBe(0);
    expect(r3.stdout).toBe('');
    expect(hook.received).toHaveLength(before);
  }, 120_000);

  it('keeps alerts a webhook could not take in the state and delivers them on the next run', async () => {
    await makeLog(logDir, ORIGIN, [14]); // entries 300..313: seqs 302 and 309 are a3
    const down = 'http://127.0.0.1:9/unreachable';
    const r1 = await sb.run([...args, '--webhook', down, '--once']);
    expect(lines(r1.stdout).map((a) => a.seq)).toEqual([302, 309]);
    expect(r1.code).toBe(1);
    expect(r1.stderr).toMatch(/2 alerts not yet delivered/);
    const acked = hook.acked.length;
    const r2 = await sb.run([...args, '--webhook', hook.url, '--once']);
    expect(r2.stdout).toBe('');
    expect(r2.code, r2.stderr).toBe(0);
    expect(hook.acked.slice(acked)).toEqual([`${ORIGIN}/watch/302`, `${ORIGIN}/watch/309`]);
  }, 120_000);
});
