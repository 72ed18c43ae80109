// The command groups of `stele`, in the order `stele --help` lists them, each with the
// module that defines it. A run loads only the group it invokes (cli/program.ts, through
// cli/commands/lazy.ts): its module, and so the libraries its commands import, while every
// other top-level command is listed from here by its help line alone. So `stele --help`
// loads commander and this file, and `stele ledger verify` never loads the AWS SDK, Koa or
// the control plane. test/cli/startup.test.ts checks these lines against the modules' own
// definitions.
import type { CommandModule } from './lazy.js';

export const GROUPS: readonly CommandModule[] = [
  {
    commands: [
      {
        name: 'serve',
        term: 'serve [options]',
        summary: 'run the log: sequencer, lookup index, JSON API and tile server on one data directory',
      },
      { name: 'index', term: 'index', summary: 'maintain the lookup index' },
    ],
    load: async () => (await import('./serve.js')).registerServeCommands,
  },
  {
    commands: [
      { name: 'ledger', term: 'ledger', summary: 'anchor to and verify the ledger (pinned key and checkpoint)' },
    ],
    load: async () => (await import('./ledger.js')).registerLedgerCommands,
  },
  {
    commands: [
      {
        name: 'verify',
        term: 'verify [options] <package_file>',
        summary:
          'verify a package file against the ledger; with --anchor, verify and record it, or anchor it if it is new',
      },
    ],
    load: async () => (await import('./verify.js')).registerVerify,
  },
  {
    commands: [{ name: 'log', term: 'log', summary: "operate a log's own storage: check it, rebuild its lock record" }],
    load: async () => (await import('./log.js')).registerLogCommands,
  },
  {
    commands: [
      {
        name: 'witness',
        term: 'witness',
        summary: 'run a witness that cosigns checkpoints of the logs it follows (C2SP tlog-witness)',
      },
    ],
    load: async () => (await import('./witness.js')).registerWitnessCommands,
  },
  {
    commands: [
      {
        name: 'mirror',
        term: 'mirror',
        summary:
          'run a mirror that stores copies of logs, serves them as tlog-tiles and cosigns them (C2SP tlog-mirror)',
      },
    ],
    load: async () => (await import('./mirror.js')).registerMirrorCommands,
  },
  {
    commands: [
      {
        name: 'monitor',
        term: 'monitor [options] <source>',
        summary:
          'follow a log (URL or directory): check every checkpoint, its consistency and every new entry; alert on watched entries and forks (JSON lines on stdout)',
      },
    ],
    load: async () => (await import('./monitor.js')).registerMonitorCommands,
  },
  {
    commands: [
      {
        name: 'control',
        term: 'control',
        summary:
          'the enterprise control plane: OIDC-authenticated leases, Cedar decisions, KEK epochs, signed audit stream',
      },
    ],
    load: async () => (await import('./control.js')).registerControlCommands,
  },
  {
    commands: [
      {
        name: 'dev-idp',
        term: 'dev-idp',
        summary:
          'a development OpenID Provider on loopback for `serve --enterprise`, and access tokens for its three roles',
      },
    ],
    load: async () => (await import('./dev-idp.js')).registerDevIdpCommands,
  },
  {
    commands: [
      {
        name: 'hammer',
        term: 'hammer [options] <url>',
        summary:
          'load and verify a Stele deployment: writers anchor, readers verify every checkpoint and inclusion from the tiles',
      },
    ],
    load: async () => (await import('./hammer.js')).registerHammerCommand,
  },
  {
    commands: [
      { name: 'key', term: 'key', summary: 'Ed25519 keys in an HSM (PKCS#11): generate, import, show, check' },
    ],
    load: async () => (await import('./key.js')).registerKeyCommands,
  },
  {
    commands: [
      {
        name: 'completion',
        term: 'completion <shell>',
        summary: 'print a shell completion script (bash, zsh or fish)',
      },
    ],
    load: async () => (await import('./completion.js')).registerCompletionCommand,
  },
];

/** `completion` walks every command's definition, so it loads every group. */
export const LOADS_EVERY_GROUP = 'completion';
