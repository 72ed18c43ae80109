// The JSON API client (docs/interface.md §4.1 plus GET /api/ledger/key): every response is checked for
// the contract's shape before anything reads it; nothing here trusts the content — the
// verification lives in verify.ts.
import { LogAnswerError, NetworkError, ResponseError, UsageError } from './errors.js';
import { type HttpOptions, type HttpStats, jsonBody, request } from './http.js';

export type {
  AnchorBody,
  AnchorView,
  CheckpointView,
  ConsistencyView,
  EntryProofView,
  EntryView,
  KeyView,
  WitnessSigView,
} from '../api/wire.js';
import type {
  AnchorBody,
  AnchorView,
  CheckpointView,
  ConsistencyView,
  EntryProofView,
  EntryView,
  KeyView,
  WitnessSigView,
} from '../api/wire.js';

export type EntryLookup = { id: string } | { artifact: string } | { hash: string } | { leaf: number };

// ---- shape checks -------------------------------------------------------------------

const HASH = /^[0-9a-f]{64}$/;

class Shape {
  constructor(
    private readonly where: string,
    private readonly path: string,
    readonly value: unknown,
  ) {}

  fail(what: string): never {
    throw new ResponseError(`${this.where}: ${this.path || 'response'} ${what}`);
  }

  obj(): Record<string, unknown> {
    if (typeof this.value !== 'object' || this.value === null || Array.isArray(this.value))
      this.fail('is not a JSON object');
    return this.value as Record<string, unknown>;
  }

  at(key: string): Shape {
    return new Shape(this.where, this.path ? `${this.path}.${key}` : key, this.obj()[key]);
  }

  has(key: string): boolean {
    return this.obj()[key] !== undefined;
  }

  str(): string {
    if (typeof this.value !== 'string') this.fail('is not a string');
    return this.value as string;
  }

  int(): number {
    if (typeof this.value !== 'number' || !Number.isSafeInteger(this.value) || this.value < 0)
      this.fail('is not a non-negative integer');
    return this.value as number;
  }

  hash(): string {
    const s = this.str();
    if (!HASH.test(s)) this.fail('is not 64 lowercase hex characters');
    return s;
  }

  hashes(): string[] {
    if (!Array.isArray(this.value)) this.fail('is not an array');
    return (this.value as unknown[]).map((_, i) =>
      new Shape(this.where, `${this.path}[${i}]`, (this.value as unknown[])[i]).hash(),
    );
  }

  list(): Shape[] {
    if (!Array.isArray(this.value)) this.fail('is not an array');
    return (this.value as unknown[]).map((v, i) => new Shape(this.where, `${this.path}[${i}]`, v));
  }
}

export function checkpointShape(s: Shape): CheckpointView {
  const c: CheckpointView = {
    logId: s.at('logId').str(),
    treeSize: s.at('treeSize').int(),
    rootHash: s.at('rootHash').hash(),
    timestamp: s.at('timestamp').str(),
    keyId: s.at('keyId').hash(),
    signature: s.at('signature').str(),
    witnesses: s.has('witnesses')
      ? s
          .at('witnesses')
          .list()
          .map((w) => {
            const t = w.has('timestamp') ? w.at('timestamp').value : undefined;
            if (t !== undefined && typeof t !== 'string' && typeof t !== 'number')
              w.at('timestamp').fail('is not a string or number');
            const out: WitnessSigView = { name: w.at('name').str(), signature: w.at('signature').str() };
            if (t !== undefined) out.timestamp = t as string | number;
            return out;
          })
      : [],
  };
  if (s.has('lifetimeEntries')) c.lifetimeEntries = s.at('lifetimeEntries').int();
  if (s.has('note')) c.note = s.at('note').str();
  return c;
}

export function entryShape(s: Shape): EntryView {
  const o = s.obj();
  s.at('id').str();
  s.at('type').str();
  s.at('result').str();
  s.at('digest').hash();
  s.at('timestamp').str();
  s.at('proof').at('entryHash').hash();
  return o as EntryView;
}

/** Validates a stored or received checkpoint object (used for proof bundles too). */
export function parseCheckpointView(value: unknown, where: string): CheckpointView {
  return checkpointShape(new Shape(where, '', value));
}

export function parseEntryView(value: unknown, where: string): EntryView {
  return entryShape(new Shape(where, '', value));
}

export function parseEntryProof(value: unknown, where: string): EntryProofView {
  const s = new Shape(where, '', value);
  return {
    leafIndex: s.at('leafIndex').int(),
    treeSize: s.at('treeSize').int(),
    leafHash: s.at('leafHash').hash(),
    auditPath: s.at('auditPath').hashes(),
    rootHash: s.at('rootHash').hash(),
    checkpoint: checkpointShape(s.at('checkpoint')),
    entry: entryShape(s.at('entry')),
  };
}

export function parseConsistency(value: unknown, where: string): ConsistencyView {
  const s = new Shape(where, '', value);
  return {
    first: s.at('first').int(),
    second: s.at('second').int(),
    firstRoot: s.at('firstRoot').hash(),
    secondRoot: s.at('secondRoot').hash(),
    proof: s.at('proof').hashes(),
  };
}

export function parseAnchor(value: unknown, where: string): AnchorView {
  const s = new Shape(where, '', value);
  return {
    entry: entryShape(s.at('entry')),
    leafIndex: s.at('leafIndex').int(),
    inclusionProof: s.at('inclusionProof').hashes(),
    checkpoint: checkpointShape(s.at('checkpoint')),
    ...(s.has('existing') && s.at('existing').value === true ? { existing: true } : {}),
  };
}

