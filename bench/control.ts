// Issue 7 figures: POST /v1/policy/evaluate at 64 connections with a warm JWKS cache, every
// decision anchored in the ledger (fsync on) and appended to the signed audit stream before
// it is answered. The server is `stele control serve` in a child process (one core), the
// OpenID Provider and autocannon run in this process (the other core). Runs:
//   1. default settings (verified-token and decision caches on): the figure for the issue;
//   2. verified-token cache off: every request verifies the JWT signature with jose;
//   5. decision cache off: Cedar evaluates every request (the body never changes, so with the
//      cache on every decision after the first reuses Cedar's answer);
//   3. 256 connections; 4. fsync off.
// After each run the ledger and the audit stream are checked to hold one entry / event per
// answered decision.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startOidcProvider } from '../test/helpers/oidc.js';
import { loadavg } from 'node:os';
import { sha256 } from '../src/core/hash.js';
import { QUICK, ScratchDirs, figure as printFigure, note, sha256x3Rate } from './util.js';

interface CannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; max: number };
  errors: number;
  non2xx: number;
  '2xx': number;
}
// Loaded by a computed specifier so this file type-checks with or without autocannon's typings.
const AUTOCANNON: string = 'autocannon';
const autocannon = ((await import(AUTOCANNON)) as { default: unknown }).default as (
  o: Record<string, unknown>,
) => Promise<CannonResult>;

const ROOT = new URL('..', import.meta.url).pathname;
const AUDIENCE = 'https://control.bench.stele/v1';
const CONNECTIONS = 64;
const DURATION_S = QUICK ? 5 : 15;
const BATCH_INTERVAL_MS = Number(process.env.BENCH_BATCH_MS ?? 2);
/** BENCH_RUNS=1,4 runs only those runs (for profiling one configuration); default all. */
const RUNS = new Set((process.env.BENCH_RUNS ?? '1,2,5,3,4').split(',').map(Number));

const POLICIES = `
@id("staff-read-eng") permit (principal in Group::"staff", action == Action::"read", resource) when { resource.dept == "eng" };
@id("deny-contractors") forbid (principal in Group::"contractors", action, resource);
`;
const ENTITIES = [
  { uid: { type: 'Group', id: 'staff' }, attrs: {}, parents: [] },
  { uid: { type: 'Group', id: 'contractors' }, attrs: {}, parents: [] },
  { uid: { type: 'User', id: 'alice' }, attrs: {}, parents: [{ type: 'Group', id: 'staff' }] },
  {
    uid: { type: 'User', id: 'bob' },
    attrs: {},
    parents: [
      { type: 'Group', id: 'staff' },
      { type: 'Group', id: 'contractors' },
    ],
  },
  { uid: { type: 'Document', id: 'q3-report' }, attrs: { dept: 'eng' }, parents: [] },
];

/** The ledger with /v1 mounted, in a child process (`stele control serve`, or with fsync off for the CPU-bound run). */
const CHILD = `
import { pino } from 'pino';
import { SERVE_DEFAULTS } from '${new URL('../src/serve/config.ts', import.meta.url).href}';
import { startServer } from '${new URL('../src/serve/log-server.ts', import.meta.url).href}';
const e = process.env;
const srv = await startServer({ ...SERVE_DEFAULTS, dataDir: e.BENCH_DATA_DIR, origin: 'bench.stele/control', port: 0, batchIntervalMs: Number(e.BENCH_BATCH_MS), fsync: e.BENCH_FSYNC === '1', enterprise: true }, pino({ level: 'warn' }, pino.destination(2)));
console.log(JSON.stringify({ url: srv.url }));
process.on('SIGTERM', () => srv.close().then(() => process.exit(0)));
`;

async function startControlServer(dataDir: string, fsync: boolean): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : []),
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      CHILD,
    ],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        NODE_NO_WARNINGS: '1',
        BENCH_DATA_DIR: dataDir,
        BENCH_BATCH_MS: String(BATCH_INTERVAL_MS),
        BENCH_FSYNC: fsync ? '1' : '0',
      },
    },
  );
  const exited = once(child, 'exit');
  const first = await Promise.race([once(child.stdout!, 'data') as Promise<[Buffer]>, exited.then(() => null)]);
  if (first === null) throw new ChildCrashed('the server exited during start-up');
  return { url: JSON.parse(first[0].toString().split('\n')[0]!).url as string, child };
}

interface ServerCpu {
  readonly main: number;
  readonly all: number;
}

/**
 * CPU time (ms) the server process has used: its main thread, and all its threads (workers,
 * the libuv pool); from /proc, so Linux only (undefined elsewhere).
 */
