// `stele monitor <url|dir>`: follows a Stele log, verifying each step, and prints alerts as
// JSON lines on stdout (watched entries once each across restarts, forks with both notes).
import type { Command } from 'commander';
import { CliError, EXIT } from '../errors.js';

const many = (v: string, acc: string[] = []) => [...acc, v];

interface MonitorFlags {
  vkey: string;
  state: string;
  also?: string[];
  watchDigest?: string[];
  watchArtifact?: string[];
  watchScope?: string[];
  watchType?: string[];
  once?: boolean;
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
    .option('--watch-type <type>', 'alert on entries of this type, repeatable', many)
    .option('--once', 'one step, then exit: 0 no alert, 1 an alert was raised (for cron and CI)')
    .option('--interval <ms>', 'polling interval; doubles while nothing changes', '1000')
    .option('--max-interval <ms>', 'longest polling interval', '60000')
    .action(async (source: string, o: MonitorFlags) => {
      const { parseVkey } = await import('../../src/core/note.js');
      const { openObjectSource } = await import('../../src/client/objects.js');
      const { Monitor } = await import('../../src/monitor/monitor.js');
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
      const others = await Promise.all(
        (o.also ?? []).map(async (a) => ({ name: a, objects: await openObjectSource(a) })),
      );
      let alerts = 0;
      let critical = false;
      const monitor = new Monitor({
        log,
        others,
        verifier,
        stateFile: o.state,
        watch: {
          digests: o.watchDigest ?? [],
          artifacts: o.watchArtifact ?? [],
          scopes: o.watchScope ?? [],
          types: o.watchType ?? [],
        },
        onAlert: (a) => {
          alerts++;
          if (a.kind !== 'watch') critical = true;
          process.stdout.write(`${JSON.stringify({ alert: a.kind, ...a })}\n`);
        },
        onProgress: (done, size) => {
          if (size - done > 0 || size > 10_000)
            process.stderr.write(`stele: monitor checked ${done}/${size} entries\n`);
        },
      });
      await monitor.load();
      if (o.once) {
        await monitor.step();
        process.exitCode = alerts > 0 ? EXIT.VERIFY_FAILED : EXIT.OK;
        return;
      }
      let wait = interval;
      let stop = false;
      process.once('SIGINT', () => (stop = true));
      process.once('SIGTERM', () => (stop = true));
      while (!stop) {
        const before = alerts;
        const held = (await monitor.load()).held?.size ?? -1;
        await monitor
          .step()
          .catch((e: unknown) => process.stderr.write(`stele: monitor step failed: ${(e as Error).message}\n`));
        const moved = ((await monitor.load()).held?.size ?? -1) !== held || alerts !== before;
        wait = moved ? interval : Math.min(maxInterval, wait * 2);
        if (critical) {
          process.exitCode = EXIT.VERIFY_FAILED;
          return;
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    });
}
