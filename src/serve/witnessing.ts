// Who vouches for a log's checkpoints, for every backend of `stele serve` alike (the local
// directory and S3/AWS): the witnesses each checkpoint is sent to (--witness, a
// --witness-policy file, --witness-threshold; demo witnesses only on a local directory), the
// tlog-mirrors it is pushed to (--mirror, --mirror-quorum, --mirror-timeout), the hook the
// sequencer calls before it publishes, and what /api/ledger/key and explorer.json advertise.
// The settings are read (and a bad one refused) before the log opens; they bind to the log
// once its key and its public objects are known. A witness's last cosigned size is not kept
// here: the collector asks the witnesses at start (checkWitnessedSizes), the mirror pusher its
// mirrors, and both learn from a 409, so a restarted or replacing sequencer needs nothing from
// the one before it (and one restored from a backup meets the party that saw more).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { MirrorInfo } from '../api/ledger.js';
import { type NoteVerifier, formatVkey } from '../core/note.js';
import {
  type Policy,
  PolicyError,
  formatPolicy,
  minimumCosigners,
  parsePolicy,
  withCosigners,
} from '../core/tlog-policy.js';
import { ConfigError } from '../settings/errors.js';
import type { ServeConfig } from './config.js';
import type { MirrorEndpoint } from '../mirror/client.js';
import { MirrorPusher } from '../mirror/pusher.js';
import type { CheckpointWitnessing, PublishedCheckpoint } from '../sequencer/contract.js';
import type { ObjectReader } from '../store/store.js';
import { type WitnessEndpoint, WitnessCollector } from '../witness/collector.js';
import { type RunningWitness, parseWitnessSpec, startWitness } from '../witness/host.js';
import { WitnessPolicyError, servedPolicy, thresholdServedPolicy } from '../witness/policy.js';
import { originHash } from '../witness/protocol.js';
import { fsReason } from '../store/files.js';

/** The witness and mirror settings of one start, parsed and read, not yet bound to a log. */
export interface WitnessSettings {
  readonly given: readonly WitnessEndpoint[];
  /** The --witness-policy file's parsed text, if one is set. */
  readonly policy?: { readonly path: string; readonly parsed: Policy };
  readonly threshold?: number;
  readonly demo: number;
  readonly mirrors: readonly MirrorEndpoint[];
  readonly mirrorQuorum: number;
  readonly mirrorTimeoutMs?: number;
}

/** What a log advertises: its witnesses, the policy (mirrors included) and where its mirrors serve it. */
export interface AdvertisedWitnessing {
  readonly witnesses: readonly WitnessEndpoint[];
  readonly policy: Policy;
  readonly mirrors: readonly MirrorInfo[];
}

/** A log's witnessing, running: the sequencer's hook, and the mirrors fed after each publish. */
export interface LogWitnessing extends AdvertisedWitnessing {
  /** For the sequencer (undefined: it publishes on its own signature). */
  readonly hook: CheckpointWitnessing | undefined;
  /** After each publish (and once at open): brings mirrors that are not required up to date. */
  published(cp: PublishedCheckpoint): void;
  /** Waits for mirror pushes in flight and stops the demo witnesses; after the sequencer closed. */
  close(): Promise<void>;
}

/**
 * Reads the settings of `cfg`: the --witness specs, the policy file (refused with one line if
 * unreadable or invalid), the mirrors. Throws ConfigError; starts nothing.
 */
