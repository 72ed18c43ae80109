// `stele serve` and `stele index …` (issue 3).
import type { Command } from 'commander';

export function registerServeCommands(program: Command): void {
  program.command('serve').description('run the log: sequencer, lookup index, JSON API and tile server');
}
