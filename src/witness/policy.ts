// The sequencer's witness policy read from a C2SP tlog-policy file (`stele serve
// --witness-policy`): which witnesses to ask and which quorum of their cosignatures lets a
// checkpoint be published. tlog-policy gives a witness line an optional URL and recommends
// "that it is the witness' submission prefix URL, as defined by the tlog-witness protocol":
// that is where the log sends add-checkpoint. A witness line without a URL takes it from a
// `--witness <vkey>=<url>` with the same key (which also overrides a URL the line has).
import { toHex } from '../core/hash.js';
import { type NoteVerifier, SIG_COSIGNATURE_V1, formatVkey, parseVkey } from '../core/note.js';
import { type Policy, type PolicyWitness, quorumMet, splitVkey, thresholdPolicy } from '../core/tlog-policy.js';
import type { WitnessEndpoint } from './collector.js';

export class WitnessPolicyError extends Error {
  override name = 'WitnessPolicyError';
}

export interface ServedWitnessPolicy {
  readonly endpoints: WitnessEndpoint[];
  /** Over the verifier names of the witnesses that cosigned. */
  readonly quorum: (cosigned: ReadonlySet<string>) => boolean;
  /** What /api/ledger/key publishes: this log, the witnesses (no URLs) and the quorum. */
  readonly policy: Policy;
}

const sameKey = (a: string, b: string): boolean => {
  const [x, y] = [splitVkey(a), splitVkey(b)];
  return x.name === y.name && x.type === y.type && toHex(x.key) === toHex(y.key);
};

/** The endpoints and quorum of a policy for the log `log`; `given` are the `--witness` settings. */
export function servedPolicy(
  policy: Policy,
  log: NoteVerifier,
  given: readonly WitnessEndpoint[],
): ServedWitnessPolicy {
  const logVkey = formatVkey(log);
  if (policy.logs.length > 0 && !policy.logs.some((l) => sameKey(l.vkey, logVkey))) {
    throw new WitnessPolicyError(
      `the witness policy lists ${policy.logs.length} log(s), but not this log (${logVkey})`,
    );
  }
  const unused = new Set(given);
  const byName = new Map<string, string>();
  const endpoints = policy.witnesses.map((w): WitnessEndpoint => {
    let verifier: NoteVerifier;
    try {
      verifier = parseVkey(w.vkey);
    } catch (e) {
      throw new WitnessPolicyError(
        `witness ${w.name}: ${(e as Error).message} (this log asks only Ed25519 cosignature/v1 witnesses)`,
      );
    }
    if (verifier.type !== SIG_COSIGNATURE_V1)
      throw new WitnessPolicyError(`witness ${w.name}: not a cosignature/v1 (type 0x04) key`);
    if (byName.has(verifier.name))
      throw new WitnessPolicyError(
        `witnesses ${byName.get(verifier.name)} and ${w.name} share the key name ${verifier.name}`,
      );
    byName.set(verifier.name, w.name);
    const paired = given.find((g) => formatVkey(g.verifier) === formatVkey(verifier));
    if (paired) unused.delete(paired);
    const url = paired?.url ?? w.url;
    if (!url)
      throw new WitnessPolicyError(
        `witness ${w.name} has no URL: add its submission prefix to its witness line, or pass --witness '${w.vkey}=<url>'`,
      );
    return { verifier, url };
  });
  const stray = [...unused][0];
  if (stray) throw new WitnessPolicyError(`--witness ${stray.verifier.name} is not in the witness policy`);
  const quorum = (cosigned: ReadonlySet<string>) =>
    quorumMet(policy, new Set([...cosigned].map((n) => byName.get(n)).filter((n): n is string => n !== undefined)));
  const published: Policy = {
    logs: [{ vkey: logVkey }],
    witnesses: policy.witnesses.map((w): PolicyWitness => ({ name: w.name, vkey: w.vkey })),
    groups: policy.groups,
    quorum: policy.quorum,
  };
  return { endpoints, quorum, policy: published };
}

/** The `--witness`/`--witness-threshold` setting as a policy: M of all N (0: `quorum none`). */
export function thresholdServedPolicy(
  log: NoteVerifier,
  endpoints: readonly WitnessEndpoint[],
  threshold: number,
): Policy {
  return thresholdPolicy(
    [{ vkey: formatVkey(log) }],
    endpoints.map((e) => ({ name: e.verifier.name, vkey: formatVkey(e.verifier) })),
    threshold,
  );
}