export function parseKey(value: unknown, where: string): KeyView {
  const s = new Shape(where, '', value);
  const k: KeyView = {
    origin: s.at('origin').str(),
    keyId: s.at('keyId').hash(),
    publicKey: s.at('publicKey').str(),
    vkey: s.at('vkey').str(),
    witnesses: s.has('witnesses')
      ? s
          .at('witnesses')
          .list()
          .map((w) => ({ name: w.at('name').str(), vkey: w.at('vkey').str() }))
      : [],
  };
  if (s.has('witnessPolicy') && s.at('witnessPolicy').has('threshold')) {
    k.witnessPolicy = { threshold: s.at('witnessPolicy').at('threshold').int() };
    if (s.at('witnessPolicy').has('policy')) k.witnessPolicy.policy = s.at('witnessPolicy').at('policy').str();
  }
  return k;
}

// ---- client -------------------------------------------------------------------------

/** Checks that `endpoint` is an http(s) URL and returns it without a trailing slash. */
export function normalizeEndpoint(endpoint: string): string {
  let u: URL;
  try {
    u = new URL(endpoint);
  } catch {
    throw new UsageError(`endpoint ${JSON.stringify(endpoint)} is not a URL (expected http://host[:port])`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new UsageError(`endpoint ${endpoint} must be an http:// or https:// URL`);
  if (u.search || u.hash) throw new UsageError(`endpoint ${endpoint} must not have a query or fragment`);
  return u.toString().replace(/\/+$/, '');
}

export class LedgerApi {
  readonly stats: HttpStats = { requests: 0, bytes: 0 };
  readonly endpoint: string;

  constructor(
    endpoint: string,
    private readonly options: HttpOptions & {
      /** Bearer token for the anchor route (production mode). */ token?: string;
    } = {},
  ) {
    this.endpoint = normalizeEndpoint(endpoint);
  }

  private url(path: string, query?: Record<string, string | number>): string {
    const u = new URL(`${this.endpoint}/api/ledger/${path}`);
    for (const [k, v] of Object.entries(query ?? {})) u.searchParams.set(k, String(v));
    return u.toString();
  }

  private async get(path: string, query?: Record<string, string | number>): Promise<{ url: string; body: unknown }> {
    const url = this.url(path, query);
    const res = await request(url, { headers: { accept: 'application/json' } }, this.options, this.stats).catch(
      (e: unknown) => {
        // A read can go on without the API: say how, once, on the line that reports it down.
        if (e instanceof NetworkError)
          throw new NetworkError(
            `${e.message} (the log's API is down? verify from a copy of its tiles with --tiles <dir|url>)`,
          );
        throw e;
      },
    );
    return { url, body: jsonBody(url, res) };
  }

  async key(): Promise<KeyView> {
    const { url, body } = await this.get('key');
    return parseKey(body, url);
  }

  async checkpoint(): Promise<CheckpointView> {
    const { url, body } = await this.get('checkpoint');
    return parseCheckpointView(body, url);
  }

  async entry(lookup: EntryLookup): Promise<EntryProofView> {
    const { url, body } = await this.get('entry', lookup as Record<string, string | number>);
    return parseEntryProof(body, url);
  }

  async consistency(first: number, second: number): Promise<ConsistencyView> {
    const { url, body } = await this.get('consistency', { first, second });
    const c = parseConsistency(body, url);
    if (c.first !== first || c.second !== second) {
      throw new ResponseError(
        `${url}: answered sizes ${c.first} → ${c.second}, not the ${first} → ${second} asked for`,
      );
    }
    return c;
  }

  async anchor(body: AnchorBody): Promise<AnchorView> {
    const url = this.url('anchor');
    const res = await request(
      url,
      {
        method: 'POST',
        body: JSON.stringify(body),
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}),
        },
      },
      this.options,
      this.stats,
    );
    if (res.status === 401)
      throw new LogAnswerError(
        401,
        'unauthorized',
        `${url}: the log requires a bearer token to anchor${this.options.token ? ', and refused the one in STELE_LEDGER_TOKEN' : ': set STELE_LEDGER_TOKEN to a token its operator issued (STELE_ANCHOR_TOKENS on the server)'}`,
        url,
      );
    return parseAnchor(jsonBody(url, res), url);
  }

  /**
   * The leaves of the entries recording artifact `name` in any scope (GET /api/ledger/search):
   * a list of matches, each naming its leaf (`leafIndex`, or an entry `id`). Only where to
   * look: the caller fetches and verifies each entry.
   */
  /** Leaf indexes of the latest entry of `name` in each scope (GET /api/ledger/search, every page). */
  async searchArtifact(name: string): Promise<number[]> {
    const leaves: number[] = [];
    let cursor: string | undefined;
    do {
      const { url, body } = await this.get('search', { artifact: name, limit: 100, ...(cursor ? { cursor } : {}) });
      const root = new Shape(url, '', body);
      for (const m of root.at('matches').list()) leaves.push(m.at('leafIndex').int());
      const next = root.obj().next;
      if (next !== undefined && (typeof next !== 'string' || next === cursor))
        root.at('next').fail('is not a new cursor');
      cursor = next as string | undefined;
    } while (cursor !== undefined);
    return leaves;
  }

  async summary(): Promise<Record<string, unknown>> {
    const { url, body } = await this.get('summary');
    return new Shape(url, '', body).obj();
  }
}
