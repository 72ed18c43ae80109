// `ledger verify <file>`: the file's digest found in the log (the API's index, or the tiles'
// record bundles) and every rule checked, or why it is not anchored.
import { basename } from 'node:path';
import { checkLabel } from '../core/labels.js';
import { hashFromHex, leafHash, toHex } from '../core/hash.js';
import type { EntryView, LedgerApi } from './api.js';
import { LogAnswerError } from './errors.js';
import { type ScanProgress, cacheFileFor, entryIndex, scanForDigest } from './entry-index.js';
import { type FileDigest, sha256File } from './hashfile.js';
import { Report, checkInclusion, hashes } from './rules.js';
import {
  type CheckpointSummary,
  type PinMove,
  type Session,
  bundleOf,
  checkpointRules,
  checkpointSummary,
} from './session.js';
import { ApiView, type LogView, type TilesView } from './views.js';
import { checkTilesEntry, leafRule } from './entry-rules.js';

export interface VerifyResult {
  readonly file: string;
  readonly digest: string;
  readonly bytes: number;
  /** 'tlog-proof': from a C2SP tlog-proof file alone, offline (src/client/tlog-proof-file.ts). */
  readonly mode: 'api' | 'tiles' | 'tlog-proof';
  readonly source: string;
  readonly report: Report;
  readonly entry?: EntryView;
  readonly leafIndex?: number;
  readonly treeSize?: number;
  readonly checkpoint?: CheckpointSummary;
  readonly pinMoved: PinMove | null;
  readonly savedProof?: string;
}

export interface VerifyOptions {
  /** For --tiles: the leaf to check (else a stored proof bundle's, else found by the digest). */
  readonly leafIndex?: number;
  readonly digest?: FileDigest;
  readonly onHashProgress?: (bytes: number, total: number) => void;
  /** For --tiles without a stored proof: progress of the search through the record bundles. */
  readonly onScanProgress?: ScanProgress;
}

export async function verifyFile(
  s: Session,
  view: LogView,
  file: string,
  opts: VerifyOptions = {},
): Promise<VerifyResult> {
  const { digest, bytes } = opts.digest ?? (await sha256File(file, opts.onHashProgress));
  return view instanceof ApiView
    ? verifyFileApi(s, view, file, digest, bytes)
    : verifyFileTiles(s, view as TilesView, file, digest, bytes, opts);
}

export async function verifyFileApi(
  s: Session,
  view: ApiView,
  file: string,
  digest: string,
  bytes: number,
): Promise<VerifyResult> {
  const report = new Report();
  const base = { file, digest, bytes, mode: 'api' as const, source: view.name, report };
  let found;
  try {
    found = await view.api.entry({ hash: digest });
  } catch (e) {
    if (!(e instanceof LogAnswerError && e.status === 404)) throw e;
    // Not anchored: still show whether the log itself checks out.
    const { cc, pinMoved } = await checkpointRules(s, report, await view.checkpoint(), view.prove);
    report.add('leaf', { ok: false, detail: await notAnchored(view.api, file, digest) });
    report.add('inclusion', { ok: false, detail: 'not checked: no entry to prove' });
    report.finish();
    return { ...base, checkpoint: checkpointSummary(cc), pinMoved };
  }
  const { cc, pinMoved } = await checkpointRules(s, report, { json: found.checkpoint }, view.prove);
  const leaf = await leafRule(s, found.entry, found.leafIndex, found.treeSize, found.leafHash, digest);
  report.add('leaf', leaf);
  const recomputedLeaf = leafHash(hashFromHex(found.entry.proof.entryHash));
  let inclusion = checkInclusion(found.leafIndex, found.treeSize, recomputedLeaf, hashes(found.auditPath), cc);
  if (inclusion.ok && found.rootHash !== toHex(cc.root))
    inclusion = { ok: false, detail: `the response's rootHash is not the checkpoint root` };
  report.add('inclusion', inclusion);
  let savedProof: string | undefined;
  if (report.finish()) {
    savedProof = await s.proofs.save(
      bundleOf(found.entry, found.leafIndex, found.auditPath, found.checkpoint, s, file, leaf.prior),
    );
  }
  return {
    ...base,
    entry: found.entry,
    leafIndex: found.leafIndex,
    treeSize: found.treeSize,
    checkpoint: checkpointSummary(cc),
    pinMoved,
    ...(savedProof ? { savedProof } : {}),
  };
}

