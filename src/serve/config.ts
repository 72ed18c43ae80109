// Server configuration: command-line flags over environment (STELE_*) over a TOML file
// ([server] table, snake_case keys) over the embedded defaults.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { DIGEST_HINTS_DEFAULT_MIB } from '../index/digest-hints.js';
import { ConfigError } from '../settings/errors.js';

export interface ServeConfig {
  readonly dataDir: string;
  readonly origin: string;
  readonly host: string;
  readonly port: number;
  readonly batchIntervalMs: number;
  readonly maxBatch: number;
  /**
   * Shortest time between two batch starts (ms). Unset: 0 on a local directory (a batch starts
   * as soon as the last one is acknowledged), 1,000 on AWS (each batch costs a KMS signature,
   * S3 PUTs and DynamoDB writes).
   */
  readonly minBatchSpacingMs?: number;
  /** Longest an anchor request waits for its checkpoint before a 503 (ms). */
  readonly anchorTimeoutMs: number;
  readonly mode: 'demo' | 'production';
  /** `name=token[@tenant],…`; required in production mode. */
  readonly anchorTokens?: string;
  /** Anchors per second per client (production default 100). */
  readonly anchorRate?: number;
  /** Directory of Cedar files deciding each anchor in production mode (default <dataDir>/anchor-policy). */
  readonly anchorPolicy?: string;
  readonly fsync?: boolean;
  /** Local demo witnesses started in this process (each with its own key and state). */
  readonly demoWitnesses?: number;
  /** External witnesses, `<vkey>=<url>` each, comma-separated. */
  readonly witnesses?: string;
  /** Cosignatures required to publish (default: all configured witnesses). */
  readonly witnessThreshold?: number;
  /** A C2SP tlog-policy file: the witnesses (with their URLs) and the quorum to publish on. */
  readonly witnessPolicy?: string;
  /** tlog-mirrors the log pushes its entries to, `<vkey>=<url>` each, comma-separated. */
  readonly mirrors?: string;
  /** Mirror cosignatures a checkpoint needs before it is published (default 0: push after publishing). */
  readonly mirrorQuorum?: number;
  /** Deadline of one round of mirror pushes (ms). */
  readonly mirrorTimeoutMs?: number;
  /** Mount the enterprise control plane (/v1) on this server, recording into this log. */
  readonly enterprise?: boolean;
  /** local: the data directory; aws: S3, DynamoDB and KMS from STELE_* variables (src/serve/aws-log.ts). */
  readonly backend?: 'local' | 'aws';
  /** With the AWS backend: the single sequencer, or a read-only API replica. */
  readonly role?: 'sequencer' | 'api';
  /** The log's checkpoint key: `file` (the data directory's log.key, the default) or a PKCS#11 URI of a key in an HSM. */
  readonly signer?: string;
  /** With the AWS backend: the sequencer's lock record in DynamoDB, or in the bucket (no DynamoDB needed). */
  readonly lock?: 'dynamodb' | 'bucket';
  /** This start's witness settings replace the ones stored with the log (src/serve/log-settings.ts). */
  readonly reconfigure?: boolean;
  /**
   * Memory (MiB) the LMDB lookup index may give its digest hints (src/index/digest-hints.ts):
   * 16 bytes per slot at most half full, so 64 MiB holds a log of about 2 M entries. 0: none.
   */
  readonly digestHintsMib?: number;
}

export const SERVE_DEFAULTS: ServeConfig = {
  dataDir: '.stele',
  origin: 'stele.localhost/log',
  host: '127.0.0.1',
  port: 8080,
  batchIntervalMs: 1000,
  maxBatch: 65_536,
  anchorTimeoutMs: 10_000,
  mode: 'demo',
};

/** The digest hints' largest budget: 2^28 slots, a log of some 130 M entries. */
export const MAX_DIGEST_HINTS_MIB = 4096;

/**
 * Each setting: its flag (camelCase, as commander names it), env variable, file key (null: not
 * settable from a file) and the line `stele serve --help` shows for the variable.
 */
