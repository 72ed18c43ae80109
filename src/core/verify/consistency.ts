// Rule 2: a checkpoint is consistent with the pinned one (or with any older tree the caller
// names): the older tree is a prefix of the newer, by recomputing both roots from one
// consistency proof (RFC 9162 §2.1.4). One home for the CLI (API, tiles, mirrors, proof
// files), the explorer, the monitor, the hammer and the witness.
import { bytesEqual, toHex } from '../hash.js';
import { rootsFromConsistencyProof } from '../merkle.js';
import { type Outcome, type StatusOutcome, short } from './rules.js';

/**
 * The consistency proof itself: `proof` takes the tree (size1, root1) to (size2, root2).
 * What every rule-2 path ends in, and what a requested `--from/--to` proof is checked by.
 */
export function checkConsistencyProof(
  first: { size: number; root: Uint8Array },
  second: { size: number; root: Uint8Array },
  proof: readonly Uint8Array[],
): Outcome {
  const range = `sizes ${first.size} → ${second.size}`;
  if (
    !Number.isSafeInteger(first.size) ||
    !Number.isSafeInteger(second.size) ||
    first.size < 0 ||
    first.size > second.size
  )
    return { ok: false, detail: `${range}: not a growing pair of tree sizes` };
  if (first.size === second.size)
    return proof.length === 0 && bytesEqual(first.root, second.root)
      ? { ok: true, detail: `${range}: the same tree` }
      : { ok: false, detail: `${range}: one size with two roots, or a proof where none is needed: the log forked` };
  if (first.size === 0)
    return proof.length === 0
      ? { ok: true, detail: `${range}: the empty tree is a prefix of every tree` }
      : { ok: false, detail: `${range}: a proof from the empty tree must be empty` };
  const roots = rootsFromConsistencyProof(first.size, second.size, proof, first.root);
  if (!roots) return { ok: false, detail: `${range}: malformed consistency proof (${proof.length} hashes)` };
  if (!bytesEqual(roots.first, first.root) || !bytesEqual(roots.second, second.root))
    return {
      ok: false,
      detail: `${range}: the ${proof.length}-hash proof does not rebuild both roots (${short(toHex(first.root))}, ${short(toHex(second.root))}): the log is not append-only between them`,
    };
  return {
    ok: true,
    detail: `${range}: both roots (${short(toHex(first.root))}, ${short(toHex(second.root))}) recomputed from the ${proof.length}-hash proof`,
  };
}

/** A consistency proof as some source supplies it (the API adds its claimed roots). */
export interface ConsistencyInput {
  readonly proof: readonly Uint8Array[];
  readonly firstRoot?: Uint8Array;
  readonly secondRoot?: Uint8Array;
}

export type ProveConsistency = (first: number, second: number) => Promise<ConsistencyInput>;

/**
 * Rule 2: proves that `older` (size, root) is a prefix of `newer` by recomputing both roots
 * from one consistency proof. `label` names the older tree in messages ("pinned", …). A
 * proof that cannot be had is a FAIL, unless `rethrow` says the error is the caller's to
 * report (e.g. the network is down: no verdict on the log at all).
 */
