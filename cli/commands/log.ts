// `stele log fsck` and `stele log recover`: the operator's checks of a log's own storage
// (engines in src/log/fsck.ts and src/log/recover.ts). Modules load inside the actions.
import type { Command } from 'commander';
import { SERVE_DEFAULTS } from '../../src/serve/config.js';
import type { FsckResult, FsckTarget } from '../../src/log/fsck.js';
import type { SequencerLock } from '../../src/store/lock.js';
import type { DataDirLock } from '../../src/store/dir-lock.js';
import { CliError, EXIT, hsmError } from '../errors.js';
import { emitJson, green, intArg, out, progress, red } from './ledger/common.js';

interface LogOptions {
  dataDir?: string;
  objectsFrom?: string;
  aws?: boolean;
  json?: boolean;
  window?: number;
  since?: number | 'last';
}

const HELP = `
Exit codes:
  0  clean (fsck) / the lock record equals the published checkpoint (recover)
  1  a problem found (fsck) / recover refused: the message says why, nothing was written
  2  usage error, or no log in the data directory (fsck --since: no checkpoint of that size verified by fsck)
  3  I/O error, or the data directory is in use by a server (recover)`;

/** `--since`: a tree size, or `last`. */
function sinceArg(v: string): number | 'last' {
  if (v === 'last') return v;
  return intArg('--since', 1)(v);
}

/** The log to check: the data directory, or with --aws the bucket and table `stele serve` would use. */
async function openTarget(
  opts: LogOptions,
): Promise<{ target: FsckTarget & { lock: SequencerLock }; dataDir?: string; close(): Promise<void> }> {
  if (opts.aws) {
    if (opts.dataDir) throw new CliError(EXIT.USAGE, '--aws and --data-dir exclude each other');
    // The SDK warns, over nine lines of stderr, that its 2027 releases will need Node 22: it
    // would bury the one-line report (package.json supports Node >= 22).
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    const { awsLogConfigFromEnv, AwsConfigError } = await import('../../src/serve/aws-config.js');
    const { awsTarget } = await import('../../src/log/aws-target.js');
    let config;
    try {
      config = awsLogConfigFromEnv(process.env);
    } catch (e) {
      if (e instanceof AwsConfigError) throw new CliError(EXIT.USAGE, e.message);
      throw e;
    }
    // The public key may come from an HSM (STELE_SIGNER): a token that cannot be used is told as serve tells it.
    const target = await awsTarget(config).catch((e: unknown) => {
      throw hsmError(e) ?? e;
    });
    return { target, close: () => target.close() };
  }
  const dataDir = opts.dataDir ?? process.env.STELE_DATA_DIR ?? SERVE_DEFAULTS.dataDir;
  const { localTarget, NotALogError } = await import('../../src/log/targets.js');
  const target = await localTarget(dataDir).catch((e: unknown) => {
    if (e instanceof NotALogError) throw new CliError(EXIT.USAGE, e.message);
    throw e;
  });
  return { target, dataDir, close: async () => undefined };
}

/** Takes the data directory's lock (the one `stele serve` holds), or says who holds it. */
async function lockDir(dataDir: string): Promise<DataDirLock> {
  const { lockDataDir, DataDirInUseError } = await import('../../src/store/dir-lock.js');
  return lockDataDir(dataDir).catch((e: unknown) => {
    if (e instanceof DataDirInUseError) throw new CliError(EXIT.IO, e.message);
    throw e;
  });
}

/**
 * The pid of a server holding the directory, or null: fsck reads a live log, but says so. The
 * probe holds the lock for an instant; a server starting in that instant is told this pid.
 */
async function holder(dataDir: string): Promise<number | 'another process' | null> {
  const { lockDataDir, DataDirInUseError } = await import('../../src/store/dir-lock.js');
  try {
    await (await lockDataDir(dataDir)).release();
    return null;
  } catch (e) {
    if (e instanceof DataDirInUseError) return e.pid ?? 'another process';
    throw e;
  }
}

