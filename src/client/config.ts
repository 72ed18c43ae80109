// The client's trust configuration: ~/.config/stele/ledger.toml (docs/interface.md §4.3), honouring
// XDG_CONFIG_HOME and --config, with STELE_LEDGER_ENDPOINT / STELE_LEDGER_TENANT
// overriding the file. It pins the log key (by key id, with the vkey it was checked
// against), a checkpoint (size and root), and the witnesses with their quorum: a C2SP
// tlog-policy file beside the configuration (`[ledger.trust] policy`, what `ledger init`
// writes), or, in files written before it, `witnesses` and `witness_threshold` (M of N).
import { randomBytes } from 'node:crypto';
import { promises as fs, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { TomlError, parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import { EMPTY_ROOT, toHex } from '../core/hash.js';
import { type NoteVerifier, SIG_ED25519, keyIdOf, parseCosignerVkey, parseVkey } from '../core/note.js';
import { type Policy, PolicyError, parsePolicy, simpleThreshold, thresholdPolicy } from '../core/tlog-policy.js';
import { ClientConfigError } from './errors.js';
import { type Quorum, policyQuorum } from './rules.js';
import { fsReason } from '../store/files.js';

export interface TrustPin {
  /** Lowercase hex SHA-256 of the log's raw Ed25519 public key. */
  keyId: string;
  /** The log's origin and note verifier key; learnt at init and checked against keyId. */
  origin?: string;
  vkey?: string;
  /** The pinned checkpoint. */
  treeSize: number;
  rootHash: string;
  /** The witnesses and the quorum of their cosignatures a checkpoint needs (C2SP tlog-policy). */
  policy: Policy;
  /**
   * The policy's file, relative to the configuration's directory. Absent: the policy is
   * the M-of-N of the TOML's own `witnesses` and `witness_threshold` (older files).
   */
  policyFile?: string;
}

export interface LedgerConfig {
  endpoint?: string;
  tenant?: string;
  scope?: string;
  /** Where to read tiles from when not the endpoint (a CDN URL or a directory). */
  tiles?: string;
  trust: TrustPin;
}

export interface LoadedConfig {
  readonly path: string;
  /** The file's contents. */
  readonly file: LedgerConfig;
  /** The effective settings (environment overrides applied). */
  readonly effective: LedgerConfig;
  readonly overridden: { endpoint: boolean; tenant: boolean };
}

type Env = NodeJS.ProcessEnv;

function xdgDir(env: Env, variable: string, fallback: string[]): string {
  const v = env[variable];
  if (v && isAbsolute(v)) return v;
  return join(homedir(), ...fallback);
}

/** --config, else $XDG_CONFIG_HOME/stele/ledger.toml, else ~/.config/stele/ledger.toml. */
export function configPath(explicit?: string, env: Env = process.env): string {
  if (explicit) return resolve(explicit);
  return join(xdgDir(env, 'XDG_CONFIG_HOME', ['.config']), 'stele', 'ledger.toml');
}

/** $XDG_DATA_HOME/stele/proofs, else ~/.local/share/stele/proofs. */
export function proofsDir(env: Env = process.env): string {
  return join(xdgDir(env, 'XDG_DATA_HOME', ['.local', 'share']), 'stele', 'proofs');
}

const HEX64 = /^[0-9a-f]{64}$/;

/** Validates a key id as given by a user (`--trust-key`); returns it lowercase. */
export function parseKeyId(s: string): string | null {
  const k = s.trim().toLowerCase();
  return HEX64.test(k) ? k : null;
}

function table(v: unknown, path: string, where: string): Record<string, unknown> {
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new ClientConfigError(`${where}: [${path}] is not a table`);
  return v as Record<string, unknown>;
}

function optString(t: Record<string, unknown>, key: string, path: string, where: string): string | undefined {
  const v = t[key];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new ClientConfigError(`${where}: ${path}.${key} must be a string`);
  return v;
}

function toInt(v: unknown, path: string, where: string): number {
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
    throw new ClientConfigError(`${where}: ${path} must be a non-negative integer`);
  return n;
}

/** The log verifier a pin implies, checked against its key id. */
export function pinnedLogVerifier(trust: TrustPin, where = 'configuration'): NoteVerifier | null {
  if (!trust.vkey) return null;
  let v: NoteVerifier;
  try {
    v = parseVkey(trust.vkey);
  } catch (e) {
    throw new ClientConfigError(`${where}: ledger.trust.vkey is malformed: ${(e as Error).message}`);
  }
  if (v.type !== SIG_ED25519)
    throw new ClientConfigError(`${where}: ledger.trust.vkey is not an Ed25519 (type 0x01) log key`);
  if (keyIdOf(v.publicKey) !== trust.keyId)
    throw new ClientConfigError(`${where}: ledger.trust.vkey does not hash to the pinned key_id`);
  if (trust.origin !== undefined && trust.origin !== v.name)
    throw new ClientConfigError(`${where}: ledger.trust.origin does not match the vkey's name`);
  return v;
}

/** The policy's witness keys and its quorum over the ones whose cosignatures verify. */
export function trustWitnesses(
  trust: TrustPin,
  where = 'configuration',
): { witnesses: NoteVerifier[]; quorum: Quorum } {
  const witnesses = trust.policy.witnesses.map((w) => {
    try {
      return parseCosignerVkey(w.vkey);
    } catch (e) {
      throw new ClientConfigError(`${where}: witness ${w.name}: ${(e as Error).message}`);
    }
  });
  return { witnesses, quorum: policyQuorum(trust.policy, witnesses) };
}

/**
 * Checks a policy against the pinned log: its log lines, if any, must include the pinned
 * key (tlog-policy: "all of the listed logs are accepted"; this client follows the one log
 * its key id names, so the others are unused), and every witness key must be one this
 * client verifies. Returns the policy's vkey for the pinned key, if it lists one.
 */
export function checkPolicy(policy: Policy, keyId: string, where: string): string | undefined {
  let mine: string | undefined;
  for (const l of policy.logs) {
    try {
      const v = parseVkey(l.vkey);
      if (v.type === SIG_ED25519 && keyIdOf(v.publicKey) === keyId) mine = l.vkey;
    } catch {
      // a log of another key type: not the pinned one
    }
  }
  if (policy.logs.length > 0 && mine === undefined)
    throw new ClientConfigError(
      `${where}: none of its ${policy.logs.length} log line(s) is the pinned log key ${keyId.slice(0, 16)}…`,
    );
  trustWitnesses({ keyId, treeSize: 0, rootHash: '', policy }, where);
  return mine;
}

/** Parses a tlog-policy text; errors name the file and line. */
export function policyFromText(text: string, where: string): Policy {
  try {
    return parsePolicy(text);
  } catch (e) {
    if (e instanceof PolicyError) throw new ClientConfigError(`${where}: ${e.message}`);
    throw e;
  }
}

/** `ledger.toml` → `ledger.policy`, beside it. */
export function defaultPolicyFile(configFile: string): string {
  return `${basename(configFile).replace(/\.toml$/, '')}.policy`;
}

/** Validates the parsed TOML document. */
export function configFromToml(doc: Record<string, unknown>, where: string): LedgerConfig {
  const ledger = table(doc.ledger, 'ledger', where);
  if (doc.ledger === undefined) throw new ClientConfigError(`${where}: no [ledger] table`);
  const t = table(ledger.trust, 'ledger.trust', where);
  if (ledger.trust === undefined)
    throw new ClientConfigError(`${where}: no [ledger.trust] table (run \`stele ledger init\`)`);
  const keyId = optString(t, 'key_id', 'ledger.trust', where);
  if (!keyId || !HEX64.test(keyId))
    throw new ClientConfigError(`${where}: ledger.trust.key_id must be 64 lowercase hex characters`);
  const rootHash = optString(t, 'root_hash', 'ledger.trust', where) ?? toHex(EMPTY_ROOT);
  if (!HEX64.test(rootHash))
    throw new ClientConfigError(`${where}: ledger.trust.root_hash must be 64 lowercase hex characters`);
  const treeSize = t.tree_size === undefined ? 0 : toInt(t.tree_size, 'ledger.trust.tree_size', where);
  const rawWitnesses = t.witnesses === undefined ? [] : t.witnesses;
  if (!Array.isArray(rawWitnesses))
    throw new ClientConfigError(`${where}: ledger.trust.witnesses must be an array of tables`);
  const policyFile = optString(t, 'policy', 'ledger.trust', where);
  if (policyFile !== undefined && (rawWitnesses.length > 0 || t.witness_threshold !== undefined)) {
    throw new ClientConfigError(
      `${where}: ledger.trust has both a policy file and witnesses/witness_threshold; the policy file says which witnesses count`,
    );
  }
  const witnesses = rawWitnesses.map((w, i) => {
    const wt = table(w, `ledger.trust.witnesses[${i}]`, where);
    const vkey = optString(wt, 'vkey', `ledger.trust.witnesses[${i}]`, where);
    if (!vkey) throw new ClientConfigError(`${where}: ledger.trust.witnesses[${i}] has no vkey`);
    let v: NoteVerifier;
    try {
      v = parseCosignerVkey(vkey);
    } catch (e) {
      throw new ClientConfigError(`${where}: ledger.trust.witnesses[${i}].vkey: ${(e as Error).message}`);
    }
    return { name: v.name, vkey };
  });
  const witnessThreshold =
    t.witness_threshold === undefined ? 0 : toInt(t.witness_threshold, 'ledger.trust.witness_threshold', where);
  if (witnessThreshold > witnesses.length) {
    throw new ClientConfigError(
      `${where}: witness_threshold ${witnessThreshold} exceeds the ${witnesses.length} pinned witnesses`,
    );
  }
  let policy: Policy;
  try {
    policy = thresholdPolicy([], witnesses, witnessThreshold);
  } catch (e) {
    throw new ClientConfigError(`${where}: ledger.trust.witnesses: ${(e as Error).message}`);
  }
  const trust: TrustPin = { keyId, treeSize, rootHash, policy };
  if (policyFile !== undefined) trust.policyFile = policyFile;
  const origin = optString(t, 'origin', 'ledger.trust', where);
  const vkey = optString(t, 'vkey', 'ledger.trust', where);
  if (origin !== undefined) trust.origin = origin;
  if (vkey !== undefined) trust.vkey = vkey;
  pinnedLogVerifier(trust, where);
  const cfg: LedgerConfig = { trust };
  for (const k of ['endpoint', 'tenant', 'scope', 'tiles'] as const) {
    const v = optString(ledger, k, 'ledger', where);
    if (v !== undefined) cfg[k] = v;
  }
  return cfg;
}

export function configToToml(c: LedgerConfig): string {
  const ledger: Record<string, unknown> = {};
  for (const k of ['endpoint', 'tenant', 'scope', 'tiles'] as const) if (c[k] !== undefined) ledger[k] = c[k];
  const trust: Record<string, unknown> = {
    key_id: c.trust.keyId,
    tree_size: c.trust.treeSize,
    root_hash: c.trust.rootHash,
  };
  if (c.trust.origin !== undefined) trust.origin = c.trust.origin;
  if (c.trust.vkey !== undefined) trust.vkey = c.trust.vkey;
  if (c.trust.policyFile !== undefined) trust.policy = c.trust.policyFile;
  else {
    const k = simpleThreshold(c.trust.policy);
    if (k === null) throw new ClientConfigError('a witness policy other than M of N needs a policy file');
    trust.witness_threshold = k;
    if (c.trust.policy.witnesses.length > 0)
      trust.witnesses = c.trust.policy.witnesses.map((w) => ({ name: w.name, vkey: w.vkey }));
  }
  ledger.trust = trust;
  return (
    '# Stele ledger client configuration, written by `stele ledger init`.\n' +
    '# [ledger.trust] pins the log key and a checkpoint, and names the witness policy (C2SP\n' +
    '# tlog-policy, beside this file); change them with `stele ledger trust-config`.\n' +
    `${stringifyToml({ ledger })}\n`
  );
}

function readError(path: string, e: unknown): ClientConfigError {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT')
    return new ClientConfigError(`no configuration at ${path}; run \`stele ledger init\` first (or pass --config)`);
  return new ClientConfigError(`cannot read configuration ${path}: ${fsReason(e)}`);
}

/**
 * Reads and validates the file (no environment overrides). Small files read once per command,
 * with blocking calls: a hop to libuv's pool would cost more CPU than the read.
 */
export async function readConfigFile(path: string): Promise<LedgerConfig> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw readError(path, e);
  }
  let doc: Record<string, unknown>;
  try {
    doc = parseToml(text) as Record<string, unknown>;
  } catch (e) {
    const msg = e instanceof TomlError ? `line ${e.line}: ${e.message.split('\n')[0]}` : (e as Error).message;
    throw new ClientConfigError(`${path} is not valid TOML (${msg})`);
  }
  const cfg = configFromToml(doc, path);
  if (cfg.trust.policyFile !== undefined) {
    const file = resolve(dirname(path), cfg.trust.policyFile);
    let policyText: string;
    try {
      policyText = readFileSync(file, 'utf8');
    } catch (e) {
      throw new ClientConfigError(`cannot read the trust policy ${file} named in ${path}: ${fsReason(e)}`);
    }
    cfg.trust.policy = policyFromText(policyText, file);
    const vkey = checkPolicy(cfg.trust.policy, cfg.trust.keyId, file);
    if (vkey !== undefined && cfg.trust.vkey !== undefined && vkey !== cfg.trust.vkey) {
      throw new ClientConfigError(
        `${file}: its log line for key id ${cfg.trust.keyId.slice(0, 16)}… differs from ledger.trust.vkey in ${path}`,
      );
    }
  }
  return cfg;
}

