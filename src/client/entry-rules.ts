// Rules 3 and 4 applied to what a source answers: an API's entry (its fields bound to the
// entry hash with the prior entry's hash from the tiles) and an entry read from the tiles.
import { ZERO_HASH, presentEntry } from '../core/entry.js';
import { hashFromHex, toHex } from '../core/hash.js';
import type { EntryView } from './api.js';
import { type CheckedCheckpoint, type Outcome, type Report, checkEntry, checkInclusion } from './rules.js';
import type { Session } from './session.js';
import { type TilesView, priorEntryHash } from './views.js';

/**
 * Rule 3 for an API answer (src/core/verify/entry.ts): the entry's fields, with entry
 * seq − 1's hash read from the tiles (or known from a stored proof), must hash to the entry
 * hash; the leaf hash and id the log sent must agree, and the entry must record the file's digest.
 */
export async function leafRule(
  s: Session,
  entry: EntryView,
  seq: number,
  size: number,
  leafHashHex: string,
  fileDigest: string | undefined,
  knownPrior?: string,
): Promise<Outcome & { prior?: string }> {
  let prior: Uint8Array;
  try {
    if (knownPrior !== undefined) prior = hashFromHex(knownPrior);
    else if (seq === 0) prior = ZERO_HASH;
    else if (s.tiles) prior = await priorEntryHash(s.tiles, seq, size);
    else
      return {
        ok: false,
        detail: `no tiles to read entry ${seq - 1}'s hash from, so the entry's fields are unproven`,
      };
  } catch (e) {
    return {
      ok: false,
      detail: `entry ${seq - 1}'s hash could not be read to bind the entry's fields: ${(e as Error).message}`,
    };
  }
  const checked = checkEntry({
    seq,
    entry,
    prior,
    claimed: { entryHash: hashFromHex(entry.proof.entryHash), leafHash: hashFromHex(leafHashHex), id: entry.id },
    ...(fileDigest !== undefined ? { fileDigest } : {}),
  });
  return checked.ok ? { ok: true, detail: checked.detail, prior: toHex(prior) } : checked;
}

/**
 * Rules 3 and 4 for leaf `seq` read from the tiles of the verified checkpoint `cc`: the
 * record (with the previous entry hash) is the entry hash in the entry bundle and records
 * `digest` when one is given (src/core/verify/entry.ts), and the audit path from the hash
 * tiles rebuilds the root (src/core/verify/inclusion.ts).
 */
export async function checkTilesEntry(
  view: TilesView,
  report: Report,
  seq: number,
  cc: CheckedCheckpoint,
  digest?: string,
): Promise<EntryView | undefined> {
  const size = cc.size;
  if (seq >= size) {
    report.add('leaf', { ok: false, detail: `leaf index ${seq} is not in the tree of size ${size}` });
    report.add('inclusion', { ok: false, detail: 'not checked: no leaf to prove' });
    return undefined;
  }
  const isTransport = (e: unknown) => {
    const kind = (e as { kind?: string }).kind;
    return kind === 'network' || kind === 'io';
  };
  let checked: ReturnType<typeof checkEntry> | undefined;
  try {
    const at = await view.reader.entry(seq, size);
    // The reader's cache serves the entry bundle just read for the entry itself.
    const prior = await priorEntryHash(view.source, seq, size, (n, width) => view.reader.bundle('entries', n, width));
    checked = checkEntry({
      seq,
      entry: at.canonical,
      prior,
      claimed: { entryHash: at.entryHash },
      ...(digest !== undefined ? { fileDigest: digest } : {}),
    });
    report.add('leaf', checked);
  } catch (e) {
    if (isTransport(e)) throw e;
    report.add('leaf', { ok: false, detail: `entry ${seq}: ${(e as Error).message}` });
  }
  if (checked?.leaf) {
    try {
      const path = await view.reader.inclusionProof(seq, size);
      report.add('inclusion', checkInclusion(seq, size, checked.leaf, path, cc));
    } catch (e) {
      if (isTransport(e)) throw e;
      report.add('inclusion', {
        ok: false,
        detail: `cannot compute the audit path from the tiles: ${(e as Error).message}`,
      });
    }
  } else {
    report.add('inclusion', { ok: false, detail: 'not checked: no entry hash read to prove' });
  }
  return checked?.entry && checked.entryHash
    ? (presentEntry(checked.entry, seq, checked.entryHash) as EntryView)
    : undefined;
}
