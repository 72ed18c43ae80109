// `stele dev-idp …`: a development OpenID Provider so the enterprise control plane runs on one
// machine. `serve` starts it on loopback (never anything else), points the data directory's
// control.toml at it if none exists, and keeps its issuer and client secret in
// <data-dir>/dev-idp.json (0600); `token --role admin|analyst|service` asks it for an access
// token and prints only the token, on stdout. The client secret is never printed.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { parse as parseToml } from 'smol-toml';
import { SERVE_DEFAULTS } from '../../src/serve/config.js';
import { DEV_ROLES, DevIdpError, type DevRole, requestToken, startDevIdp } from '../../src/control/dev-idp.js';
import { createSecretFile, replaceFile } from '../../src/store/files.js';
import { CliError, EXIT } from '../errors.js';
import { invocation } from '../invocation.js';
import { closeOnSignal } from '../lifecycle.js';
import { stderrLogger } from '../logger.js';
import { isQuiet } from '../verbosity.js';

const DEFAULT_PORT = 8090;
const DEFAULT_AUDIENCE = 'https://stele.localhost/v1';
const STATE_FILE = 'dev-idp.json';
const ROLES = Object.keys(DEV_ROLES) as DevRole[];

/** What `token` needs from a running `serve`: kept 0600 in the data directory. */
interface DevIdpState {
  readonly issuer: string;
  readonly audience: string;
  readonly secret: string;
}

const out = (s: string) => process.stdout.write(`${s}\n`);
const dataDirOf = (o: { dataDir?: string }) => o.dataDir ?? process.env.STELE_DATA_DIR ?? SERVE_DEFAULTS.dataDir;

function int(v: string | undefined, name: string, min: number, max: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new CliError(EXIT.USAGE, `${name} must be ${min}–${max}`);
  return n;
}

/**
 * Points <data-dir>/control/control.toml at the issuer: writes one if there is none; leaves
 * an existing one alone and says whether it already names this issuer and audience.
 */
async function controlConfig(
  dataDir: string,
  issuer: string,
  audience: string,
): Promise<{ path: string; status: 'written' | 'matches' | 'differs' }> {
  const dir = join(dataDir, 'control');
  const path = join(dir, 'control.toml');
  const toml = `# Written by stele dev-idp serve: a development issuer on loopback. Replace it with your IdP.\n[control.oidc]\nissuer = ${JSON.stringify(issuer)}\naudience = ${JSON.stringify(audience)}\n`;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (await createSecretFile(path, toml)) return { path, status: 'written' };
  let oidc: { issuer?: unknown; audience?: unknown } | undefined;
  try {
    oidc = (parseToml(readFileSync(path, 'utf8')) as { control?: { oidc?: typeof oidc } }).control?.oidc;
  } catch {
    oidc = undefined;
  }
  const audiences = Array.isArray(oidc?.audience) ? oidc.audience : [oidc?.audience];
  return { path, status: oidc?.issuer === issuer && audiences.includes(audience) ? 'matches' : 'differs' };
}

function readState(dataDir: string): DevIdpState {
  const path = join(dataDir, STATE_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new CliError(
      EXIT.USAGE,
      `no development identity provider for ${dataDir} (${path} is missing): start one with \`${invocation()} dev-idp serve --data-dir ${dataDir}\``,
    );
  }
  try {
    const s = JSON.parse(text) as DevIdpState;
    if (typeof s.issuer === 'string' && typeof s.audience === 'string' && typeof s.secret === 'string') return s;
  } catch {
    // reported below
  }
  throw new CliError(EXIT.USAGE, `${path} is not a dev-idp state file: start \`${invocation()} dev-idp serve\` again`);
}

export function registerDevIdpCommands(program: Command): void {
  const devIdp = program
    .command('dev-idp')
    .description(
      'a development OpenID Provider on loopback for `serve --enterprise`, and access tokens for its three roles',
    )
    .addHelpText(
      'after',
      `
For one machine only: anyone who can read <data-dir>/dev-idp.json gets an admin token.

Examples:
  stele dev-idp serve                        issuer on http://127.0.0.1:${DEFAULT_PORT}; writes .stele/control/control.toml if absent
  stele serve --enterprise                   the control plane trusts that issuer
  export STELE_CONTROL_TOKEN="$(stele dev-idp token --role service)"

Roles: admin (keys.rotate, audit.read, …) and analyst (audit.read) carry phishing-resistant
MFA (amr hwk); service (policy.evaluate, access.lease) needs none.

Exit codes: 0 success; 2 usage (a non-loopback --host, an unknown role, no dev-idp for the
data directory); 3 the port is in use or the dev-idp does not answer.`,
    );
  devIdpServe(devIdp);
  devIdpToken(devIdp);
}

