import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { startOidcProvider } from './test/helpers/oidc.js';
const AUD = 'https://a.test/v1';
const idp = await startOidcProvider({ clients: { svc: { claims: { roles: ['service'] }, ttl: 3600 } }, defaultResource: AUD });
const tok = await idp.token('svc');
const CHILD = `
import { pino } from 'pino';
import { SERVE_DEFAULTS } from '${new URL('./src/config.ts', import.meta.url).href}';
import { startServer } from '${new URL('./src/serve.ts', import.meta.url).href}';
const e = process.env;
const srv = await startServer({ ...SERVE_DEFAULTS, dataDir: e.BENCH_DATA_DIR, origin: 'bench.stele/control', port: 0, batchIntervalMs: 2, fsync: true, enterprise: true }, pino({ level: 'warn' }, pino.destination(2)));
console.log(JSON.stringify({ url: srv.url }));
process.on('SIGTERM', () => srv.close().then(() => process.exit(0)));
`;
const POLICIES = `
@id("staff-read-eng") permit (principal in Group::"staff", action == Action::"read", resource) when { resource.dept == "eng" };
@id("deny-contractors") forbid (principal in Group::"contractors", action, resource);
`;
const ENTITIES = [
  { uid: { type: 'Group', id: 'staff' }, attrs: {}, parents: [] },
  { uid: { type: 'Group', id: 'contractors' }, attrs: {}, parents: [] },
  { uid: { type: 'User', id: 'alice' }, attrs: {}, parents: [{ type: 'Group', id: 'staff' }] },
  { uid: { type: 'Document', id: 'q3-report' }, attrs: { dept: 'eng' }, parents: [] },
];
for (let round = 0; round < Number(process.env.ROUNDS ?? 8); round++) {
  const dataDir = mkdtempSync(join(tmpdir(), 'repro-'));
  mkdirSync(join(dataDir, 'control', 'policy'), { recursive: true });
  writeFileSync(join(dataDir, 'control', 'policy', 'policies.cedar'), POLICIES);
  writeFileSync(join(dataDir, 'control', 'policy', 'entities.json'), JSON.stringify(ENTITIES));
  writeFileSync(join(dataDir, 'control', 'control.toml'), `[control.oidc]\nissuer = "${idp.issuer}"\naudience = "${AUD}"\n`);
  const child = spawn(process.execPath, [...(process.env.NARGS ? process.env.NARGS.split(' ') : []), '--import', 'tsx', '--input-type=module', '-e', CHILD], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, BENCH_DATA_DIR: dataDir } });
  const trace = createWriteStream(`/tmp/trace-${round}.txt`);
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const exited = once(child, 'exit');
  const url: string = await new Promise((resolve) => {
    let buf = '';
    child.stdout!.on('data', (d) => { trace.write(d); buf += d; const m = /\{"url":"([^"]+)"\}/.exec(buf); if (m) { resolve(m[1]!); buf = ''; } });
  });
  let i = 0;
  const r = await Promise.race([autocannon({ url: url + '/api/ledger/anchor', method: 'POST', headers: { 'content-type': 'application/json' }, requests: [{ setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ digest: (i++).toString(16).padStart(64, '0') }) }) }], connections: round % 2 ? 256 : 64, duration: 6 }), exited.then(() => null)]);
  if (r === null) { console.log('round', round, 'CRASHED; trace in', `/tmp/trace-${round}.txt`); break; }
  console.log('round', round, 'ok', r.requests.average);
  child.kill('SIGTERM'); await exited;
}
await idp.close();