function printFsck(r: FsckResult, inUse: number | 'another process' | null): void {
  const mark = (ok: boolean) => (ok ? green('PASS') : red('FAIL'));
  const cp = r.checkpoint;
  out(
    `fsck of ${r.origin} in ${r.where}: ${cp ? `checkpoint size ${cp.size} (from ${cp.from})` : 'no verified checkpoint'}`,
  );
  if (r.tree?.from === 'lock')
    out(
      `  note  checked against the lock record's tree (size ${r.tree.size}), which a start builds on${cp ? ` and publishes over size ${cp.size}` : ' and publishes'}`,
    );
  if (r.since)
    out(
      `  note  only what is new since the checkpoint of size ${r.since.size} that fsck verified at ${r.since.verifiedAt} (nothing listed)`,
    );
  if (r.resumedAt !== undefined) out(`  note  continued a check that was stopped, from entry ${r.resumedAt}`);
  if (inUse !== null)
    out(
      `  note  the directory is in use by ${typeof inUse === 'number' ? `pid ${inUse}` : inUse}: objects may change while they are checked`,
    );
  if (r.audit) {
    out(`  ${mark(r.audit.signature.ok)}  checkpoint signature: ${r.audit.signature.detail}`);
    out(`  ${mark(r.audit.tree.ok)}  tree: ${r.audit.tree.detail}`);
  }
  const lockOk = r.lock.relation === 'equal' || r.lock.relation === 'newer' || r.lock.relation === 'unchecked';
  out(`  ${mark(lockOk)}  lock record: ${r.lock.relation}: ${r.lock.detail}`);
  out(`        ${r.objectsListed} objects listed, ${r.stalePartialsChecked} older partial tiles compared`);
  // The tree's and the lock's own findings are the lines above.
  const shown = (f: FsckResult['findings'][number]) =>
    f.kind === 'tree' || (f.kind === 'lock' && f.message === r.lock.detail);
  for (const f of r.findings) if (!shown(f)) out(`  ${f.severity === 'problem' ? red('FAIL') : 'note'}  ${f.message}`);
  const hidden = r.problems + r.notices - r.findings.length;
  if (hidden > 0) out(`        … and ${hidden} more of the kinds above (--json lists the first of each kind)`);
  if (r.firstBad) out(`  first bad object: ${r.firstBad}`);
  if (r.audit)
    out(
      `  ${r.audit.entriesChecked} entries, ${r.audit.bundlesChecked} bundles, ${r.audit.hashTilesChecked} hash tiles in ${(r.elapsedMs / 1000).toFixed(1)} s`,
    );
  out(
    r.ok
      ? `Result: ${green('PASS')} — ${r.notices} notice${r.notices === 1 ? '' : 's'}`
      : `Result: ${red('FAIL')} — ${r.problems} problem${r.problems === 1 ? '' : 's'}, ${r.notices} notice${r.notices === 1 ? '' : 's'}`,
  );
}

/** The options both commands take: where the log is, the read-ahead, JSON. */
function targetOptions(cmd: Command): Command {
  return cmd
    .option('--data-dir <dir>', `data directory (env STELE_DATA_DIR; default ${SERVE_DEFAULTS.dataDir})`)
    .option(
      '--aws',
      'the log on S3 and DynamoDB named by the environment, as `stele serve` reads it with STELE_BACKEND=aws (STELE_ORIGIN, STELE_S3_BUCKET, STELE_DYNAMO_TABLE, STELE_KMS_KEY_ID or STELE_KEY_FILE, …)',
    )
    .option('--window <n>', 'bundles read ahead (default 8)', intArg('--window', 1))
    .option('--json', 'print the result as JSON')
    .addHelpText('after', HELP);
}

export function registerLogCommands(program: Command): void {
  const log = program
    .command('log')
    .description("operate a log's own storage: check it, rebuild its lock record")
    .addHelpText(
      'after',
      `
Examples:
  stele log fsck --data-dir ./.stele
  stele log recover --data-dir ./.stele      # stop \`stele serve\` first
${HELP}`,
    );

  const fsck = log
    .command('fsck')
    .description(
      'check a data directory: recompute the tree as `stele ledger audit` does (every entry hash, leaf, hash tile and the root) against the newest signed checkpoint, and report missing, corrupted or extra objects, leftovers of crashed writes, symlinks, and the lock record against the checkpoint',
    );
  targetOptions(fsck).option(
    '--since <size|last>',
    'check only what is new since a checkpoint fsck verified before (its size, or `last`): the tree from there, which must extend it (a rollback or a change below it is reported), and the lock record; objects below that checkpoint are not read again, and nothing is listed (no leftovers, strangers or older partials: a full fsck checks those)',
    sinceArg,
  );
  fsck.addHelpText(
    'after',
    `
A full fsck records the checkpoint it verified (in the log's private state), and keeps its
progress there as it goes: killed, run it again and it continues.`,
  );
  fsck.action(runFsck);

  const recover = log
    .command('recover')
    .description(
      "rebuild the sequencer's lock record (private/lock.json) from the published signed checkpoint, after verifying the whole published tree against it, and rewrite a checkpoint object that does not verify from its verified twin; refuses if the tree does not verify, if objects lie beyond it, or if the lock is newer; names the objects of the lock's tree the log lacks (--objects-from copies them)",
    );
  targetOptions(recover).option(
    '--objects-from <url|dir>',
    "where objects of the lock record's tree that the log lacks can be copied from (a mirror's tiles URL, a copy of the log directory); they are written only once the whole tree verifies with them",
  );
  recover.action(runRecover);
}