/**
 * Rule 3's words for a file whose digest no entry records. When the log holds an anchor under
 * the file's name, the file is most likely a changed copy of that release: say so, and name
 * the digest the log recorded (what the log says, as a pointer: a FAIL either way).
 */
export async function notAnchored(api: LedgerApi, file: string, digest: string): Promise<string> {
  const none = `no entry in the log has the file's digest ${digest}: it is not anchored`;
  const label = file === '-' ? undefined : basename(file);
  if (label === undefined || !checkLabel('artifact', label).ok) return none;
  try {
    // The latest entry under that name in each scope (a few at most); the first that records another digest.
    for (const leaf of (await api.searchArtifact(label)).slice(0, 4)) {
      const { entry } = await api.entry({ leaf });
      if (entry.artifact === label && entry.digest !== digest)
        return `${label} is anchored with digest ${entry.digest} (entry ${entry.id}); this file's digest is ${digest}: it differs from the anchored file`;
    }
    return none;
  } catch (e) {
    if (e instanceof LogAnswerError) return none; // no anchor under that name, or the log cannot say
    throw e;
  }
}

/**
 * Where `digest`'s entry is in a copy of the log: a stored proof bundle's leaf if there is
 * one, else the earliest entry recording it in the record bundles (a local mirror's index
 * is cached beside the configuration). Undefined when no entry of the tree records it.
 */
export async function locateDigest(
  s: Session,
  view: TilesView,
  digest: string,
  tree: { size: number; root: Uint8Array },
  onScanProgress?: ScanProgress,
): Promise<number | undefined> {
  const stored = await s.proofs.findByDigest(digest, s.trust.origin);
  const inTree = stored.find((b) => b.leafIndex < tree.size);
  if (inTree) return inTree.leafIndex;
  const cacheFile = cacheFileFor(view.source, s.config.path);
  if (!cacheFile) return scanForDigest(view.reader, tree.size, digest, onScanProgress);
  const { index } = await entryIndex(view, tree, cacheFile, { progress: onScanProgress, notice: s.onNotice });
  return Object.hasOwn(index.digests, digest) ? index.digests[digest] : undefined;
}

export async function verifyFileTiles(
  s: Session,
  view: TilesView,
  file: string,
  digest: string,
  bytes: number,
  opts: VerifyOptions,
): Promise<VerifyResult> {
  const report = new Report();
  const { cc, pinMoved } = await checkpointRules(s, report, await view.checkpoint(), view.prove, view);
  const base = {
    file,
    digest,
    bytes,
    mode: 'tiles' as const,
    source: view.name,
    report,
    treeSize: cc.size,
    checkpoint: checkpointSummary(cc),
    pinMoved,
  };
  const seq = opts.leafIndex ?? (await locateDigest(s, view, digest, cc, opts.onScanProgress));
  if (seq === undefined) {
    report.add('leaf', {
      ok: false,
      detail: `no entry of ${view.name} (tree size ${cc.size}) records the file's digest ${digest}: it is not anchored in this copy of the log`,
    });
    report.add('inclusion', { ok: false, detail: 'not checked: no entry to prove' });
    report.finish();
    return base;
  }
  const entry = await checkTilesEntry(view, report, seq, cc, digest);
  report.finish();
  return { ...base, leafIndex: seq, ...(entry ? { entry } : {}) };
}
