// `stele ledger …` and `stele verify …` (issue 4).
import type { Command } from 'commander';

export function registerLedgerCommands(program: Command): void {
  program.command('ledger').description('anchor to and verify the ledger (pinned key and checkpoint)');
}
