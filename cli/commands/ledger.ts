// `stele ledger …` (docs/interface.md §4.3 and, for verifiers, mirror and audit).
import type { Command } from 'commander';
import { EXIT_CODES_HELP } from './ledger/common.js';
import { type CommandModule, registerModules } from './lazy.js';

/**
 * The subcommands, in the order `stele ledger --help` lists them: a run loads the module of
 * the one it invokes (cli/commands/lazy.ts), so `ledger verify` never loads what `ledger
 * mirror` or `ledger init` use.
 */
export const LEDGER_COMMANDS: readonly CommandModule[] = [
  {
    commands: [
      {
        name: 'init',
        term: 'init [options]',
        summary:
          'pin the log key and its current checkpoint, and write the configuration file (online from an endpoint, or offline from --vkey and --tiles)',
      },
    ],
    load: async () => (await import('./ledger/init.js')).registerInit,
  },
  {
    commands: [
      {
        name: 'trust-config',
        term: 'trust-config [options]',
        summary: 'show or change the pinned trust material (log key, checkpoint, witnesses)',
      },
    ],
    load: async () => (await import('./ledger/trust-config.js')).registerTrustConfig,
  },
  {
    commands: [
      {
        name: 'anchor',
        term: 'anchor [options] <files...>',
        summary: 'anchor files: stream the SHA-256 of each, append the digest to the log, verify and store the proof',
      },
    ],
    load: async () => (await import('./ledger/anchor.js')).registerAnchor,
  },
  {
    commands: [
      {
        name: 'proof',
        term: 'proof [options] <entry_id>',
        summary: 'show (and re-verify) the stored inclusion proof of an entry; fetch it if not stored',
      },
    ],
    load: async () => (await import('./ledger/proof.js')).registerProof,
  },
  {
    commands: [
      {
        name: 'get',
        term: 'get [options]',
        summary: 'look an entry up by digest, leaf, id or artifact label, and verify it (PASS/FAIL per rule)',
      },
    ],
    load: async () => (await import('./ledger/get.js')).registerGet,
  },
  {
    commands: [
      {
        name: 'verify',
        term: 'verify [options] <files...>',
        summary: 'verify files against the current checkpoint: PASS/FAIL for each rule of the report',
      },
    ],
    load: async () => (await import('./ledger/verify.js')).registerLedgerVerify,
  },
  {
    commands: [
      {
        name: 'consistency',
        term: 'consistency [options]',
        summary: 'prove that the log only grew (append-only) between two tree sizes',
      },
    ],
    load: async () => (await import('./ledger/consistency.js')).registerConsistency,
  },
  {
    commands: [
      {
        name: 'checkpoint',
        term: 'checkpoint [options]',
        summary:
          'print the current signed checkpoint after verifying it (unsigned JSON fields are shown apart, as unsigned)',
      },
    ],
    load: async () => (await import('./ledger/checkpoint.js')).registerCheckpoint,
  },
  {
    commands: [
      {
        name: 'status',
        term: 'status [options]',
        summary: "show the pin, the log's verified checkpoint and summary, and a mirror's lag behind the log",
      },
    ],
    load: async () => (await import('./ledger/status.js')).registerStatus,
  },
  {
    commands: [
      {
        name: 'mirror',
        term: 'mirror [options] <dir>',
        summary:
          'copy the log (checkpoint, hash tiles, bundles) into <dir>, verifying every object before keeping it; incremental and resumable',
      },
    ],
    load: async () => (await import('./ledger/mirror.js')).registerMirror,
  },
  {
    commands: [
      {
        name: 'audit',
        term: 'audit [options] <dir|url>',
        summary:
          'recompute everything from the records: every entry hash along the chain, every leaf, every hash tile and the root; check the checkpoint signature, cosignatures and the pin',
      },
    ],
    load: async () => (await import('./ledger/audit.js')).registerAudit,
  },
];

/** Registers `stele ledger` and, in full, the subcommand `args` invoke (every one with `every`). */
export async function registerLedgerCommands(
  program: Command,
  args: readonly string[] = [],
  every = true,
): Promise<void> {
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
  await registerModules(ledger, LEDGER_COMMANDS, args, every);
}
