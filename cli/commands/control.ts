// `stele control …`: the enterprise control plane. `serve` runs the ledger with /v1 mounted
// (the same as `stele serve --enterprise`); the other commands are clients of /v1, except
// `unwrap`, which opens the demo KEKs in the local data directory.
//
// Client settings: --endpoint (env STELE_CONTROL_ENDPOINT, default http://127.0.0.1:8080);
// the access token from --token-file or env STELE_CONTROL_TOKEN (--token works but leaves
// the token in the shell history and the process list).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { SERVE_DEFAULTS, resolveServeConfig } from '../../src/serve/config.js';
import { ConfigError } from '../../src/settings/errors.js';
import type { AuditEvent } from '../../src/control/audit.js';
import { ControlClient, ControlClientError } from '../../src/control/client.js';
import { ControlConfigError } from '../../src/control/config.js';
// epochs, leases and kek load the AWS KMS client: only `unwrap` and `epochs` import them, when they run.
import type { EpochRecord } from '../../src/control/epochs.js';
import { AUDIT_DOMAIN, recordDigest, verifySigned } from '../../src/control/signing.js';
import { hashFromHex, leafHash } from '../../src/core/hash.js';
import { checkInclusion } from '../../src/core/verify/index.js';
import { KeyFileError } from '../../src/keys/local-signer.js';
import { CliError, EXIT } from '../errors.js';
import { closeOnSignal } from '../lifecycle.js';
import { logLevelOption, stderrLogger } from '../logger.js';
import { addServeOptions } from './serve-options.js';

interface ClientOptions {
  endpoint?: string;
  token?: string;
  tokenFile?: string;
  json?: boolean;
}

const out = (s: string) => process.stdout.write(`${s}\n`);
const emit = (v: unknown) => out(JSON.stringify(v, null, 2));

function clientOptions(cmd: Command): Command {
  return cmd
    .option('--endpoint <url>', 'control-plane base URL (env STELE_CONTROL_ENDPOINT; default http://127.0.0.1:8080)')
    .option('--token-file <file>', 'file holding the OIDC access token (else env STELE_CONTROL_TOKEN)')
    .option('--token <token>', 'the access token itself (visible to other local users; prefer --token-file)')
    .option('--json', 'print the JSON response');
}

function client(o: ClientOptions): ControlClient {
  const endpoint = o.endpoint ?? process.env.STELE_CONTROL_ENDPOINT ?? 'http://127.0.0.1:8080';
  let token = o.token;
  if (!token && o.tokenFile) {
    try {
      token = readFileSync(o.tokenFile, 'utf8').trim();
    } catch (e) {
      throw new CliError(EXIT.USAGE, `cannot read ${o.tokenFile}: ${(e as Error).message}`);
    }
  }
  token ??= process.env.STELE_CONTROL_TOKEN;
  if (!token)
    throw new CliError(EXIT.USAGE, 'an access token is needed: --token-file <file> or env STELE_CONTROL_TOKEN');
  try {
    new URL(endpoint);
  } catch {
    throw new CliError(EXIT.USAGE, `--endpoint ${endpoint} is not a URL`);
  }
  return new ControlClient(endpoint, token);
}

/** HTTP errors: input and credential problems exit 2, server-side ones 3. */
async function calling<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof ControlClientError) {
      throw new CliError(e.status >= 500 ? EXIT.IO : EXIT.USAGE, `${e.status} ${e.code}: ${e.message}`);
    }
    throw e;
  }
}

function parseJsonOption(v: string | undefined, name: string): unknown {
  if (v === undefined) return undefined;
  try {
    return JSON.parse(v);
  } catch {
    throw new CliError(EXIT.USAGE, `${name} must be JSON`);
  }
}

/** `User::"alice"` stays a Cedar string; `{"type":…}` is parsed as JSON. */
const entityArg = (v: string, name: string): unknown => (v.trim().startsWith('{') ? parseJsonOption(v, name) : v);