function devIdpServe(devIdp: Command): void {
  devIdp
    .command('serve')
    .description('start the development identity provider on loopback (until SIGTERM/SIGINT)')
    .option('--data-dir <dir>', `data directory of the log (env STELE_DATA_DIR; default ${SERVE_DEFAULTS.dataDir})`)
    .option('--host <host>', 'loopback address to listen on: 127.0.0.1, ::1 or localhost', '127.0.0.1')
    .option('--port <port>', `port (0: any free one; default ${DEFAULT_PORT})`)
    .option('--audience <uri>', `the control plane's audience (default ${DEFAULT_AUDIENCE})`, DEFAULT_AUDIENCE)
    .option('--ttl <seconds>', 'access-token lifetime (60–86400; default 3600)')
    .option('--json', 'print one JSON line {issuer, audience, controlConfig, roles} when ready')
    .action(
      async (o: { dataDir?: string; host: string; port?: string; audience: string; ttl?: string; json?: boolean }) => {
        const dataDir = dataDirOf(o);
        const port = int(o.port, '--port', 0, 65535) ?? DEFAULT_PORT;
        const ttl = int(o.ttl, '--ttl', 60, 86_400) ?? 3600;
        try {
          if (new URL(o.audience).hash !== '') throw new Error('fragment');
        } catch {
          throw new CliError(EXIT.USAGE, '--audience must be an absolute URI without a fragment');
        }
        const clients = Object.fromEntries(ROLES.map((r) => [r, { claims: DEV_ROLES[r], ttl }]));
        const idp = await startDevIdp({ clients, defaultResource: o.audience, host: o.host, port }).catch(
          (e: unknown) => {
            if (e instanceof DevIdpError) throw new CliError(EXIT.USAGE, e.message);
            if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE')
              throw new CliError(EXIT.IO, `${o.host}:${port} is already in use (another dev-idp?): --port <port>`);
            throw e;
          },
        );
        mkdirSync(dataDir, { recursive: true, mode: 0o700 });
        const state: DevIdpState = { issuer: idp.issuer, audience: o.audience, secret: idp.secret };
        await replaceFile(join(dataDir, STATE_FILE), `${JSON.stringify(state)}\n`);
        const cfg = await controlConfig(dataDir, idp.issuer, o.audience);
        const closed = closeOnSignal(idp, await stderrLogger('info'), 'dev-idp shutting down');
        if (o.json)
          out(JSON.stringify({ issuer: idp.issuer, audience: o.audience, controlConfig: cfg, roles: ROLES, dataDir }));
        else if (!isQuiet()) {
          const cli = invocation();
          out(`stele dev-idp: development OIDC issuer at ${idp.issuer} (loopback only; never for production)`);
          out(`  audience  ${o.audience}; roles ${ROLES.join(', ')}; tokens last ${ttl} s`);
          if (cfg.status === 'differs')
            out(
              `  ${cfg.path} names another issuer: set [control.oidc] issuer = "${idp.issuer}" and audience = "${o.audience}"`,
            );
          else out(`  ${cfg.path} ${cfg.status === 'written' ? 'written: it trusts' : 'already trusts'} this issuer`);
          out(`  next      ${cli} serve --enterprise${o.dataDir ? ` --data-dir ${dataDir}` : ''}`);
          out(
            `  token     export STELE_CONTROL_TOKEN="$(${cli} dev-idp token --role service${o.dataDir ? ` --data-dir ${dataDir}` : ''})"`,
          );
        }
        if (existsSync(join(dataDir, 'control', 'control.key')) && cfg.status === 'written')
          process.stderr.write('stele: restart `serve --enterprise` so it reads the new control.toml\n');
        await closed;
      },
    );
}

function devIdpToken(devIdp: Command): void {
  devIdp
    .command('token')
    .description('print an access token for a role from the running dev-idp (stdout only)')
    .requiredOption('--role <role>', `one of ${ROLES.join(', ')}`)
    .option('--data-dir <dir>', `data directory the dev-idp was started with (default ${SERVE_DEFAULTS.dataDir})`)
    .option('--json', 'print {access_token, token_type, expires_in, role, issuer}')
    .action(async (o: { role: string; dataDir?: string; json?: boolean }) => {
      if (!(ROLES as string[]).includes(o.role))
        throw new CliError(EXIT.USAGE, `--role must be one of ${ROLES.join(', ')}, not ${JSON.stringify(o.role)}`);
      const state = readState(dataDirOf(o));
      let token: { accessToken: string; expiresIn: number };
      try {
        token = await requestToken(state.issuer, o.role, state.secret, state.audience);
      } catch (e) {
        if (e instanceof DevIdpError) throw new CliError(EXIT.IO, e.message);
        throw new CliError(
          EXIT.IO,
          `the dev-idp at ${state.issuer} does not answer (${(e as Error).message}): is \`${invocation()} dev-idp serve\` running?`,
        );
      }
      if (o.json)
        out(
          JSON.stringify({
            access_token: token.accessToken,
            token_type: 'Bearer',
            expires_in: token.expiresIn,
            role: o.role,
            issuer: state.issuer,
          }),
        );
      else out(token.accessToken);
    });
}
