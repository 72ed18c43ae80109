// The settings that define what a log promises its clients (which witnesses and mirrors
// cosign its checkpoints and what quorum publishes one) are stored with the log at its first
// start: private/log-settings.json in a local data directory, the same name under the private
// prefix of an S3 log (src/serve/settings-home.ts). A later start that omits them uses the
// stored ones; one that gives any other (adds a witness, a mirror, demo witnesses, a
// threshold or a policy the log was not started with, or changes one) is refused unless it
// says --reconfigure. So a restart never silently changes the policy clients pinned: one
// that forgets `--witness` would publish checkpoints they reject, one that adds witnesses
// would change the quorum under them (issue 20, issue 31).
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { ConfigError } from '../settings/errors.js';
import type { ServeConfig } from './config.js';
import { isAbsent } from '../store/files.js';
import type { SettingsHome, StoredText } from './settings-home.js';

/** What is stored: each setting as the log was started with it (null: not set). */
export interface LogSettings {
  readonly witnesses: readonly string[] | null;
  readonly witnessThreshold: number | null;
  readonly witnessPolicy: { readonly path: string; readonly sha256: string } | null;
  readonly demoWitnesses: number | null;
  readonly mirrors: readonly string[] | null;
  readonly mirrorQuorum: number | null;
}

const NAMES: Record<keyof LogSettings, string> = {
  witnesses: 'witnesses (--witness)',
  witnessThreshold: 'witness threshold (--witness-threshold)',
  witnessPolicy: 'witness policy (--witness-policy)',
  demoWitnesses: 'demo witnesses (--demo-witnesses)',
  mirrors: 'mirrors (--mirror)',
  mirrorQuorum: 'mirror quorum (--mirror-quorum)',
};

/** The settings a start runs with, and how to record them once the log has opened. */
export interface ReconciledSettings {
  readonly cfg: ServeConfig;
  /** Settings this start omitted and took from the log. */
  readonly applied: (keyof LogSettings)[];
  /** Stores the effective settings with the log; call only once the log has opened (a refused start writes nothing). */
  record(): Promise<void>;
}

/**
 * Applies the settings stored in `home` to `cfg` where this start omits them, and refuses a
 * start that gives any setting other than the stored one (added or changed; removing one takes
 * --reconfigure without it) unless `cfg.reconfigure`, in which case this start's settings
 * (given or not) replace them. Adding counts: witnesses added to a log change the quorum its
 * clients pinned.
 */
export async function reconcileLogSettings(cfg: ServeConfig, home: SettingsHome): Promise<ReconciledSettings> {
  const given = await settingsOf(cfg);
  const found = await home.read();
  // --reconfigure ignores what is stored (even if unreadable) but still replaces that version only.
  const stored = cfg.reconfigure || found === null ? null : parseSettings(found, home.where);
  const applied: (keyof LogSettings)[] = [];
  let effective: ServeConfig = cfg;
  let settings: LogSettings = given;
  if (stored !== null) {
    for (const key of Object.keys(NAMES) as (keyof LogSettings)[]) {
      if (JSON.stringify(given[key]) === JSON.stringify(stored[key])) continue;
      if (given[key] !== null) {
        throw new ConfigError(
          `this log was started with ${NAMES[key]} ${describe(stored[key])}, and this start gives ${describe(given[key])}: ` +
            'clients that pinned the log rely on them; pass --reconfigure to change them on purpose',
        );
      }
      effective = withStored(effective, key, stored);
      settings = { ...settings, [key]: stored[key] };
      applied.push(key);
    }
    // A stored policy file must still say what it said: an edited file is a changed setting.
    if (applied.includes('witnessPolicy')) {
      const now = await fileDigest(stored.witnessPolicy!.path);
      if (now !== stored.witnessPolicy!.sha256) {
        throw new ConfigError(
          `the witness policy ${stored.witnessPolicy!.path} stored with this log ${now === null ? 'is gone' : 'has changed'}; pass --reconfigure with the policy to use`,
        );
      }
    }
  }
  const text = `${JSON.stringify(settings, null, 2)}\n`;
  return {
    cfg: effective,
    applied,
    async record() {
      if (stored !== null && JSON.stringify(stored) === JSON.stringify(settings)) return;
      if (await home.write(text, found?.version ?? null)) return;
      // Another start stored settings after this one read them: the same ones are fine.
      const now = await home.read();
      if (now?.text === text) return;
      throw new ConfigError(
        `another start stored other settings in ${home.where} while this one opened the log; start again to compare with them`,
      );
    },
  };
}

async function settingsOf(cfg: ServeConfig): Promise<LogSettings> {
  let policy: LogSettings['witnessPolicy'] = null;
  if (cfg.witnessPolicy !== undefined) {
    const sha256 = await fileDigest(cfg.witnessPolicy);
    if (sha256 === null) throw new ConfigError(`cannot read the witness policy ${cfg.witnessPolicy}`);
    policy = { path: cfg.witnessPolicy, sha256 };
  }
  return {
    // The order of --witness flags says nothing: compare them as a set.
    witnesses: cfg.witnesses
      ? cfg.witnesses
          .split(',')
          .map((w) => w.trim())
          .filter(Boolean)
          .sort()
      : null,
    witnessThreshold: cfg.witnessThreshold ?? null,
    witnessPolicy: policy,
    demoWitnesses: cfg.demoWitnesses ? cfg.demoWitnesses : null,
    mirrors: cfg.mirrors
      ? cfg.mirrors
          .split(',')
          .map((m) => m.trim())
          .filter(Boolean)
          .sort()
      : null,
    mirrorQuorum: cfg.mirrorQuorum ? cfg.mirrorQuorum : null,
  };
}

function withStored(cfg: ServeConfig, key: keyof LogSettings, stored: LogSettings): ServeConfig {
  switch (key) {
    case 'witnesses':
      return { ...cfg, witnesses: stored.witnesses!.join(',') };
    case 'witnessThreshold':
      return { ...cfg, witnessThreshold: stored.witnessThreshold! };
    case 'witnessPolicy':
      return { ...cfg, witnessPolicy: stored.witnessPolicy!.path };
    case 'demoWitnesses':
      return { ...cfg, demoWitnesses: stored.demoWitnesses! };
    case 'mirrors':
      return { ...cfg, mirrors: stored.mirrors!.join(',') };
    case 'mirrorQuorum':
      return { ...cfg, mirrorQuorum: stored.mirrorQuorum! };
  }
}

function parseSettings(found: StoredText, where: string): LogSettings {
  try {
    const doc = JSON.parse(found.text) as Partial<LogSettings>;
    return {
      witnesses: doc.witnesses ?? null,
      witnessThreshold: doc.witnessThreshold ?? null,
      witnessPolicy: doc.witnessPolicy ?? null,
      demoWitnesses: doc.demoWitnesses ?? null,
      mirrors: doc.mirrors ?? null,
      mirrorQuorum: doc.mirrorQuorum ?? null,
    };
  } catch {
    throw new ConfigError(
      `${where} is not valid JSON: restore it, or pass --reconfigure with the settings this log should have`,
    );
  }
}

async function fileDigest(path: string): Promise<string | null> {
  try {
    return createHash('sha256')
      .update(await fs.readFile(path))
      .digest('hex');
  } catch (e) {
    if (isAbsent(e)) return null;
    throw e;
  }
}

function describe(v: unknown): string {
  if (v === null) return 'none';
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.map((w: string) => w.split('+')[0]).join(', ');
  if (typeof v === 'object') return (v as { path: string }).path;
  return String(v);
}