export function registerControlCommands(program: Command): void {
  const control = program
    .command('control')
    .description(
      'the enterprise control plane: OIDC-authenticated leases, Cedar decisions, KEK epochs, signed audit stream',
    )
    .addHelpText(
      'after',
      `
Every decision is anchored in the ledger; responses name the ledger entry.
Client commands read the token from --token-file or STELE_CONTROL_TOKEN and the
endpoint from --endpoint or STELE_CONTROL_ENDPOINT.

Examples:
  stele control serve --data-dir .stele          (needs [control.oidc] in .stele/control/control.toml)
  stele control evaluate --principal 'User::"alice"' --action 'Action::"read"' --resource 'Document::"q3"'
  stele control lease --doc-id q3-report --compartment finance --ttl 600s
  stele control unwrap <wrapped_dek> --lease-id lse_…     (demo KEK only)
  stele control rotate --retire-before 2
  stele control epochs
  stele control audit --type access_decision --since 2025-01-01T00:00:00Z

Exit codes: 0 success (evaluate/lease: allowed); 1 denied, or a signature/chain check failed;
2 usage, input or credential error (HTTP 4xx); 3 network or server error.`,
    );
  controlServe(control);
  controlEvaluate(control);
  controlLease(control);
  controlUnwrap(control);
  controlRotate(control);
  controlEpochs(control);
  controlAudit(control);
}

function controlServe(control: Command): void {
  const serve = control
    .command('serve')
    .description('run the ledger with the control plane mounted at /v1 (same as `stele serve --enterprise`)')
    .option(
      '--data-dir <dir>',
      `data directory (env STELE_DATA_DIR; default ${SERVE_DEFAULTS.dataDir}); control state in <dir>/control`,
    )
    .option(
      '--control-config <file>',
      'control-plane TOML ([control] table; env STELE_CONTROL_CONFIG; default <data-dir>/control/control.toml)',
    );
  addServeOptions(serve, ['origin', 'host', 'port', 'batchInterval', 'mode', 'anchorTokens', 'demoWitnesses'])
    .option('--config <file>', 'TOML file with a [server] table')
    .addOption(logLevelOption())
    .option('--json', 'print one JSON line {url, origin, keyId, vkey, dataDir} when ready')
    .action(async (opts: Record<string, unknown>) => {
      const { batchInterval, json, logLevel, controlConfig, ...rest } = opts;
      if (typeof controlConfig === 'string') process.env.STELE_CONTROL_CONFIG = controlConfig;
      let cfg;
      try {
        cfg = resolveServeConfig({ ...rest, batchIntervalMs: batchInterval, enterprise: true });
      } catch (e) {
        if (e instanceof ConfigError) throw new CliError(EXIT.USAGE, e.message);
        throw e;
      }
      const log = await stderrLogger(String(logLevel));
      const { startServer } = await import('../../src/serve/log-server.js');
      const server = await startServer({ ...cfg, enterprise: true }, log).catch((e: unknown) => {
        if (e instanceof KeyFileError || e instanceof ConfigError || e instanceof ControlConfigError)
          throw new CliError(EXIT.USAGE, e.message);
        throw e;
      });
      const closed = closeOnSignal(server, log, 'shutting down');
      if (json)
        out(
          JSON.stringify({
            url: server.url,
            origin: server.origin,
            keyId: server.keyId,
            vkey: server.vkey,
            dataDir: server.dataDir,
          }),
        );
      else {
        out(`stele: serving ${server.origin} at ${server.url} with the control plane at ${server.url}/v1`);
        out(`  data dir  ${server.dataDir} (control state in ${join(server.dataDir, 'control')})`);
        out(`  key id    ${server.keyId}`);
        out(`  openapi   ${server.url}/v1/openapi.json`);
      }
      await closed;
    });
}