export async function checkConsistency(
  older: { size: number; root: Uint8Array },
  newer: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  label = 'pinned',
  rethrow: (e: unknown) => boolean = () => false,
): Promise<Outcome & { proofLength?: number }> {
  if (newer.size < older.size) {
    return {
      ok: false,
      detail: `checkpoint size ${newer.size} is smaller than the ${label} size ${older.size}: the log rolled back (or serves a stale view)`,
    };
  }
  if (newer.size === older.size) {
    return bytesEqual(newer.root, older.root)
      ? { ok: true, detail: `same tree as the ${label} checkpoint (size ${older.size})` }
      : {
          ok: false,
          detail: `size ${older.size} has root ${short(toHex(newer.root))} but the ${label} root is ${short(toHex(older.root))}: the log forked`,
        };
  }
  if (older.size === 0)
    return {
      ok: true,
      detail: `the ${label} tree is empty, a prefix of every tree (size 0 → ${newer.size})`,
      proofLength: 0,
    };
  if (!prove) return { ok: false, detail: `no consistency proof available for ${older.size} → ${newer.size}` };
  let input: ConsistencyInput;
  try {
    input = await prove(older.size, newer.size);
  } catch (e) {
    if (rethrow(e)) throw e;
    return {
      ok: false,
      detail: `no valid consistency proof for ${older.size} → ${newer.size}: ${(e as Error).message}`,
    };
  }
  if (input.firstRoot && !bytesEqual(input.firstRoot, older.root)) {
    return {
      ok: false,
      detail: `the log claims root ${short(toHex(input.firstRoot))} at the ${label} size ${older.size}, not the ${label} ${short(toHex(older.root))}: the log forked`,
    };
  }
  if (input.secondRoot && !bytesEqual(input.secondRoot, newer.root)) {
    return {
      ok: false,
      detail: `the consistency proof is for root ${short(toHex(input.secondRoot))} at size ${newer.size}, not the checkpoint's`,
    };
  }
  const checked = checkConsistencyProof(older, newer, input.proof);
  if (!checked.ok) {
    return {
      ok: false,
      detail: `the ${input.proof.length}-hash proof does not reconcile the ${label} root of size ${older.size} with the checkpoint root of size ${newer.size}: the log is not append-only (fork); ${checked.detail}`,
    };
  }
  return {
    ok: true,
    detail: `${label} size ${older.size} → ${newer.size}: both roots recomputed from the ${input.proof.length}-hash consistency proof`,
    proofLength: input.proof.length,
  };
}

/**
 * Rule 2 for a checkpoint that may be older than the pin (a stored or exported proof): the
 * older of the two must be a prefix of the newer. Without a way to prove it (`prove` null),
 * only the same tree can be checked; otherwise the rule is SKIPped with `offline` as detail.
 */
export async function checkConsistencyWithPin(
  pin: { size: number; root: Uint8Array },
  cp: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  offline: { reason: string; detail: string },
  rethrow?: (e: unknown) => boolean,
): Promise<Outcome | StatusOutcome> {
  if (!prove && cp.size !== pin.size) return { status: 'SKIP', ...offline };
  if (cp.size >= pin.size) return checkConsistency(pin, cp, prove, 'pinned', rethrow);
  const older = await checkConsistency(cp, pin, prove, "proof's", rethrow);
  return older.ok
    ? {
        ok: true,
        detail: `the proof's checkpoint (size ${cp.size}) is a prefix of the pinned one (size ${pin.size}): ${older.detail}`,
      }
    : older;
}

/**
 * Rule 2 for a copy of the log (a mirror directory, a CDN) that may lag behind the pin. A
 * copy at or past the pin is checked as any checkpoint (same size, other root: a fork). A
 * smaller one is a stale copy, not a rollback, unless a proof from a tree that reaches the
 * pin (`proveToPin`, e.g. the log's own API) shows it is no prefix of the pinned tree: then
 * it FAILs. Without such a proof (none given, or `unavailable` says it could not be had) the
 * rule is SKIPped: "older than your pin (N < M): update the mirror".
 */
export async function checkCopyConsistency(
  pin: { size: number; root: Uint8Array },
  cp: { size: number; root: Uint8Array },
  prove: ProveConsistency | null,
  proveToPin: ProveConsistency | null,
  rethrow: (e: unknown) => boolean = () => false,
  unavailable: (e: unknown) => boolean = () => false,
): Promise<Outcome | StatusOutcome> {
  if (cp.size >= pin.size) return checkConsistency(pin, cp, prove, 'pinned', rethrow);
  const stale = `older than your pin (${cp.size} < ${pin.size}): update the mirror`;
  let input: ConsistencyInput | undefined;
  if (proveToPin && cp.size > 0) {
    try {
      input = await proveToPin(cp.size, pin.size);
    } catch (e) {
      if (!unavailable(e)) {
        if (rethrow(e)) throw e;
        return {
          ok: false,
          detail: `no valid consistency proof for ${cp.size} → ${pin.size} (the mirror's size to the pinned one): ${(e as Error).message}`,
        };
      }
    }
  }
  if (cp.size === 0) input = { proof: [] };
  if (input === undefined)
    return {
      status: 'SKIP',
      reason: stale,
      detail: `the mirror's checkpoint is ${stale}; whether it is a prefix of the pinned tree is not checked`,
    };
  const given = input;
  const older = await checkConsistency(cp, pin, async () => given, "mirror's", rethrow);
  return older.ok ? { ok: true, detail: `the mirror's checkpoint is ${stale}; ${older.detail}` } : older;
}