/** Loads the configuration and applies STELE_LEDGER_ENDPOINT / STELE_LEDGER_TENANT. */
export async function loadConfig(explicitPath?: string, env: Env = process.env): Promise<LoadedConfig> {
  const path = configPath(explicitPath, env);
  const file = await readConfigFile(path);
  const effective: LedgerConfig = { ...file, trust: { ...file.trust } };
  const overridden = { endpoint: false, tenant: false };
  if (env.STELE_LEDGER_ENDPOINT) {
    effective.endpoint = env.STELE_LEDGER_ENDPOINT;
    overridden.endpoint = true;
  }
  if (env.STELE_LEDGER_TENANT) {
    effective.tenant = env.STELE_LEDGER_TENANT;
    overridden.tenant = true;
  }
  return { path, file, effective, overridden };
}

async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  await fs.writeFile(tmp, text, { mode: 0o644 });
  await fs.rename(tmp, path);
}

/**
 * Writes the file atomically (temporary file, then rename), and the policy file first when
 * `policyText` is given (verbatim, comments and all: what the user reviewed).
 */
export async function saveConfig(path: string, c: LedgerConfig, policyText?: string): Promise<void> {
  const text = configToToml(c);
  try {
    await fs.mkdir(dirname(path), { recursive: true, mode: 0o700 });
    if (policyText !== undefined) {
      if (c.trust.policyFile === undefined)
        throw new ClientConfigError('a policy text needs [ledger.trust] policy to name its file');
      await writeAtomically(resolve(dirname(path), c.trust.policyFile), policyText);
    }
    await writeAtomically(path, text);
  } catch (e) {
    if (e instanceof ClientConfigError) throw e;
    throw new ClientConfigError(`cannot write configuration ${path}: ${fsReason(e)}`);
  }
}

/**
 * Moves the pinned checkpoint forward from `from` to `to` (a consistency proof between
 * them must already have been verified). Re-reads the file first and leaves it alone if
 * another process has changed the pin meanwhile. Returns true if the pin moved.
 */
export async function advancePin(
  path: string,
  from: { treeSize: number; rootHash: string },
  to: { treeSize: number; rootHash: string },
): Promise<boolean> {
  if (to.treeSize <= from.treeSize) return false;
  const current = await readConfigFile(path);
  if (current.trust.treeSize !== from.treeSize || current.trust.rootHash !== from.rootHash) return false;
  current.trust.treeSize = to.treeSize;
  current.trust.rootHash = to.rootHash;
  await saveConfig(path, current);
  return true;
}