function controlEvaluate(control: Command): void {
  clientOptions(
    control
      .command('evaluate')
      .description('evaluate an access decision with the Cedar policies (POST /v1/policy/evaluate)')
      .requiredOption('--principal <entity>', 'principal: Cedar form User::"alice" or JSON {"type","id"}')
      .requiredOption('--action <entity>', 'action, e.g. Action::"read"')
      .requiredOption('--resource <entity>', 'resource, e.g. Document::"q3-report"')
      .option('--context <json>', 'Cedar context as a JSON object'),
  ).action(async (o: ClientOptions & { principal: string; action: string; resource: string; context?: string }) => {
    const c = client(o);
    const r = await calling(() =>
      c.evaluate({
        principal: entityArg(o.principal, '--principal'),
        action: entityArg(o.action, '--action'),
        resource: entityArg(o.resource, '--resource'),
        ...(o.context !== undefined ? { context: parseJsonOption(o.context, '--context') } : {}),
      }),
    );
    if (o.json) emit(r);
    else {
      out(`${String(r.decision).toUpperCase()}  ${r.decision_id}`);
      out(`  policy version  ${r.policy_version}`);
      out(`  reasons         ${(r.reasons as string[]).join(', ') || '(none: default deny)'}`);
      out(`  ledger entry    ${r.ledger_entry_id}`);
    }
    if (r.decision !== 'allow') process.exitCode = EXIT.VERIFY_FAILED;
  });
}

function controlLease(control: Command): void {
  clientOptions(
    control
      .command('lease')
      .description('request an access lease: a fresh DEK wrapped under the current KEK epoch (POST /v1/access/lease)')
      .requiredOption('--doc-id <id>', 'document identifier')
      .requiredOption('--compartment <name>', 'compartment')
      .option('--ttl <seconds>s', 'lease lifetime, e.g. 300s (server bounds apply)'),
  ).action(async (o: ClientOptions & { docId: string; compartment: string; ttl?: string }) => {
    const c = client(o);
    try {
      const r = await c.lease({ doc_id: o.docId, compartment: o.compartment, ...(o.ttl ? { ttl: o.ttl } : {}) });
      if (o.json) emit(r);
      else {
        out(`lease ${r.lease_id}`);
        out(`  wrapped_dek   ${r.wrapped_dek}`);
        out(`  expires       ${r.expires}`);
        out(`  epoch         ${r.epoch} (${r.kek_id})`);
        out(`  decision      ${r.decision_id} under ${r.policy_version}`);
        out(`  ledger entry  ${r.ledger_entry_id}`);
      }
    } catch (e) {
      if (e instanceof ControlClientError && e.code === 'access_denied') {
        const err = (e.body as { error: Record<string, unknown> }).error;
        if (o.json) emit(e.body);
        else out(`DENIED  ${err.decision_id}: ${e.message} (ledger entry ${err.ledger_entry_id})`);
        process.exitCode = EXIT.VERIFY_FAILED;
        return;
      }
      await calling(() => Promise.reject(e));
    }
  });
}

function controlUnwrap(control: Command): void {
  control
    .command('unwrap')
    .description("unwrap a lease's DEK with its epoch's demo KEK from the local data directory (testing only)")
    .argument('<wrapped_dek>', 'the wrapped_dek of the lease')
    .requiredOption('--lease-id <id>', 'the lease id the DEK is bound to')
    .option('--data-dir <dir>', `data directory (env STELE_DATA_DIR; default ${SERVE_DEFAULTS.dataDir})`)
    .option('--allow-expired', 'unwrap even if the lease has expired')
    .option('--json', 'print {dek, epoch, expires} as JSON')
    .action(
      async (wrapped: string, o: { leaseId: string; dataDir?: string; allowExpired?: boolean; json?: boolean }) => {
        const dir = join(o.dataDir ?? process.env.STELE_DATA_DIR ?? SERVE_DEFAULTS.dataDir, 'control');
        if (!existsSync(join(dir, 'control.key')))
          throw new CliError(EXIT.USAGE, `${dir} holds no control-plane state (no control.key)`);
        const { KekError } = await import('../../src/keys/kek.js');
        let result;
        try {
          const { openControlState } = await import('../../src/control/mount.js');
          const { KeyEpochs } = await import('../../src/control/epochs.js');
          const { unwrapLease } = await import('../../src/control/leases.js');
          const state = await openControlState(dir, process.env);
          if (state.kek.kind !== 'local')
            throw new CliError(
              EXIT.USAGE,
              'unwrap works with the local demo KEK only; with AWS KMS, call KMS Decrypt with the lease encryption context',
            );
          const epochs = await KeyEpochs.readOnly(
            state.epochStore,
            state.signer,
            state.kek,
            await stderrLogger('silent'),
          );
          result = await unwrapLease(epochs, o.leaseId, wrapped, { allowExpired: o.allowExpired === true });
        } catch (e) {
          if (e instanceof KekError) throw new CliError(EXIT.VERIFY_FAILED, `unwrap failed (${e.code}): ${e.message}`);
          if (e instanceof ControlConfigError || e instanceof KeyFileError) throw new CliError(EXIT.USAGE, e.message);
          throw e;
        }
        const dek = Buffer.from(result.dek).toString('hex');
        if (o.json) emit({ dek, epoch: result.epoch, expires: result.expires.toISOString() });
        else out(`${dek}  (epoch ${result.epoch}, lease expires ${result.expires.toISOString()})`);
      },
    );
}

