// The JSON contract of /api/ledger (docs/interface.md §2.2–2.6, docs/design.md §1.4): what the server emits
// (src/api/views.ts) and what the client reads (src/client/api.ts, which validates every
// answer against these shapes before trusting anything in it).

export interface WitnessSigView {
  name: string;
  /** `ed25519:<base64>` */
  signature: string;
  /** When the witness cosigned: ISO 8601 or unix seconds. */
  timestamp?: string | number;
}

/** Checkpoint JSON (docs/interface.md §2.2); `note` is the full signed note when the server adds it. */
export interface CheckpointView {
  logId: string;
  treeSize: number;
  rootHash: string;
  timestamp: string;
  keyId: string;
  signature: string;
  witnesses: WitnessSigView[];
  lifetimeEntries?: number;
  note?: string;
}

/** Entry JSON (docs/interface.md §2.3): the canonical fields plus id and proof.entryHash. */
export interface EntryView {
  id: string;
  type: string;
  result: string;
  digest: string;
  timestamp: string;
  proof: { entryHash: string };
  [field: string]: unknown;
}

export interface EntryProofView {
  leafIndex: number;
  treeSize: number;
  leafHash: string;
  auditPath: string[];
  rootHash: string;
  checkpoint: CheckpointView;
  entry: EntryView;
}

/** GET /api/ledger/search?artifact=: the artifacts with that label, one per scope, newest entry each. */
export interface ArtifactSearchView {
  /** The label searched, in NFC. */
  artifact: string;
  treeSize: number;
  /** Ordered by artifact id. */
  matches: { artifactId: string; scope?: string; leafIndex: number; entry: EntryView }[];
  /** Pass as `cursor` for the next page; absent on the last page. */
  next?: string;
}

export interface ConsistencyView {
  first: number;
  second: number;
  firstRoot: string;
  secondRoot: string;
  proof: string[];
}

export interface AnchorView {
  entry: EntryView;
  leafIndex: number;
  inclusionProof: string[];
  checkpoint: CheckpointView;
  /** True (with HTTP 200, not 201) when an identical anchor was already in the log: nothing was appended. */
  existing?: boolean;
}

export interface KeyView {
  origin: string;
  keyId: string;
  publicKey: string;
  vkey: string;
  witnesses: { name: string; vkey: string }[];
  /** `policy`: C2SP tlog-policy text, the authority when present (`threshold` is its least number of cosignatures). */
  witnessPolicy?: { threshold: number; policy?: string };
  /** The log's tlog-mirrors (also witness lines of `policy`): key, and where the copy is served. */
  mirrors?: MirrorInfo[];
}

export interface MirrorInfo {
  name: string;
  vkey: string;
  /** The mirror's tlog-tiles prefix for this log: `<mirror URL>/<hex SHA-256(origin)>/`. */
  tiles: string;
}

/** POST /api/ledger/anchor body. */
export interface AnchorBody {
  digest: string;
  artifact?: string;
  scope?: string;
  /** The client's tenant; in production the token decides it (a different one is a 403). */
  tenant?: string;
  type?: 'ledger_anchor' | 'document_verified';
  /** Append a new entry even when an identical anchor (digest, artifact, scope, tenant) is in the log. */
  allowDuplicate?: boolean;
}

/**
 * /explorer.json: the keys a static explorer trusts, written by `stele serve` (src/api/explorer.ts)
 * and by `ledger mirror --with-explorer` (src/client/ledger-mirror-explorer.ts).
 */
export interface ExplorerJson {
  origin: string;
  /** The log's note verifier key. */
  vkey: string;
  /** The witnesses' cosignature vkeys. */
  witnesses: string[];
  witnessThreshold: number;
  /** The C2SP tlog-policy text, when there is one: the authority over the count. */
  policy?: string;
  /** False when the site serves no /api/ledger/* (a mirror, a copy of the tiles): the page reads the tiles alone. */
  api?: boolean;
}