export function readWitnessSettings(cfg: ServeConfig): WitnessSettings {
  const given = specs(cfg.witnesses, '--witness');
  const mirrors = specs(cfg.mirrors, '--mirror');
  const mirrorQuorum = cfg.mirrorQuorum ?? 0;
  if (mirrorQuorum > mirrors.length)
    throw new ConfigError(
      `--mirror: ${mirrorQuorum} mirror cosignatures required, but only ${mirrors.length} mirror(s) configured`,
    );
  const common = {
    given,
    demo: cfg.demoWitnesses ?? 0,
    mirrors,
    mirrorQuorum,
    ...(cfg.mirrorTimeoutMs !== undefined ? { mirrorTimeoutMs: cfg.mirrorTimeoutMs } : {}),
    ...(cfg.witnessThreshold !== undefined ? { threshold: cfg.witnessThreshold } : {}),
  };
  if (cfg.witnessPolicy === undefined) return common;
  if (cfg.demoWitnesses)
    throw new ConfigError(
      '--demo-witnesses cannot be combined with --witness-policy: name every witness in the policy',
    );
  let text: string;
  try {
    text = readFileSync(cfg.witnessPolicy, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read the witness policy ${cfg.witnessPolicy}: ${fsReason(e)}`);
  }
  try {
    return { ...common, policy: { path: cfg.witnessPolicy, parsed: parsePolicy(text) } };
  } catch (e) {
    if (e instanceof PolicyError) throw new ConfigError(`witness policy ${cfg.witnessPolicy}: ${e.message}`);
    throw e;
  }
}

/** `<vkey>=<url>` entries, comma-separated, of the flag `flag`. */
function specs(list: string | undefined, flag: string): WitnessEndpoint[] {
  try {
    return (list ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((s) => parseWitnessSpec(s));
  } catch (e) {
    throw new ConfigError(`${flag}: ${(e as Error).message}`);
  }
}

/**
 * The external witnesses (demo ones not included) and their quorum for the log `log`: from the
 * policy file, else the --witness list with --witness-threshold (M of N, default all).
 */
function externalWitnesses(
  s: WitnessSettings,
  log: NoteVerifier,
): { endpoints: WitnessEndpoint[]; quorum?: (cosigned: ReadonlySet<string>) => boolean; policy?: Policy } {
  if (!s.policy) return { endpoints: [...s.given] };
  try {
    const served = servedPolicy(s.policy.parsed, log, s.given);
    return { endpoints: served.endpoints, quorum: served.quorum, policy: served.policy };
  } catch (e) {
    if (e instanceof WitnessPolicyError) throw new ConfigError(`witness policy ${s.policy.path}: ${e.message}`);
    throw e;
  }
}

/** The policy a log with these witnesses advertises, with the mirrors as witness lines beside them. */
function advertise(
  s: WitnessSettings,
  log: NoteVerifier,
  endpoints: readonly WitnessEndpoint[],
  policy: Policy | undefined,
): AdvertisedWitnessing {
  const witnessPolicy =
    policy ?? thresholdServedPolicy(log, endpoints, Math.min(s.threshold ?? endpoints.length, endpoints.length));
  return {
    witnesses: endpoints,
    policy: s.mirrors.length > 0 ? withMirrors(witnessPolicy, s) : witnessPolicy,
    mirrors: mirrorInfo(s.mirrors, log.name),
  };
}

/**
 * What an API replica advertises for the log the sequencer witnesses with the same settings:
 * the same witnesses, policy and mirrors, though it asks no witness itself.
 */
export function advertisedWitnessing(s: WitnessSettings, log: NoteVerifier): AdvertisedWitnessing {
  const { endpoints, policy } = externalWitnesses(s, log);
  return advertise(s, log, endpoints, policy);
}

/**
 * Binds the settings to the log `log` whose published objects are `objects`: starts its demo
 * witnesses (their state under `dataDir`), the collector and the mirror pusher.
 */
export async function openWitnessing(
  s: WitnessSettings,
  log: NoteVerifier,
  objects: ObjectReader,
  logger: Logger,
  dataDir: string,
): Promise<LogWitnessing> {
  const external = externalWitnesses(s, log);
  let pusher: MirrorPusher | undefined;
  try {
    pusher =
      s.mirrors.length > 0
        ? new MirrorPusher({
            mirrors: s.mirrors,
            log,
            required: s.mirrorQuorum,
            objects,
            logger,
            ...(s.mirrorTimeoutMs !== undefined ? { timeoutMs: s.mirrorTimeoutMs } : {}),
          })
        : undefined;
  } catch (e) {
    throw new ConfigError(`--mirror: ${(e as Error).message}`);
  }
  const demo = await startDemoWitnesses(s.demo, dataDir, log, logger);
  const endpoints = [...external.endpoints, ...demo.map((d) => ({ verifier: d.verifier, url: d.url }))];
  let advertised: AdvertisedWitnessing;
  let collector: WitnessCollector | undefined;
  try {
    advertised = advertise(s, log, endpoints, external.policy);
    collector =
      endpoints.length > 0
        ? new WitnessCollector({
            witnesses: endpoints,
            // One line naming the witness and the setting that names it; the start goes on.
            onUnreachable: (name, url, reason) =>
              logger.warn(
                { witness: name, url, setting: '--witness / STELE_WITNESSES (or the policy file)', reason },
                `witness ${name} at ${url} cannot be reached at start: ${reason}`,
              ),
            ...(external.quorum ? { quorum: external.quorum } : { threshold: s.threshold ?? endpoints.length }),
          })
        : undefined;
  } catch (e) {
    await Promise.all(demo.map((d) => d.close()));
    throw e instanceof ConfigError ? e : new ConfigError(`witnesses: ${(e as Error).message}`);
  }
  return {
    ...advertised,
    hook: pusher ? pusher.witnessing(collector) : collector,
    published: (cp) => pusher?.published(cp.note, cp.size),
    async close() {
      await pusher?.idle();
      await Promise.all(demo.map((d) => d.close()));
    },
  };
}

/** The fields of /api/ledger/key (and explorer.json) that say who vouches for the log. */
export function ledgerWitnessFields(a: AdvertisedWitnessing) {
  return {
    witnesses: a.witnesses.map((e) => ({ name: e.verifier.name, publicKey: e.verifier.publicKey })),
    witnessThreshold: minimumCosigners(a.policy),
    witnessPolicy: formatPolicy(a.policy),
    ...(a.mirrors.length > 0 ? { mirrors: a.mirrors } : {}),
  };
}

/**
 * The policy the log publishes, with its mirrors: each a witness line (a mirror cosigns as a
 * witness does), and the --mirror-quorum of them required beside the witnesses' quorum.
 */
function withMirrors(policy: Policy, s: WitnessSettings): Policy {
  const cosigners = s.mirrors.map((m) => ({ name: m.verifier.name, vkey: formatVkey(m.verifier) }));
  try {
    return withCosigners(policy, cosigners, s.mirrorQuorum, 'mirrors');
  } catch (e) {
    throw new ConfigError(`--mirror: ${(e as Error).message}`);
  }
}

/** What /api/ledger/key says of each mirror: its key, and where its copy of this log is served. */
function mirrorInfo(mirrors: readonly MirrorEndpoint[], origin: string): MirrorInfo[] {
  return mirrors.map((m) => {
    const u = new URL(m.url);
    u.username = u.password = u.search = u.hash = '';
    const base = u.toString().replace(/\/$/, '');
    return { name: m.verifier.name, vkey: formatVkey(m.verifier), tiles: `${base}/${originHash(origin)}/` };
  });
}

/**
 * Demo mode's witnesses: in-process, on loopback, so the default log is witnessed. Their state
 * is in the data directory on purpose (their keys must move with it, or the policy clients
 * pinned would change), so they protect against nothing a restore of it does: said at start.
 */
function startDemoWitnesses(n: number, dataDir: string, log: NoteVerifier, logger: Logger): Promise<RunningWitness[]> {
  if (n > 0)
    logger.warn(
      'the demo witnesses run in this process with their state in the data directory: they protect against nothing a restore of it does; use witnesses run by others (--witness) for that',
    );
  return Promise.all(
    Array.from({ length: n }, (_, i) =>
      startWitness({
        dataDir: join(dataDir, 'witnesses', `w${i + 1}`),
        name: `witness${i + 1}.demo.stele`,
        logs: [log],
        host: '127.0.0.1',
        port: 0,
        logger,
      }),
    ),
  );
}