function controlRotate(control: Command): void {
  clientOptions(
    control
      .command('rotate')
      .description('start a new KEK epoch (admin with phishing-resistant MFA; POST /v1/keys/rotate)')
      .option(
        '--retire-before <epoch>',
        'retire every active epoch numbered below this (their leases stop unwrapping)',
      ),
  ).action(async (o: ClientOptions & { retireBefore?: string }) => {
    const c = client(o);
    const rb = o.retireBefore === undefined ? undefined : Number(o.retireBefore);
    if (rb !== undefined && !Number.isSafeInteger(rb))
      throw new CliError(EXIT.USAGE, '--retire-before must be an integer');
    const r = await calling(() => c.rotate(rb === undefined ? {} : { retire_before: rb }));
    if (o.json) emit(r);
    else {
      const e = r.epoch as Record<string, unknown>;
      out(`epoch ${e.epoch} started: ${e.kek_id}`);
      if (Array.isArray(e.retires)) out(`  retired epochs  ${e.retires.join(', ')}`);
      out(`  record hash     ${e.record_hash}`);
      out(`  ledger entry    ${r.ledger_entry_id}`);
    }
  });
}

function controlEpochs(control: Command): void {
  clientOptions(
    control
      .command('epochs')
      .description('list the signed KEK epochs and verify the chain (signatures, hash links) and each ledger anchor')
      .option('--ledger <url>', 'ledger base URL for the anchor check (default: the endpoint)')
      .option('--no-anchors', 'skip checking the ledger entries'),
  ).action(async (o: ClientOptions & { ledger?: string; anchors: boolean }) => {
    const c = client(o);
    const r = await calling(() => c.epochs());
    const signer = r.signer as { key_id: string; public_key: string; name: string };
    const epochs = r.epochs as (EpochRecord & {
      record_hash: string;
      ledger_entry_id: string | null;
      status: string;
    })[];
    const { verifyEpochChain } = await import('../../src/control/epochs.js');
    const problems = verifyEpochChain(epochs, new Uint8Array(Buffer.from(signer.public_key, 'base64')));
    if (o.anchors) {
      const ledger = (o.ledger ?? c.base).replace(/\/+$/, '');
      for (const e of epochs) {
        if (!e.ledger_entry_id) {
          problems.push(`epoch ${e.epoch}: not anchored yet`);
          continue;
        }
        const p = await checkAnchor(ledger, e.ledger_entry_id, e.record_hash);
        if (p) problems.push(`epoch ${e.epoch}: ${p}`);
      }
    }
    if (o.json) emit({ ...r, verified: problems.length === 0, problems });
    else {
      out(`signer ${signer.name} key ${signer.key_id}`);
      for (const e of epochs) {
        out(
          `epoch ${e.epoch}  ${e.status.padEnd(7)}  ${e.created}  ${e.kek_id}  by ${e.created_by}${e.retires ? `  retires ${e.retires.join(',')}` : ''}  ${e.ledger_entry_id ?? '(unanchored)'}`,
        );
      }
      out(
        problems.length === 0
          ? `PASS  chain of ${epochs.length} signed records${o.anchors ? ', each anchored in the ledger' : ''}`
          : problems.map((p) => `FAIL  ${p}`).join('\n'),
      );
    }
    if (problems.length > 0) process.exitCode = EXIT.VERIFY_FAILED;
  });
}

