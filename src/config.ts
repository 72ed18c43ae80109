// Server configuration: command-line flags over environment (STELE_*) over a TOML file
// ([server] table, snake_case keys) over the embedded defaults.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseToml } from 'smol-toml';

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
  /** local: the data directory; aws: S3, DynamoDB and KMS from STELE_* variables (src/aws/log.ts). */
  readonly backend?: 'local' | 'aws';
  /** With the AWS backend: the single sequencer, or a read-only API replica. */
  readonly role?: 'sequencer' | 'api';
  /** The log's checkpoint key: `file` (the data directory's log.key, the default) or a PKCS#11 URI of a key in an HSM. */
  readonly signer?: string;
  /** With the AWS backend: the sequencer's lock record in DynamoDB, or in the bucket (no DynamoDB needed). */
  readonly lock?: 'dynamodb' | 'bucket';
  /** This start's witness settings replace the ones stored with the log (src/serve/log-settings.ts). */
  readonly reconfigure?: boolean;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
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

/** Each setting: its flag (camelCase, as commander names it), env variable and file key. */
const SETTINGS = {
  dataDir: { env: 'STELE_DATA_DIR', file: 'data_dir', kind: 'string' },
  origin: { env: 'STELE_ORIGIN', file: 'origin', kind: 'string' },
  host: { env: 'STELE_HOST', file: 'host', kind: 'string' },
  port: { env: 'STELE_PORT', file: 'port', kind: 'int' },
  batchIntervalMs: { env: 'STELE_BATCH_INTERVAL_MS', file: 'batch_interval_ms', kind: 'int' },
  maxBatch: { env: 'STELE_MAX_BATCH', file: 'max_batch', kind: 'int' },
  minBatchSpacingMs: { env: 'STELE_MIN_BATCH_SPACING_MS', file: 'min_batch_spacing_ms', kind: 'int' },
  anchorTimeoutMs: { env: 'STELE_ANCHOR_TIMEOUT_MS', file: 'anchor_timeout_ms', kind: 'int' },
  mode: { env: 'STELE_MODE', file: 'mode', kind: 'string' },
  anchorTokens: { env: 'STELE_ANCHOR_TOKENS', file: 'anchor_tokens', kind: 'string' },
  anchorRate: { env: 'STELE_ANCHOR_RATE', file: 'anchor_rate', kind: 'int' },
  anchorPolicy: { env: 'STELE_ANCHOR_POLICY', file: 'anchor_policy', kind: 'string' },
  demoWitnesses: { env: 'STELE_DEMO_WITNESSES', file: 'demo_witnesses', kind: 'int' },
  witnesses: { env: 'STELE_WITNESSES', file: 'witnesses', kind: 'string' },
  witnessThreshold: { env: 'STELE_WITNESS_THRESHOLD', file: 'witness_threshold', kind: 'int' },
  witnessPolicy: { env: 'STELE_WITNESS_POLICY', file: 'witness_policy', kind: 'string' },
  mirrors: { env: 'STELE_MIRRORS', file: 'mirrors', kind: 'string' },
  mirrorQuorum: { env: 'STELE_MIRROR_QUORUM', file: 'mirror_quorum', kind: 'int' },
  mirrorTimeoutMs: { env: 'STELE_MIRROR_TIMEOUT_MS', file: 'mirror_timeout_ms', kind: 'int' },
  enterprise: { env: 'STELE_ENTERPRISE', file: 'enterprise', kind: 'bool' },
  backend: { env: 'STELE_BACKEND', file: 'backend', kind: 'string' },
  role: { env: 'STELE_ROLE', file: 'role', kind: 'string' },
  signer: { env: 'STELE_SIGNER', file: 'signer', kind: 'string' },
  lock: { env: 'STELE_LOCK', file: 'lock', kind: 'string' },
} as const satisfies Record<string, { env: string; file: string; kind: 'string' | 'int' | 'bool' }>;

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
  const known = new Set(Object.values(SETTINGS).map((s) => s.file));
  const unknown = Object.keys(file).find((k) => !known.has(k as never));
  if (unknown) throw new ConfigError(`config file: unknown setting [server].${unknown}`);
  const out: Record<string, unknown> = { ...SERVE_DEFAULTS };
  for (const key of Object.keys(SETTINGS) as Key[]) {
    const s = SETTINGS[key];
    if (flags[key] !== undefined)
      out[key] = coerce(key, flags[key], `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
    else if (env[s.env] !== undefined && env[s.env] !== '') out[key] = coerce(key, env[s.env], s.env);
    else if (file[s.file] !== undefined) out[key] = coerce(key, file[s.file], `config [server].${s.file}`);
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
  if (cfg.signer !== undefined && cfg.signer !== 'file' && cfg.backend === 'aws')
    throw new ConfigError(
      'the AWS backend signs with KMS or a key file (STELE_KMS_KEY_ID, STELE_KEY_FILE), not --signer',
    );
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
