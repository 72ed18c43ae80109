// `stele ledger mirror <dir> --with-explorer`: the mirror directory gets the built explorer
// (index.html and assets/) and an explorer.json naming the keys this client pinned, so any
// static file server over the mirror serves an explorer that verifies the copy against the
// pinned log key and witness policy, with no `?vkey=` link and no API.
import { cp, readdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formatPolicy, minimumCosigners } from '../core/tlog-policy.js';
import { findExplorerDir } from '../http/explorer-files.js';
import type { ExplorerJson } from '../api/wire.js';
import type { TrustPin } from './config.js';
import { ClientError, ClientConfigError } from './errors.js';

/** The explorer's trust file, as `stele serve` writes it (src/api/explorer.ts) plus the policy text. */
export const MIRROR_EXPLORER_CONFIG = 'explorer.json';

export interface MirrorExplorer {
  /** Files of the built explorer copied (index.html, assets). */
  readonly files: number;
  /** explorer.json in the mirror. */
  readonly config: string;
  readonly vkey: string;
}

/** explorer.json for the pinned log: the vkey, the witnesses' vkeys and the policy that decides their quorum. */
export function mirrorExplorerConfig(pin: TrustPin): ExplorerJson {
  if (!pin.vkey || !pin.origin)
    throw new ClientConfigError(
      'the configuration pins no log vkey: run `ledger init` before `ledger mirror --with-explorer`',
    );
  return {
    origin: pin.origin,
    vkey: pin.vkey,
    witnesses: pin.policy.witnesses.map((w) => w.vkey),
    witnessThreshold: minimumCosigners(pin.policy),
    policy: formatPolicy(pin.policy),
    // A mirror is static files: the page must not ask it for /api/ledger/*.
    api: false,
  };
}

async function countFiles(dir: string): Promise<number> {
  let n = 0;
  for (const e of await readdir(dir, { withFileTypes: true }))
    n += e.isDirectory() ? await countFiles(join(dir, e.name)) : e.isFile() ? 1 : 0;
  return n;
}

/** Copies the built explorer into `dir` (a mirror made by mirrorLog) and pins the key in its explorer.json. */
export async function addExplorerToMirror(dir: string, pin: TrustPin, explorerDir?: string): Promise<MirrorExplorer> {
  const config = mirrorExplorerConfig(pin);
  const from = findExplorerDir(explorerDir);
  if (!from) throw new ClientError('io', 'the built explorer (dist/explorer) is not there: run `npm run build` first');
  try {
    // Regular files and directories only: a symlink in the build is copied as a link, never followed.
    await cp(from, dir, { recursive: true, force: true, verbatimSymlinks: true });
    const path = join(dir, MIRROR_EXPLORER_CONFIG);
    const tmp = `${path}.tmp-${process.pid}`;
    await writeFile(tmp, `${JSON.stringify(config, null, 2)}\n`);
    await rename(tmp, path);
    return { files: await countFiles(from), config: path, vkey: pin.vkey! };
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw new ClientError(
      'io',
      `cannot copy the explorer into ${dir}: ${err.code ?? err.message}${err.path ? ` (${err.path})` : ''}`,
    );
  }
}
