// `stele ledger …` (docs/interface.md §4.3 and, for verifiers, mirror and audit) and `stele verify …`.
import type { Command } from 'commander';
import { registerAnchor } from './ledger/anchor.js';
import { registerAudit } from './ledger/audit.js';
import { registerCheckpoint } from './ledger/checkpoint.js';
import { EXIT_CODES_HELP } from './ledger/common.js';
import { registerConsistency } from './ledger/consistency.js';
import { registerGet } from './ledger/get.js';
import { registerInit } from './ledger/init.js';
import { registerMirror } from './ledger/mirror.js';
import { registerProof } from './ledger/proof.js';
import { registerStatus } from './ledger/status.js';
import { registerTrustConfig } from './ledger/trust-config.js';
import { registerLedgerVerify } from './ledger/verify.js';
import { registerVerify } from './verify.js';

export function registerLedgerCommands(program: Command): void {
  const ledger = program
    .command('ledger')
    .description('anchor to and verify the ledger (pinned key and checkpoint)')
    .addHelpText(
      'after',
      `
Every answer of the log is verified against the pinned key id and checkpoint
(written by \`stele ledger init\`); a failed check is a FAIL with exit code 1.

Examples:
  stele ledger init --endpoint http://127.0.0.1:8080 --tenant acme --scope releases --trust-key <key_id>
  stele ledger init --vkey '<origin>+<hash>+<key>' --tiles ./mirror      (offline, no API)
  stele ledger anchor release.tar.gz
  stele ledger proof led_0_0123456789ab
  stele ledger verify release.tar.gz
  stele ledger verify release.tar.gz --tiles ./mirror
  stele ledger get --artifact release.tar.gz
  stele ledger status
  stele ledger consistency --from 1 --to 42
  stele ledger checkpoint --note
  stele ledger mirror ./mirror && stele ledger audit ./mirror
${EXIT_CODES_HELP}`,
    );
  registerInit(ledger);
  registerTrustConfig(ledger);
  registerAnchor(ledger);
  registerProof(ledger);
  registerGet(ledger);
  registerLedgerVerify(ledger);
  registerConsistency(ledger);
  registerCheckpoint(ledger);
  registerStatus(ledger);
  registerMirror(ledger);
  registerAudit(ledger);
  registerVerify(program);
}