/** The one line a recovery that wrote or found nothing to write ends with. */
function printRecovered(
  r: { status: string; size: number; root: string; previous: { relation: string }; fsck: FsckResult },
  lockName: string,
  before: string,
): void {
  // A lock already equal with a checkpoint object rewritten: the line above said so.
  if (r.previous.relation === 'equal') {
    if (r.status === 'up-to-date')
      out(`stele: nothing to recover: ${lockName} already equals the published checkpoint (size ${r.size})`);
  } else
    out(
      `stele: recovered ${lockName} (it ${before}): size ${r.size}, root ${r.root.slice(0, 16)}…, after verifying ${r.fsck.audit?.entriesChecked ?? 0} entries`,
    );
}

/** `stele log fsck`: checks the log and prints what it found (exit 1 if anything is wrong). */
async function runFsck(opts: LogOptions): Promise<void> {
  const { target, dataDir, close } = await openTarget(opts);
  const inUse = dataDir === undefined ? null : await holder(dataDir);
  const { fsckLog } = await import('../../src/log/fsck.js');
  const { FsckSinceError } = await import('../../src/log/fsck-resume.js');
  const bar = progress('checking', opts.json, 'entries');
  const r = await fsckLog(target, {
    window: opts.window,
    onProgress: (d, t) => bar.update(d, t),
    ...(opts.since === undefined ? {} : { since: opts.since }),
  })
    .catch((e: unknown) => {
      if (e instanceof FsckSinceError) throw new CliError(EXIT.USAGE, e.message);
      throw e;
    })
    .finally(() => {
      bar.stop();
      return close();
    });
  if (opts.json) emitJson({ result: r.ok ? 'PASS' : 'FAIL', inUseBy: inUse, ...r });
  else printFsck(r, inUse);
  if (!r.ok) process.exitCode = EXIT.VERIFY_FAILED;
}

/** `stele log recover`: rebuilds the lock record from the verified published tree, or says why it refuses. */
async function runRecover(opts: LogOptions): Promise<void> {
  const { target, dataDir, close } = await openTarget(opts);
  // On AWS the compare-and-swap on the lock item is the guard: a running sequencer's next
  // commit fails against the recovered lock and it stops.
  const dirLock =
    dataDir === undefined
      ? null
      : await lockDir(dataDir).catch(async (e: unknown) => {
          await close();
          throw e;
        });
  const { recoverLock, RecoverRefusedError } = await import('../../src/log/recover.js');
  const bar = progress('verifying', opts.json, 'entries');
  try {
    const objectsFrom =
      opts.objectsFrom === undefined
        ? undefined
        : await (await import('../../src/client/objects.js')).openObjectSource(opts.objectsFrom);
    const r = await recoverLock(target, {
      window: opts.window,
      onProgress: (d, t) => bar.update(d, t),
      ...(objectsFrom ? { objectsFrom } : {}),
    }).finally(() => bar.stop());
    const before = r.previous.relation === 'missing' ? 'was missing' : `was at size ${r.previous.size}`;
    if (opts.json) {
      emitJson({
        result: r.status,
        size: r.size,
        root: r.root,
        timestamp: r.timestamp,
        previous: r.previous,
        republished: r.republished,
        fetched: r.fetched,
        entriesChecked: r.fsck.audit?.entriesChecked ?? 0,
        findings: r.fsck.findings,
      });
    } else if (r.fetched.length > 0) {
      const ahead = r.fsck.tree?.from === 'lock';
      out(
        `stele: copied ${r.fetched.length} object${r.fetched.length === 1 ? '' : 's'} of the tree of size ${r.size} from ${objectsFrom?.describe()}, after verifying the whole tree${ahead ? '; `stele serve` publishes it at start' : ''}`,
      );
      if (!ahead && r.previous.relation !== 'equal') printRecovered(r, target.lockName, before);
    } else {
      if (r.republished.length > 0)
        out(`stele: rewrote ${r.republished.join(' and ')} from the verified checkpoint of size ${r.size}`);
      printRecovered(r, target.lockName, before);
    }
  } catch (e) {
    if (!(e instanceof RecoverRefusedError)) throw e;
    if (opts.json) emitJson({ result: 'refused', reason: e.reason, message: e.message, firstBad: e.fsck?.firstBad });
    throw new CliError(e.reason === 'conflict' ? EXIT.IO : EXIT.VERIFY_FAILED, `recover refused: ${e.message}`);
  } finally {
    await dirLock?.release();
    await close();
  }
}
