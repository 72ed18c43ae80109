// `stele monitor <url|dir>`: follows a Stele log, verifying each step, and prints alerts as
// JSON lines on stdout (watched entries once each across restarts, forks with both notes).
import type { Command } from 'commander';
import type { AlertSink } from '../../src/monitor/alerts.js';
import { CliError, EXIT } from '../errors.js';

const many = (v: string, acc: string[] = []) => [...acc, v];

interface MonitorFlags {
  vkey: string;
  state: string;
  also?: string[];
  watchDigest?: string[];
  watchArtifact?: string[];
  watchScope?: string[];
  watchTenant?: string[];
  watchType?: string[];
  once?: boolean;
  webhook?: string;
  interval: string;
  maxInterval: string;
}

export function registerMonitorCommands(program: Command): void {
  program
    .command('monitor <source>')
    .description(
      'follow a log (URL or directory): check every checkpoint, its consistency and every new entry; alert on watched entries and forks (JSON lines on stdout)',
    )
    .requiredOption('--vkey <vkey>', "the log's verifier key")
    .requiredOption('--state <file>', 'state file (what was checked and alerted), so a restart alerts nothing twice')
    .option(
      '--also <url|dir>',
      'another copy of the same log (a mirror, a second log under the key) to compare checkpoints with, repeatable',
      many,
    )
    .option('--watch-digest <hex>', 'alert on entries with this digest, repeatable', many)
    .option('--watch-artifact <name|id>', 'alert on entries with this artifact name or id, repeatable', many)
    .option('--watch-scope <scope>', 'alert on entries in this scope, repeatable', many)
    .option('--watch-tenant <tenant>', 'alert on entries recorded for this tenant, repeatable', many)
    .option('--watch-type <type>', 'alert on entries of this type, repeatable', many)
    .option(
      '--webhook <url>',
      'also POST each alert as JSON (retried with backoff; kept in the state until a 2xx answer); or STELE_MONITOR_WEBHOOK, for a URL with a token',
    )
    .option(
      '--once',
      'one step, then exit: 0 no alert, 1 an alert was raised, 3 alerts left undelivered (for cron and CI)',
    )
    .option('--interval <ms>', 'polling interval; doubles while nothing changes', '1000')
    .option('--max-interval <ms>', 'longest polling interval', '60000')
    .action(runMonitor);
}

/** `stele monitor <source>`: follows a log, checking every checkpoint and entry, until stopped. */
async function runMonitor(source: string, o: MonitorFlags) {
  const { parseVkey } = await import('../../src/core/note.js');
  const { openObjectSource } = await import('../../src/client/objects.js');
  const { Monitor } = await import('../../src/monitor/monitor.js');
  const { LineSink, WebhookSink } = await import('../../src/monitor/alerts.js');
  const { follow } = await import('../../src/monitor/follow.js');
  let verifier;
  try {
    verifier = parseVkey(o.vkey);
  } catch (e) {
    throw new CliError(EXIT.USAGE, `--vkey: ${(e as Error).message}`);
  }
  const interval = Number(o.interval);
  const maxInterval = Number(o.maxInterval);
  if (!(interval >= 10) || !(maxInterval >= interval))
    throw new CliError(EXIT.USAGE, '--interval must be at least 10 ms and --max-interval at least --interval');
  const log = { name: source, objects: await openObjectSource(source) };
  const others = await Promise.all((o.also ?? []).map(async (a) => ({ name: a, objects: await openObjectSource(a) })));
  let webhook: string | undefined = o.webhook ?? process.env.STELE_MONITOR_WEBHOOK;
  if (webhook !== undefined) {
    let u: URL | undefined;
    try {
      u = new URL(webhook);
    } catch {}
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:'))
      throw new CliError(EXIT.USAGE, '--webhook must be an http:// or https:// URL');
    webhook = u.toString();
  }
  let alerts = 0;
  let critical = false;
  const stdout = new LineSink((line) => process.stdout.write(line));
  const counted: AlertSink = {
    name: stdout.name,
    async deliver(a) {
      await stdout.deliver(a);
      alerts++;
      if (a.kind !== 'watch') critical = true;
    },
  };
  let lastProgress = 0;
  const monitor = new Monitor({
    log,
    others,
    verifier,
    stateFile: o.state,
    watch: {
      digests: o.watchDigest ?? [],
      artifacts: o.watchArtifact ?? [],
      scopes: o.watchScope ?? [],
      tenants: o.watchTenant ?? [],
      types: o.watchType ?? [],
    },
    sinks: webhook ? [counted, new WebhookSink(webhook)] : [counted],
    onDeliveryError: (_sink, e) => process.stderr.write(`stele: monitor: ${e.message}; kept for the next try\n`),
    onProgress: (done, size) => {
      // While catching up, about one line a second, then the last one (none for a step within one bundle).
      if (done < size && Date.now() - lastProgress < 1000) return;
      if (done === size && lastProgress === 0) return;
      lastProgress = done === size ? 0 : Date.now();
      process.stderr.write(`stele: monitor checked ${done}/${size} entries\n`);
    },
  });
  await monitor.load();
  if (o.once) {
    await monitor.step();
    if (monitor.pending > 0)
      process.stderr.write(`stele: monitor: ${monitor.pending} alerts not yet delivered, kept in ${o.state}\n`);
    process.exitCode = alerts > 0 ? EXIT.VERIFY_FAILED : monitor.pending > 0 ? EXIT.IO : EXIT.OK;
    return;
  }
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  const ended = await follow({
    step: () => monitor.step(),
    interval,
    maxInterval,
    signal: stop.signal,
    onError: (e) => process.stderr.write(`stele: monitor step failed: ${e.message}\n`),
  });
  if (ended === 'stop' || critical) process.exitCode = EXIT.VERIFY_FAILED;
}