function controlAudit(control: Command): void {
  clientOptions(
    control
      .command('audit')
      .description('follow the signed audit stream (GET /v1/audit/events), verifying every event signature')
      .option(
        '--type <types>',
        'comma-separated event types (policy_evaluation, access_decision, key_epoch, authentication_failure)',
      )
      .option('--since <time>', 'events at or after this ISO 8601 time')
      .option('--until <time>', 'events before this ISO 8601 time')
      .option('--last-event-id <id>', 'resume after this event id')
      .option('--follow', 'keep following new events as they are recorded (the default)')
      .option('--no-follow', 'stop after the stored events')
      .option('--signer-key <base64>', 'pin the control plane public key (default: fetched from /v1/keys/epochs)'),
  ).action(
    async (
      o: ClientOptions & {
        type?: string;
        since?: string;
        until?: string;
        lastEventId?: string;
        follow: boolean;
        signerKey?: string;
      },
    ) => {
      const c = client(o);
      const keyB64 = o.signerKey ?? (await calling(() => c.epochs())).signer;
      const publicKey = new Uint8Array(
        Buffer.from(typeof keyB64 === 'string' ? keyB64 : (keyB64 as { public_key: string }).public_key, 'base64'),
      );
      if (publicKey.length !== 32)
        throw new CliError(EXIT.USAGE, '--signer-key must be a base64 32-byte Ed25519 public key');
      let failed = 0;
      await calling(async () => {
        for await (const m of c.events({
          ...(o.type ? { type: o.type } : {}),
          ...(o.since ? { since: o.since } : {}),
          ...(o.until ? { until: o.until } : {}),
          ...(o.lastEventId ? { lastEventId: o.lastEventId } : {}),
          follow: o.follow,
        })) {
          const ev = JSON.parse(m.data) as AuditEvent;
          const ok =
            verifySigned(AUDIT_DOMAIN, ev as unknown as Record<string, unknown>, publicKey) &&
            recordDigest(ev.record) === ev.digest;
          if (!ok) failed++;
          if (o.json) out(JSON.stringify({ ...ev, verified: ok }));
          else {
            const rec = ev.record as Record<string, unknown>;
            const what = rec.decision ?? rec.reason ?? (rec.epoch !== undefined ? `epoch ${rec.epoch}` : '');
            const who = (rec.actor as { sub?: string } | undefined)?.sub ?? rec.remote_address ?? rec.created_by ?? '';
            out(`${ok ? 'ok  ' : 'FAIL'} #${ev.id} ${ev.time} ${ev.type} ${what} ${who} ${ev.ledger_entry_id}`);
          }
        }
      });
      if (failed > 0) {
        process.stderr.write(`stele: ${failed} event(s) failed signature or digest verification\n`);
        process.exitCode = EXIT.VERIFY_FAILED;
      }
    },
  );
}

/** Checks that ledger entry `id` holds `digest` and that its inclusion proof reconstructs the root it names. */
async function checkAnchor(ledger: string, id: string, digest: string): Promise<string | null> {
  let res: Response;
  try {
    res = await fetch(`${ledger}/api/ledger/entry?id=${encodeURIComponent(id)}`, {
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    throw new CliError(EXIT.IO, `ledger ${ledger} unreachable: ${(e as Error).message}`);
  }
  if (!res.ok) return `ledger entry ${id} not found (HTTP ${res.status})`;
  const r = (await res.json()) as {
    leafIndex: number;
    treeSize: number;
    rootHash: string;
    auditPath: string[];
    entry: { digest: string; proof: { entryHash: string } };
  };
  if (r.entry.digest !== digest) return `ledger entry ${id} holds digest ${r.entry.digest}, not the record hash`;
  const included = checkInclusion(
    r.leafIndex,
    r.treeSize,
    leafHash(hashFromHex(r.entry.proof.entryHash)),
    r.auditPath.map(hashFromHex),
    { size: r.treeSize, root: hashFromHex(r.rootHash) },
  );
  return included.ok ? null : `inclusion proof of ${id} does not verify: ${included.detail}`;
}
