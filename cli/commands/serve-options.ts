// The options of a log server, declared once for `stele serve` and `stele control serve`.
import type { Command } from 'commander';
import { DIGEST_HINTS_DEFAULT_MIB } from '../../src/index/digest-hints.js';
import { MAX_DIGEST_HINTS_MIB, SERVE_DEFAULTS } from '../../src/serve/config.js';

/**
 * The options of a log server, declared once: `stele serve` takes them all, `stele control
 * serve` the ones it shares (the settings they name are resolveServeConfig's).
 */
const SERVE_OPTIONS = {
  dataDir: ['--data-dir <dir>', `data directory (env STELE_DATA_DIR; default ${SERVE_DEFAULTS.dataDir})`],
  origin: [
    '--origin <origin>',
    `log origin, the checkpoint's first line (env STELE_ORIGIN; default ${SERVE_DEFAULTS.origin})`,
  ],
  host: ['--host <host>', `listen address (env STELE_HOST; default ${SERVE_DEFAULTS.host})`],
  port: ['--port <port>', `listen port, 0 for any (env STELE_PORT; default ${SERVE_DEFAULTS.port})`],
  batchInterval: [
    '--batch-interval <ms>',
    `longest an anchor waits for its batch (env STELE_BATCH_INTERVAL_MS; default ${SERVE_DEFAULTS.batchIntervalMs})`,
  ],
  minBatchSpacing: [
    '--min-batch-spacing <ms>',
    'shortest time between two batch starts, the knob for per-batch cost (env STELE_MIN_BATCH_SPACING_MS; default 0 on a local directory, 1000 on AWS)',
  ],
  maxBatch: ['--max-batch <n>', `largest batch (env STELE_MAX_BATCH; default ${SERVE_DEFAULTS.maxBatch})`],
  anchorTimeout: [
    '--anchor-timeout <ms>',
    `longest an anchor request waits for its checkpoint before a 503 (env STELE_ANCHOR_TIMEOUT_MS; default ${SERVE_DEFAULTS.anchorTimeoutMs})`,
  ],
  mode: [
    '--mode <mode>',
    'demo (open anchor route) or production (tokens and rate limits required) (env STELE_MODE; default demo)',
  ],
  anchorTokens: [
    '--anchor-tokens <list>',
    'name=token[@tenant],… bearer tokens for the anchor route (env STELE_ANCHOR_TOKENS)',
  ],
  anchorPolicy: [
    '--anchor-policy <dir>',
    'Cedar policy directory deciding each anchor in production mode, hot-reloaded (env STELE_ANCHOR_POLICY; default <data-dir>/anchor-policy)',
  ],
  anchorRate: [
    '--anchor-rate <n>',
    'anchors per second per client in production mode (env STELE_ANCHOR_RATE; default 100)',
  ],
  demoWitnesses: [
    '--demo-witnesses <n>',
    'start N local witnesses in this process so the log is witnessed out of the box; local data directory only, not the S3/AWS backend (env STELE_DEMO_WITNESSES)',
  ],
  witness: [
    '--witness <vkey=url>',
    'an external tlog-witness, repeatable; every backend (env STELE_WITNESSES, comma-separated)',
    (v: string, acc: string[] = []) => [...acc, v],
  ],
  witnessThreshold: [
    '--witness-threshold <m>',
    'cosignatures required before a checkpoint is published (env STELE_WITNESS_THRESHOLD; default: all witnesses)',
  ],
  witnessPolicy: [
    '--witness-policy <file>',
    "a C2SP tlog-policy file: its witnesses (each line's URL is the submission prefix; or pair with --witness <vkey>=<url>) and the quorum that publishes a checkpoint (env STELE_WITNESS_POLICY)",
  ],
  signer: [
    '--signer <file|pkcs11:…>',
    "the checkpoint key: \"file\" (the data dir's private/log.key, created on first start; on the S3/AWS backend STELE_KMS_KEY_ID or STELE_KEY_FILE; default) or an RFC 7512 PKCS#11 URI of an Ed25519 key in an HSM, e.g. 'pkcs11:token=stele;object=log?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin' (the PIN from pin-source or env STELE_PKCS11_PIN, never the command line; the module may come from env STELE_PKCS11_MODULE; every backend; an S3/AWS API replica takes STELE_VKEY instead) (env STELE_SIGNER)",
  ],
  lock: [
    '--lock <kind>',
    'AWS/S3 backend: the sequencer lock record in dynamodb or in the bucket (env STELE_LOCK; default dynamodb)',
  ],
  reconfigure: [
    '--reconfigure',
    "replace the witness and mirror settings stored with the log (its data directory, or the S3 log's private prefix) by this start's (a start that omits them uses the stored ones; different ones are refused without this) (env STELE_RECONFIGURE)",
  ],
  mirror: [
    '--mirror <vkey=url>',
    'a C2SP tlog-mirror to push the entries to, repeatable (env STELE_MIRRORS, comma-separated)',
    (v: string, acc: string[] = []) => [...acc, v],
  ],
  mirrorQuorum: [
    '--mirror-quorum <n>',
    'mirror cosignatures required before a checkpoint is published (env STELE_MIRROR_QUORUM; default 0: push after publishing)',
  ],
  mirrorTimeout: [
    '--mirror-timeout <ms>',
    'deadline of one round of mirror pushes (env STELE_MIRROR_TIMEOUT_MS; default 10000)',
  ],
  digestHintsMib: [
    '--digest-hints-mib <MiB>',
    `memory the LMDB lookup index may keep its digest hints in: entry?hash= finds its leaf without a seek while the log's digests fit (16 bytes per slot, at most half full: 64 MiB for about 2 M entries; more is taken only as the log grows), 0 for none (env STELE_DIGEST_HINTS_MIB; default ${DIGEST_HINTS_DEFAULT_MIB}, at most ${MAX_DIGEST_HINTS_MIB})`,
  ],
  enterprise: [
    '--enterprise',
    'also serve the enterprise control plane (/v1) recording into this log (env STELE_ENTERPRISE)',
  ],
} satisfies Record<string, [string, string, ((v: string, acc?: string[]) => string[])?]>;

export type ServeOptionName = keyof typeof SERVE_OPTIONS;

/** Adds the named log-server options to `cmd`. */
export function addServeOptions(
  cmd: Command,
  names: readonly ServeOptionName[] = Object.keys(SERVE_OPTIONS) as ServeOptionName[],
): Command {
  for (const n of names) {
    const [flags, description, parse] = SERVE_OPTIONS[n] as [
      string,
      string,
      ((v: string, acc?: string[]) => string[])?,
    ];
    if (parse) cmd.option(flags, description, parse);
    else cmd.option(flags, description);
  }
  return cmd;
}