const SETTINGS = {
  dataDir: { env: 'STELE_DATA_DIR', file: 'data_dir', kind: 'string', help: 'data directory (--data-dir)' },
  origin: {
    env: 'STELE_ORIGIN',
    file: 'origin',
    kind: 'string',
    help: "log origin, the checkpoint's first line (--origin)",
  },
  host: { env: 'STELE_HOST', file: 'host', kind: 'string', help: 'listen address (--host)' },
  port: { env: 'STELE_PORT', file: 'port', kind: 'int', help: 'listen port (--port)' },
  batchIntervalMs: {
    env: 'STELE_BATCH_INTERVAL_MS',
    file: 'batch_interval_ms',
    kind: 'int',
    help: 'longest an anchor waits for its batch, ms (--batch-interval)',
  },
  maxBatch: { env: 'STELE_MAX_BATCH', file: 'max_batch', kind: 'int', help: 'largest batch (--max-batch)' },
  minBatchSpacingMs: {
    env: 'STELE_MIN_BATCH_SPACING_MS',
    file: 'min_batch_spacing_ms',
    kind: 'int',
    help: 'shortest time between batch starts, ms (--min-batch-spacing)',
  },
  anchorTimeoutMs: {
    env: 'STELE_ANCHOR_TIMEOUT_MS',
    file: 'anchor_timeout_ms',
    kind: 'int',
    help: 'longest an anchor request waits before a 503, ms (--anchor-timeout)',
  },
  mode: { env: 'STELE_MODE', file: 'mode', kind: 'string', help: 'demo or production (--mode)' },
  anchorTokens: {
    env: 'STELE_ANCHOR_TOKENS',
    file: 'anchor_tokens',
    kind: 'string',
    help: 'name=token[@tenant],… bearer tokens of the anchor route (--anchor-tokens)',
  },
  anchorRate: {
    env: 'STELE_ANCHOR_RATE',
    file: 'anchor_rate',
    kind: 'int',
    help: 'anchors per second per client in production mode (--anchor-rate)',
  },
  anchorPolicy: {
    env: 'STELE_ANCHOR_POLICY',
    file: 'anchor_policy',
    kind: 'string',
    help: 'Cedar policy directory deciding each anchor (--anchor-policy)',
  },
  demoWitnesses: {
    env: 'STELE_DEMO_WITNESSES',
    file: 'demo_witnesses',
    kind: 'int',
    help: 'local demo witnesses, local data directory only (--demo-witnesses)',
  },
  witnesses: {
    env: 'STELE_WITNESSES',
    file: 'witnesses',
    kind: 'string',
    help: '<vkey>=<url>,… external witnesses (--witness)',
  },
  witnessThreshold: {
    env: 'STELE_WITNESS_THRESHOLD',
    file: 'witness_threshold',
    kind: 'int',
    help: 'witness cosignatures that publish a checkpoint (--witness-threshold)',
  },
  witnessPolicy: {
    env: 'STELE_WITNESS_POLICY',
    file: 'witness_policy',
    kind: 'string',
    help: 'C2SP tlog-policy file: witnesses and quorum (--witness-policy)',
  },
  mirrors: { env: 'STELE_MIRRORS', file: 'mirrors', kind: 'string', help: '<vkey>=<url>,… tlog-mirrors (--mirror)' },
  mirrorQuorum: {
    env: 'STELE_MIRROR_QUORUM',
    file: 'mirror_quorum',
    kind: 'int',
    help: 'mirror cosignatures that publish a checkpoint (--mirror-quorum)',
  },
  mirrorTimeoutMs: {
    env: 'STELE_MIRROR_TIMEOUT_MS',
    file: 'mirror_timeout_ms',
    kind: 'int',
    help: 'deadline of one round of mirror pushes, ms (--mirror-timeout)',
  },
  enterprise: {
    env: 'STELE_ENTERPRISE',
    file: 'enterprise',
    kind: 'bool',
    help: 'also serve the enterprise control plane /v1 (--enterprise)',
  },
  backend: { env: 'STELE_BACKEND', file: 'backend', kind: 'string', help: 'local (default) or aws: S3 and friends' },
  role: {
    env: 'STELE_ROLE',
    file: 'role',
    kind: 'string',
    help: 'aws backend: sequencer (default) or api, a read-only replica',
  },
  signer: { env: 'STELE_SIGNER', file: 'signer', kind: 'string', help: 'file or a pkcs11: URI (--signer)' },
  lock: { env: 'STELE_LOCK', file: 'lock', kind: 'string', help: 'aws backend: dynamodb (default) or bucket (--lock)' },
  digestHintsMib: {
    env: 'STELE_DIGEST_HINTS_MIB',
    file: 'digest_hints_mib',
    kind: 'int',
    help: `memory for the lookup index's digest hints, MiB (--digest-hints-mib; default ${DIGEST_HINTS_DEFAULT_MIB}, 0: none)`,
  },
  // Not from a file: a file keeps it set, and every later start would replace the stored settings.
  reconfigure: {
    env: 'STELE_RECONFIGURE',
    file: null,
    kind: 'bool',
    help: "true: this start's witness/mirror settings replace the stored ones (--reconfigure)",
  },
} as const satisfies Record<
  string,
  { env: string; file: string | null; kind: 'string' | 'int' | 'bool'; help: string }
