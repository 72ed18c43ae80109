// `stele ledger audit <dir|url>`: recompute the whole log from its records and check it.
import type { Command } from 'commander';
import { auditLog } from '../../../src/read/audit.js';
import { ClientConfigError, UsageError } from '../../../src/client/errors.js';
import { openObjectSource } from '../../../src/client/objects.js';
import { NOT_WITNESSED, type ProveConsistency, type Trust, isTransportError } from '../../../src/client/rules.js';
import { ApiView } from '../../../src/client/views.js';
import { EMPTY_ROOT } from '../../../src/core/hash.js';
import { SIG_ED25519, keyIdOf, parseVkey } from '../../../src/core/note.js';
import { EXIT } from '../../errors.js';
import { type CommonOptions, common, dim, emitJson, green, intArg, openSession, out, progress, red } from './common.js';

interface AuditOptions extends CommonOptions {
  vkey?: string;
  window?: number;
}

export function registerAudit(ledger: Command): void {
  common(
    ledger
      .command('audit')
      .description(
        'recompute everything from the records: every entry hash along the chain, every leaf, every hash tile and the root; check the checkpoint signature, cosignatures and the pin',
      )
      .argument('<dir|url>', 'a mirror directory or the URL the tiles are served from')
      .option(
        '--vkey <vkey>',
        'audit against this log key instead of the configured pin (no pinned checkpoint or witnesses)',
      )
      .option('--window <n>', 'bundles read ahead (default 8 for a directory, 32 for a URL)', intArg('--window', 1)),
  ).action(async (where: string, opts: AuditOptions) => {
    let trust: Trust;
    let proveToPin: ProveConsistency | null = null;
    if (opts.vkey) {
      let v;
      try {
        v = parseVkey(opts.vkey);
      } catch (e) {
        throw new UsageError(`--vkey: ${(e as Error).message}`);
      }
      if (v.type !== SIG_ED25519) throw new UsageError('--vkey must be an Ed25519 (type 0x01) log key');
      trust = {
        origin: v.name,
        keyId: keyIdOf(v.publicKey),
        log: v,
        witnesses: [],
        quorum: NOT_WITNESSED,
        pin: { size: 0, root: EMPTY_ROOT },
      };
    } else {
      // The endpoint, if configured, is asked only to prove a copy older than the pin (rule 2).
      const o = await openSession(opts, { requireOnline: false }).catch((e) => {
        if (e instanceof ClientConfigError) throw new ClientConfigError(`${e.message} (or pass --vkey <vkey>)`);
        throw e;
      });
      trust = o.session.trust;
      if (o.api) proveToPin = new ApiView(o.api).prove;
    }
    const source = await openObjectSource(where);
    const bar = progress('auditing', opts.json, 'entries');
    const r = await auditLog({
      source,
      trust,
      window: opts.window ?? (/^https?:/i.test(where) ? 32 : 8),
      proveToPin,
      isTransportError,
      onProgress: (d, t) => bar.update(d, t),
    }).finally(() => bar.stop());
    if (opts.json) {
      emitJson({
        result: r.ok ? 'PASS' : 'FAIL',
        complete: r.pin.status !== 'SKIP',
        source: where,
        ...r,
        requests: source.stats.requests,
        bytes: source.stats.bytes,
      });
    } else {
      const mark = (ok: boolean) => (ok ? green('PASS') : red('FAIL'));
      out(`Audit of ${r.origin} at ${where}: tree size ${r.treeSize}`);
      out(`  ${mark(r.signature.ok)}  checkpoint signature: ${r.signature.detail}`);
      // Rule 5's own status: SKIP ("not witnessed") as `ledger verify` prints it, never a PASS.
      const witnessBadge = r.witnesses.status === 'SKIP' ? dim('SKIP') : mark(r.witnesses.ok);
      out(`  ${witnessBadge}  witnesses: ${r.witnesses.detail}`);
      out(`  ${mark(r.tree.ok)}  tree: ${r.tree.detail}`);
      out(`  ${r.pin.status === 'SKIP' ? dim('SKIP') : mark(r.pin.ok)}  pinned checkpoint: ${r.pin.detail}`);
      if (r.failure)
        out(`  first bad object: ${r.failure.object}${r.failure.seq !== undefined ? ` (entry ${r.failure.seq})` : ''}`);
      out(
        `  ${r.entriesChecked} entries, ${r.bundlesChecked} bundles, ${r.hashTilesChecked} hash tiles in ${(r.elapsedMs / 1000).toFixed(1)} s`,
      );
      const notChecked = r.pin.status === 'SKIP' ? ` (pin not checked: ${r.pin.reason ?? r.pin.detail})` : '';
      out(
        r.ok
          ? `Result: ${green('PASS')}${notChecked} — the log recomputes to its signed checkpoint`
          : `Result: ${red('FAIL')}`,
      );
    }
    if (!r.ok) process.exitCode = EXIT.VERIFY_FAILED;
  });
}