function serverCpu(pid: number | undefined): ServerCpu | undefined {
  if (pid === undefined) return undefined;
  const ticks = (stat: string) => {
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS;
  };
  try {
    const all = ticks(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    const main = ticks(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8'));
    return { main, all };
  } catch {
    return undefined;
  }
}
/** USER_HZ: 100 on every Linux architecture Node supports. */
const CLOCK_TICKS = 100;

/** The server child died. (Before src/policy/cedar.ts turned off TurboFan's JS→Wasm call inlining, Node 20's V8 aborted here every few runs; the retry stays as a guard and is reported.) */
class ChildCrashed extends Error {}

/** Runs `p` unless the child exits first. */
function whileAlive<T>(child: ChildProcess, p: Promise<T>): Promise<T> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.reject(new ChildCrashed('the server is not running'));
  return Promise.race([
    p,
    once(child, 'exit').then(() => Promise.reject(new ChildCrashed('the server exited during the run'))),
  ]);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

async function json(url: string, token?: string): Promise<Record<string, unknown>> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return res.json();
}

/** Audit events of type policy_evaluation after `after`, counted from the stream. */
async function countEvaluations(url: string, token: string, after: number): Promise<{ count: number; last: number }> {
  const res = await fetch(`${url}/v1/audit/events?follow=false&type=policy_evaluation`, {
    headers: { authorization: `Bearer ${token}`, 'last-event-id': String(after) },
  });
  const text = await res.text();
  const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  return { count: ids.length, last: ids.at(-1) ?? after };
}

interface RunOptions {
  readonly label: string;
  readonly tokenCache: boolean;
  /** Cedar decisions remembered per policy version (the default); off: Cedar evaluates every request. */
  readonly decisionCache?: boolean;
  readonly fsync: boolean;
  readonly connections: number;
  /** Also measure the ledger's own anchor route on the same server. */
  readonly ledgerBaseline?: boolean;
}

async function run(o: RunOptions, issuer: string, tokens: { svc: string; analyst: string }): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await runOnce(o, issuer, tokens);
    } catch (e) {
      if (!(e instanceof ChildCrashed) || attempt === 3) throw e;
      note(`${e.message}; retrying the run (attempt ${attempt + 1})`);
    }
  }
}

/** The runs' data directories, removed when all runs are done (see ScratchDirs). */
const scratch = new ScratchDirs();