>;

/**
 * Variables read only from the environment, by the backend they configure: the aws backend
 * (src/serve/aws-log.ts, also any S3-compatible store), the PKCS#11 signer, the explorer.
 */
const ENV_ONLY: readonly (readonly [name: string, help: string])[] = [
  ['STELE_S3_BUCKET', 'aws backend: the bucket (required)'],
  ['STELE_S3_PREFIX', 'prefix of the public objects the CDN serves (default log/)'],
  ['STELE_S3_STAGING_PREFIX', 'private prefix: staged batches, lock, log settings (default private/)'],
  ['STELE_S3_ENDPOINT', 'an S3-compatible endpoint (Ceph RGW, MinIO, R2)'],
  ['STELE_S3_FORCE_PATH_STYLE', 'true: path-style addressing, for most S3-compatible stores'],
  ['STELE_S3_REQUIRE_CONDITIONAL_WRITES', 'false only for a test server that ignores If-Match'],
  ['STELE_DYNAMO_TABLE', 'DynamoDB table: lock, lookup index (required with the dynamodb lock)'],
  ['STELE_DYNAMO_ENDPOINT', 'a DynamoDB-compatible endpoint'],
  ['STELE_KMS_KEY_ID', 'aws backend: the Ed25519 KMS key that signs checkpoints'],
  ['STELE_KMS_ENDPOINT', 'a KMS-compatible endpoint'],
  ['STELE_KMS_EXPECT_KEY_ID', 'refuse to start unless the KMS key has this key id'],
  ['STELE_KEY_FILE', 'aws backend: a local Ed25519 key file instead of KMS'],
  ['STELE_VKEY', "api replica: the log's public key (vkey), instead of a signing key"],
  ['STELE_VKEY_FILE', 'api replica: a file holding that vkey'],
  ['STELE_HEARTBEAT_MS', 'aws backend: period of the heartbeat log line (default 10000; 0: off)'],
  ['STELE_PKCS11_PIN', 'the PIN of a PKCS#11 signer (never on the command line)'],
  ['STELE_PKCS11_MODULE', 'the PKCS#11 module, if the URI names none'],
  ['STELE_EXPLORER_DIR', 'the built explorer served at / (default dist/explorer)'],
];

/** The ENVIRONMENT section of `stele serve --help`: every variable above, one line each. */
export function serveEnvironmentHelp(): string {
  const rows: (readonly [string, string])[] = [
    ...Object.values(SETTINGS).map((s) => [s.env, s.help] as const),
    ...ENV_ONLY,
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  return [
    'Environment (a flag wins over its variable, a variable over the --config file):',
    ...rows.map(([name, help]) => `  ${name.padEnd(width)}  ${help}`),
    '  with --enterprise, also STELE_CONTROL_*, STELE_OIDC_* and STELE_KEK_* (README: "Enterprise control plane")',
  ].join('\n');
}

type Key = keyof typeof SETTINGS;

function coerce(key: Key, value: unknown, where: string): string | number | boolean {
  const kind = SETTINGS[key].kind;
  if (kind === 'bool') {
    if (typeof value === 'boolean') return value;
    if (value === 'true' || value === '1') return true;
    if (value === 'false' || value === '0') return false;
    throw new ConfigError(`${where}: ${key} must be true or false`);
  }
  if (kind === 'int') {
    const n =
      typeof value === 'number' ? value : typeof value === 'string' && /^[0-9]+$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < 0) throw new ConfigError(`${where}: ${key} must be a non-negative integer`);
    return n;
  }
  if (typeof value !== 'string' || value === '') throw new ConfigError(`${where}: ${key} must be a non-empty string`);
  return value;
}