async function runOnce(o: RunOptions, issuer: string, tokens: { svc: string; analyst: string }): Promise<void> {
  const { label } = o;
  const dataDir = scratch.make('stele-bench-control-');
  const controlDir = join(dataDir, 'control');
  mkdirSync(join(controlDir, 'policy'), { recursive: true });
  writeFileSync(join(controlDir, 'policy', 'policies.cedar'), POLICIES);
  writeFileSync(join(controlDir, 'policy', 'entities.json'), JSON.stringify(ENTITIES));
  writeFileSync(
    join(controlDir, 'control.toml'),
    `[control.oidc]\nissuer = "${issuer}"\naudience = "${AUDIENCE}"\ntoken_cache_size = ${o.tokenCache ? 10_000 : 0}\n\n[control.policy]\ndecision_cache_size = ${o.decisionCache === false ? 0 : 10_000}\n\n[control.audit]\nfsync = ${o.fsync}\n`,
  );
  const { url, child } = await startControlServer(dataDir, o.fsync);
  try {
    const body = JSON.stringify({
      principal: 'User::"alice"',
      action: 'Action::"read"',
      resource: 'Document::"q3-report"',
      context: { ip: '10.1.2.3' },
    });
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${tokens.svc}` };
    // Warm up: discovery, JWKS fetch and cache, Cedar, JIT.
    const alive = <T>(p: Promise<T>) => whileAlive(child, p);
    await alive(
      autocannon({ url: `${url}/v1/policy/evaluate`, method: 'POST', body, headers, connections: 8, duration: 2 }),
    );
    const ledgerBefore = (await alive(json(`${url}/api/ledger/checkpoint`))).lifetimeEntries as number;
    const auditBefore = await alive(countEvaluations(url, tokens.analyst, 0));

    const cpuBefore = serverCpu(child.pid);
    const r = await alive(
      autocannon({
        url: `${url}/v1/policy/evaluate`,
        method: 'POST',
        body,
        headers,
        connections: o.connections,
        duration: DURATION_S,
      }),
    );
    const cpuAfter = serverCpu(child.pid);
    await new Promise((res) => setTimeout(res, 500));
    const ledgerAfter = (await alive(json(`${url}/api/ledger/checkpoint`))).lifetimeEntries as number;
    const auditAfter = await alive(countEvaluations(url, tokens.analyst, auditBefore.last));
    // Printed only once the whole run has succeeded (a crashed run is retried).
    const figures: [string, number, string][] = [];
    const figure = (name: string, value: number, unit: string) => figures.push([name, value, unit]);
    /** Server CPU per answered request: the main thread, and all threads. */
    const cpuFigures = (
      name: string,
      before: ServerCpu | undefined,
      after: ServerCpu | undefined,
      answered: number,
      unit: string,
    ) => {
      if (!before || !after || answered === 0) return;
      figure(`${name}_main${label}`, ((after.main - before.main) * 1000) / answered, unit);
      figure(`${name}_all${label}`, ((after.all - before.all) * 1000) / answered, unit);
    };

    figure(`control_evaluate_rps${label}`, r.requests.average, 'req/s');
    figure(`control_evaluate_p50${label}`, r.latency.p50, 'ms');
    figure(`control_evaluate_p99${label}`, r.latency.p99, 'ms');
    figure(`control_evaluate_errors${label}`, r.errors + r.non2xx, 'requests');
    figure(`control_evaluate_answered${label}`, r['2xx'], 'decisions');
    // autocannon stops at the deadline with requests in flight; those are anchored too.
    figure(`control_evaluate_anchored${label}`, ledgerAfter - ledgerBefore, 'ledger entries');
    figure(`control_evaluate_audited${label}`, auditAfter.count, 'audit events');
    // CPU time is steadier than req/s on a shared machine: it says what each decision costs.
    cpuFigures('control_evaluate_cpu', cpuBefore, cpuAfter, r['2xx'], 'µs/decision');
    if (o.ledgerBaseline) {
      let i = 0;
      const before = serverCpu(child.pid);
      const a = await alive(
        autocannon({
          url: `${url}/api/ledger/anchor`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          connections: o.connections,
          duration: DURATION_S,
          requests: [
            {
              setupRequest: (req: Record<string, unknown>) => ({
                ...req,
                body: JSON.stringify({ digest: (i++).toString(16).padStart(64, '0') }),
              }),
            },
          ],
        }),
      );
      figure(`ledger_anchor_rps${label}`, a.requests.average, 'req/s');
      figure(`ledger_anchor_p50${label}`, a.latency.p50, 'ms');
      figure(`ledger_anchor_p99${label}`, a.latency.p99, 'ms');
      cpuFigures('ledger_anchor_cpu', before, serverCpu(child.pid), a['2xx'], 'µs/anchor');
    }
    for (const [name, value, unit] of figures) printFigure(name, value, unit);
  } finally {
    await stop(child);
  }
}

export default async function main(): Promise<void> {
  const idp = await startOidcProvider({
    clients: {
      svc: { claims: { roles: ['service'] }, ttl: 3600 },
      analyst: { claims: { roles: ['analyst'], amr: ['hwk'] }, ttl: 3600 },
    },
    defaultResource: AUDIENCE,
    alg: 'ES256',
  });
  // This shared machine's speed varies by up to 1.5x from one run to another (a whole
  // benchmark moves with it): the hashing rate before and after says how fast it ran.
  const gauge = (when: string) =>
    printFigure(`machine_sha256_x3_rate_${when}`, Math.round(sha256x3Rate(sha256, 1000).wall), 'entries/s');
  note(`load average at start ${loadavg()[0]!.toFixed(2)}`);
  gauge('at_start');
  try {
    const tokens = { svc: await idp.token('svc'), analyst: await idp.token('analyst') };
    note(
      `POST /v1/policy/evaluate, ${DURATION_S} s per run, ES256 access tokens from oidc-provider (JWKS fetched once, then cached), batch interval ${BATCH_INTERVAL_MS} ms`,
    );
    note(
      'every answered decision is a ledger entry (policy_evaluation) in a published checkpoint and a signed audit event',
    );
    if (RUNS.has(1)) {
      note(
        `1. durable (ledger and audit fsync on), ${CONNECTIONS} connections; then the ledger's own POST /api/ledger/anchor on the same server for comparison`,
      );
      await run(
        { label: '', tokenCache: true, fsync: true, connections: CONNECTIONS, ledgerBaseline: true },
        idp.issuer,
        tokens,
      );
    }
    if (RUNS.has(2)) {
      note('2. durable, verified-token cache off (each request verifies the JWT signature with jose)');
      await run(
        { label: '_no_token_cache', tokenCache: false, fsync: true, connections: CONNECTIONS },
        idp.issuer,
        tokens,
      );
    }
    if (RUNS.has(5)) {
      note(
        '5. durable, decision cache off (Cedar evaluates every request; the benchmark repeats one request, which the cache otherwise answers)',
      );
      await run(
        { label: '_no_decision_cache', tokenCache: true, decisionCache: false, fsync: true, connections: CONNECTIONS },
        idp.issuer,
        tokens,
      );
    }
    if (RUNS.has(3)) {
      note('3. durable, 256 connections (more decisions per ledger batch)');
      await run({ label: '_256c', tokenCache: true, fsync: true, connections: 256 }, idp.issuer, tokens);
    }
    if (RUNS.has(4)) {
      note(`4. fsync off (ledger I/O out of the way: the control plane's own cost), ${CONNECTIONS} connections`);
      await run(
        { label: '_nofsync', tokenCache: true, fsync: false, connections: CONNECTIONS, ledgerBaseline: true },
        idp.issuer,
        tokens,
      );
    }
  } finally {
    await idp.close();
    scratch.removeAll();
  }
  gauge('at_end');
}