function readFileSettings(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read config file ${path}: ${(e as Error).message}`);
  }
  try {
    const doc = parseToml(text) as { server?: Record<string, unknown> };
    return doc.server ?? {};
  } catch (e) {
    throw new ConfigError(`config file ${path} is not valid TOML: ${(e as Error).message.split('\n')[0]}`);
  }
}

export function resolveServeConfig(
  flags: Partial<Record<Key, unknown>> & { config?: string },
  env: NodeJS.ProcessEnv = process.env,
): ServeConfig {
  const file = flags.config ? readFileSettings(flags.config) : {};
  const known = new Set<string | null>(Object.values(SETTINGS).map((s) => s.file));
  known.delete(null);
  const unknown = Object.keys(file).find((k) => !known.has(k as never));
  if (unknown) throw new ConfigError(`config file: unknown setting [server].${unknown}`);
  const out: Record<string, unknown> = { ...SERVE_DEFAULTS };
  for (const key of Object.keys(SETTINGS) as Key[]) {
    const s = SETTINGS[key];
    if (flags[key] !== undefined)
      out[key] = coerce(key, flags[key], `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
    else if (env[s.env] !== undefined && env[s.env] !== '') out[key] = coerce(key, env[s.env], s.env);
    else if (s.file !== null && file[s.file] !== undefined)
      out[key] = coerce(key, file[s.file], `config [server].${s.file}`);
  }
  const cfg = out as unknown as ServeConfig;
  if (cfg.mode !== 'demo' && cfg.mode !== 'production') throw new ConfigError('mode must be demo or production');
  if (cfg.backend !== undefined && cfg.backend !== 'local' && cfg.backend !== 'aws')
    throw new ConfigError('backend must be local or aws');
  if (cfg.role !== undefined && cfg.role !== 'sequencer' && cfg.role !== 'api')
    throw new ConfigError('role must be sequencer or api');
  if (cfg.lock !== undefined && cfg.lock !== 'dynamodb' && cfg.lock !== 'bucket')
    throw new ConfigError('lock must be dynamodb or bucket');
  if (cfg.mode === 'production' && !cfg.anchorTokens && cfg.role !== 'api') {
    throw new ConfigError('production mode needs anchor tokens (--anchor-tokens or STELE_ANCHOR_TOKENS)');
  }
  if (cfg.port > 65_535) throw new ConfigError('port must be at most 65535');
  if (cfg.batchIntervalMs < 1 || cfg.batchIntervalMs > 60_000)
    throw new ConfigError('batch interval must be 1..60000 ms');
  if ((cfg.minBatchSpacingMs ?? 0) > 60_000) throw new ConfigError('min batch spacing must be 0..60000 ms');
  if (cfg.anchorTimeoutMs < 100 || cfg.anchorTimeoutMs > 600_000)
    throw new ConfigError('anchor timeout must be 100..600000 ms');
  if (cfg.maxBatch < 1 || cfg.maxBatch > 1_000_000) throw new ConfigError('max batch must be 1..1000000');
  if (cfg.witnessPolicy !== undefined && cfg.witnessThreshold !== undefined) {
    throw new ConfigError(
      "witness policy and witness threshold are exclusive: the policy's quorum line says what is required",
    );
  }
  if (cfg.mirrorTimeoutMs !== undefined && (cfg.mirrorTimeoutMs < 100 || cfg.mirrorTimeoutMs > 600_000))
    throw new ConfigError('mirror timeout must be 100..600000 ms');
  if ((cfg.mirrorQuorum ?? 0) > 0 && !cfg.mirrors)
    throw new ConfigError('a mirror quorum needs mirrors (--mirror <vkey>=<url>)');
  if (cfg.signer !== undefined && cfg.signer !== 'file' && !/^pkcs11:/i.test(cfg.signer))
    throw new ConfigError('signer must be "file" or a pkcs11: URI');
  if ((cfg.digestHintsMib ?? 0) > MAX_DIGEST_HINTS_MIB)
    throw new ConfigError(`digest hints must be 0..${MAX_DIGEST_HINTS_MIB} MiB`);
  if ((cfg.demoWitnesses ?? 0) > 16) throw new ConfigError('at most 16 demo witnesses');
  // A witness inside the log's own process, its state on a disk the next instance may not get,
  // shows a client nothing; on a local directory it is a demonstration, on S3 it would pass for assurance.
  if (cfg.demoWitnesses && cfg.backend === 'aws')
    throw new ConfigError(
      'demo witnesses are for a local data directory only: on the S3/AWS backend run witnesses elsewhere (`stele witness serve`) and name them with --witness or --witness-policy',
    );
  if (!/^[^\s+]+$/.test(cfg.origin)) throw new ConfigError('origin must be non-empty with no spaces or "+"');
  return {
    ...cfg,
    dataDir: resolve(cfg.dataDir),
    ...(cfg.witnessPolicy !== undefined ? { witnessPolicy: resolve(cfg.witnessPolicy) } : {}),
    ...(cfg.anchorPolicy !== undefined ? { anchorPolicy: resolve(cfg.anchorPolicy) } : {}),
  };
}
