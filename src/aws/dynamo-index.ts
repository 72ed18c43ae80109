// LookupIndex on DynamoDB, shared by every API replica; written by the sequencer as a
// BatchListener (fed through indexFeeder, which fills gaps from the record bundles).
//
// Items (single table, pk/sk as DynamoLock; <b64 …> is base64url of the hex value's bytes):
//   pk = "idx#<log>#d#<b64 digest>"     sk = "l"  l (N): earliest leaf with that digest;
//                                                 k<b64 8 bytes of an anchor identity> (N):
//                                                 earliest anchor with that identity
//   pk = "idx#<log>#a#<b64 artifact>"   sk = "l"  l (N): latest leaf with that artifact id
//   pk = "idx#<log>#s"                  sk = "=<scope>"  one per scope ever recorded with an
//                                                 artifact ("=" alone: none)
//   pk = "idx#<log>#meta"               sk = "meta"  size (N): leaves 0..size-1 indexed;
//                                                 "count:<type>" (N): entries by type;
//                                                 schema (N): SCHEMA_MARK of the items
// So an entry adds at most two items (a new digest, a new artifact id), one when its artifact
// is known, none when its digest is too. A label's artifacts need no items of their own: an
// artifact id is SHA-256(scope ‖ label), so a search computes the id of the label in every
// recorded scope and reads those artifact items (a read per 100 scopes; meant for logs with
// up to some thousands of scopes, as scopes are a tenant's projects).
// Every write is idempotent or conditional, so replays, retries and two indexers racing
// (a catch-up beside the live feed) converge on the same items:
//   - digest (and anchor) leaves change only to a smaller leaf, artifact ones only to a larger
//     (a new anchor's leaf and its digest's are one write, both conditions in it);
//   - a scope item is written before the size that covers its entries;
//   - counts and the indexed size move together in one conditional UpdateItem
//     (ADD counts, SET size = end, if size = start), so each leaf is counted exactly once,
//     and only after its digest and artifact items are written.
import {
  type AttributeValue,
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import pLimit from 'p-limit';
import { anchorIdentity } from '../core/duplicates.js';
import { artifactId as artifactIdOf } from '../core/entry.js';
import {
  type ArtifactMatch,
  type ArtifactPage,
  type Confirm,
  INDEX_SCHEMA,
  type LookupIndex,
  IndexGapError,
} from '../index/types.js';
import type { IntegratedBatch } from '../sequencer/contract.js';
import { type DynamoConnectionOptions, type DynamoStats, createDynamoClient } from './dynamo-lock.js';

export interface DynamoIndexOptions extends DynamoConnectionOptions {
  readonly table: string;
  /** The log (its origin); one table can hold several logs. */
  readonly log: string;
  readonly client?: DynamoDBClient;
  /** Parallel item writes per batch (default 32). */
  readonly concurrency?: number;
}

const isConditionFailure = (e: unknown) =>
  e instanceof ConditionalCheckFailedException || (e as Error)?.name === 'ConditionalCheckFailedException';

const COUNT_PREFIX = 'count:';

/**
 * The items' version: INDEX_SCHEMA's, and this layout (2: scope items instead of label rows,
 * base64url keys). An index with another mark (3 was the label-row layout) is outdated,
 * rebuilt from the record bundles at start, and read as empty meanwhile.
 */
export const SCHEMA_MARK = INDEX_SCHEMA * 100 + 2;

/** The sort key of the digest and artifact items, and their leaf attribute. */
const LEAF = 'l';

/** Base64url of a hex value's bytes: a key two thirds as long. */
const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64url');

/** An item's partition key suffix for a digest (64 hex) and for an artifact id (art_ + 24 hex). */
const digestId = (digest: string) => `d#${b64(digest.toLowerCase())}`;
const artifactItemId = (artifactId: string) => `a#${b64(artifactId.slice(4))}`;

/** The digest item's attribute for an anchor identity: 64 bits of it (its entry is checked anyway). */
const anchorAttribute = (identity: string) => `k${b64(identity.slice(0, 16))}`;

/** A scope item's sort key (an absent scope and "" give one artifact id, so one item). */
const scopeSort = (scope: string | undefined) => `=${scope ?? ''}`;

/** What the meta item says: the indexed size, and whether the items are of this layout (an empty index is). */
function stateOf(meta: Record<string, AttributeValue>): { size: number; current: boolean } {
  return {
    size: Number(meta.size?.N ?? 0),
    current: meta.size === undefined || Number(meta.schema?.N ?? 1) === SCHEMA_MARK,
  };
}

/** BatchGetItem reads at most 100 keys. */
const BATCH_GET = 100;

export class DynamoIndex implements LookupIndex {
  readonly stats: DynamoStats = { reads: 0, writes: 0, conditionFailures: 0 };
  readonly client: DynamoDBClient;
  private readonly ownsClient: boolean;
  private readonly table: string;
  private readonly ns: string;
  private readonly limit: ReturnType<typeof pLimit>;
  /** Scopes this indexer has written an item for (each is written once, not per entry). */
  private readonly scopesWritten = new Set<string>();

  constructor(options: DynamoIndexOptions) {
    this.ownsClient = !options.client;
    this.client = options.client ?? createDynamoClient(options);
    this.table = options.table;
    this.ns = `idx#${options.log}`;
    this.limit = pLimit(options.concurrency ?? 32);
  }

  private metaKey() {
    return { pk: { S: `${this.ns}#meta` }, sk: { S: 'meta' } };
  }

  async onBatch(batch: IntegratedBatch): Promise<void> {
    const end = batch.fromSize + batch.count;
    const state = await this.state();
    if (!state.current && state.size > 0)
      throw new IndexGapError(
        `the index is of an older layout (clear and rebuild it); batch starts at ${batch.fromSize}`,
      );
    let indexed = state.size;
    if (end <= indexed) return;
    if (batch.fromSize > indexed)
      throw new IndexGapError(`index holds ${indexed} leaves; batch starts at ${batch.fromSize}`);

    const start = indexed;
    const digests = new Map<string, number>();
    const artifacts = new Map<string, number>();
    const anchors = new Map<string, { digest: string; seq: number }>();
    const scopes = new Set<string>();
    for (let seq = start; seq < end; seq++) {
      const e = batch.entryAt(seq);
      const digest = e.digest.toLowerCase();
      if (!digests.has(digest)) digests.set(digest, seq);
      const identity = anchorIdentity(e);
      if (identity !== undefined && !anchors.has(identity)) anchors.set(identity, { digest, seq });
      if (e.artifactId) {
        artifacts.set(e.artifactId, seq);
        const scope = scopeSort(e.scope);
        if (e.artifact !== undefined && !this.scopesWritten.has(scope)) scopes.add(scope);
      }
    }
    // An anchor whose leaf is also its digest's earliest in the batch (the common case) is
    // written with it, in one request; any other anchor on its own.
    const withDigest = new Map<string, string>();
    const apart: { attr: string; digest: string; seq: number }[] = [];
    for (const [k, a] of anchors) {
      if (digests.get(a.digest) === a.seq) withDigest.set(a.digest, anchorAttribute(k));
      else apart.push({ attr: anchorAttribute(k), ...a });
    }
    await Promise.all([
      ...[...digests].map(([d, seq]) => this.limit(() => this.setDigest(d, seq, withDigest.get(d)))),
      ...[...artifacts].map(([a, seq]) => this.limit(() => this.setLeaf(artifactItemId(a), seq, '<'))),
      ...apart.map((a) => this.limit(() => this.setLeaf(digestId(a.digest), a.seq, '>', [a.attr]))),
      ...[...scopes].map((scope) => this.limit(() => this.putScope(scope))),
    ]);

    for (;;) {
      const counts = new Map<string, number>();
      for (let seq = indexed; seq < end; seq++) {
        const type = batch.entryAt(seq).type;
        counts.set(type, (counts.get(type) ?? 0) + 1);
      }
      const names: Record<string, string> = { '#size': 'size', '#schema': 'schema' };
      const values: Record<string, { N: string }> = {
        ':end': { N: String(end) },
        ':schema': { N: String(SCHEMA_MARK) },
      };
      const adds: string[] = [];
      [...counts].forEach(([type, n], i) => {
        names[`#c${i}`] = `${COUNT_PREFIX}${type}`;
        values[`:c${i}`] = { N: String(n) };
        adds.push(`#c${i} :c${i}`);
      });
      if (indexed > 0) values[':indexed'] = { N: String(indexed) };
      this.stats.writes++;
      try {
        await this.client.send(
          new UpdateItemCommand({
            TableName: this.table,
            Key: this.metaKey(),
            UpdateExpression: `SET #size = :end, #schema = :schema ADD ${adds.join(', ')}`,
            ConditionExpression: indexed === 0 ? 'attribute_not_exists(#size)' : '#size = :indexed',
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: values,
          }),
        );
        return;
      } catch (e) {
        if (!isConditionFailure(e)) throw e;
        this.stats.conditionFailures++;
        // Another indexer moved the high-water mark: count only what it did not.
        const now = (await this.state()).size;
        if (now >= end) return;
        if (now < start) throw new Error(`index size went back from ${indexed} to ${now}`);
        indexed = now;
      }
    }
  }

  /** Records a scope whose artifacts a search must consider (an unconditional, idempotent put). */
  private async putScope(scope: string): Promise<void> {
    this.stats.writes++;
    await this.client.send(
      new PutItemCommand({ TableName: this.table, Item: { pk: { S: `${this.ns}#s` }, sk: { S: scope } } }),
    );
    this.scopesWritten.add(scope);
  }

  /**
   * The digest's earliest leaf, and the anchor identity `anchorAttr` carried by that same
   * leaf: both in one write when neither holds an earlier leaf; else each on its own.
   */
  private async setDigest(digest: string, leaf: number, anchorAttr: string | undefined): Promise<void> {
    const id = digestId(digest);
    if (anchorAttr === undefined) return void (await this.setLeaf(id, leaf, '>'));
    if (await this.setLeaf(id, leaf, '>', [LEAF, anchorAttr])) return;
    await Promise.all([this.setLeaf(id, leaf, '>'), this.setLeaf(id, leaf, '>', [anchorAttr])]);
  }

  /**
   * Sets attributes `attrs` of item `id` to `leaf` unless one already holds a leaf `op` than
   * `leaf` does not allow; false if so (nothing written).
   */
  private async setLeaf(id: string, leaf: number, op: '>' | '<', attrs = [LEAF]): Promise<boolean> {
    this.stats.writes++;
    const names = Object.fromEntries(attrs.map((a, i) => [`#l${i}`, a]));
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { pk: { S: `${this.ns}#${id}` }, sk: { S: LEAF } },
          UpdateExpression: `SET ${attrs.map((_, i) => `#l${i} = :l`).join(', ')}`,
          ConditionExpression: attrs.map((_, i) => `(attribute_not_exists(#l${i}) OR #l${i} ${op} :l)`).join(' AND '),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: { ':l': { N: String(leaf) } },
        }),
      );
      return true;
    } catch (e) {
      if (!isConditionFailure(e)) throw e;
      this.stats.conditionFailures++; // already earlier (digest) or later (artifact)
      return false;
    }
  }

  private async getLeaf(id: string, attr = LEAF): Promise<number | undefined> {
    this.stats.reads++;
    const res = await this.client.send(
      // Strongly consistent: an acknowledged anchor is findable at once on every replica.
      new GetItemCommand({
        TableName: this.table,
        Key: { pk: { S: `${this.ns}#${id}` }, sk: { S: LEAF } },
        ConsistentRead: true,
        ProjectionExpression: '#a',
        ExpressionAttributeNames: { '#a': attr },
      }),
    );
    const n = res.Item?.[attr]?.N;
    return n === undefined ? undefined : Number(n);
  }

  /** An item names one leaf: the answer if its entry carries what was looked up (a stale item is none). */
  private async confirmed(leaf: Promise<number | undefined>, confirm: Confirm): Promise<number | undefined> {
    const seq = await leaf;
    return seq !== undefined && (await confirm(seq)) ? seq : undefined;
  }

  findByDigest(digest: string, confirm: Confirm): Promise<number | undefined> {
    return this.confirmed(this.getLeaf(digestId(digest)), confirm);
  }

  findByArtifact(artifactId: string, confirm: Confirm): Promise<number | undefined> {
    return this.confirmed(this.getLeaf(artifactItemId(artifactId)), confirm);
  }

  findAnchor(identity: string, digest: string, confirm: Confirm): Promise<number | undefined> {
    return this.confirmed(this.getLeaf(digestId(digest), anchorAttribute(identity)), confirm);
  }

  async searchArtifact(
    label: string,
    limit: number,
    after: string | undefined,
    confirm: (artifactId: string, seq: number) => Promise<boolean>,
  ): Promise<ArtifactPage> {
    // The label's artifact id in every recorded scope, in id order, after the cursor.
    const ids = [...new Set((await this.scopes()).map((scope) => artifactIdOf(label, scope)))]
      .filter((id) => after === undefined || id > after)
      .sort();
    // One more than asked tells whether more follow; an id with no item, or whose item's
    // entry does not carry the label (stale), is skipped.
    const matches: ArtifactMatch[] = [];
    for (let from = 0; from < ids.length && matches.length <= limit; from += BATCH_GET) {
      const chunk = ids.slice(from, from + BATCH_GET);
      const leaves = await this.artifactLeaves(chunk);
      for (const artifactId of chunk) {
        const seq = leaves.get(artifactId);
        if (seq !== undefined && matches.length <= limit && (await confirm(artifactId, seq)))
          matches.push({ artifactId, seq });
      }
    }
    return { matches: matches.slice(0, limit), more: matches.length > limit };
  }

  /** Every scope recorded with an artifact ("" for none), read strongly consistent. */
  private async scopes(): Promise<string[]> {
    const out: string[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      this.stats.reads++;
      const res = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          ConsistentRead: true,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: `${this.ns}#s` } },
          ExclusiveStartKey: start,
        }),
      );
      for (const item of res.Items ?? []) out.push(item.sk!.S!.slice(1));
      start = res.LastEvaluatedKey;
    } while (start);
    return out;
  }

  /** The latest leaf of each artifact id that has an item (one strongly consistent BatchGetItem). */
  private async artifactLeaves(artifactIds: readonly string[]): Promise<Map<string, number>> {
    const byPk = new Map(artifactIds.map((id) => [`${this.ns}#${artifactItemId(id)}`, id]));
    const out = new Map<string, number>();
    let keys: Record<string, AttributeValue>[] = [...byPk.keys()].map((pk) => ({ pk: { S: pk }, sk: { S: LEAF } }));
    for (let attempt = 0; keys.length > 0; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, Math.min(1_000, 25 * 2 ** attempt)));
      this.stats.reads++;
      const res = await this.client.send(
        new BatchGetItemCommand({ RequestItems: { [this.table]: { Keys: keys, ConsistentRead: true } } }),
      );
      for (const item of res.Responses?.[this.table] ?? []) {
        const id = byPk.get(item.pk!.S!);
        if (id !== undefined && item[LEAF]?.N !== undefined) out.set(id, Number(item[LEAF].N));
      }
      // Keys DynamoDB did not get to (throttling, size) are asked again, with backoff.
      keys = res.UnprocessedKeys?.[this.table]?.Keys ?? [];
    }
    return out;
  }

  async outdated(): Promise<boolean> {
    const state = await this.state();
    return state.size > 0 && !state.current;
  }

  /**
   * The indexed size as the meta item holds it, and whether its items are of this layout.
   * An older layout's items are never read: their keys are written otherwise (hex, label
   * rows), so a lookup finds nothing of theirs, and indexedSize says 0 (a 503, not a 404).
   */
  private async state(): Promise<{ size: number; current: boolean }> {
    return stateOf(await this.meta());
  }

  private async meta() {
    this.stats.reads++;
    const res = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: this.metaKey(), ConsistentRead: true }),
    );
    return res.Item ?? {};
  }

  /** Leaves indexed: none while the index is of an older layout (its items are not read). */
  async indexedSize(): Promise<number> {
    const state = await this.state();
    return state.current ? state.size : 0;
  }

  async countsByType(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    const meta = await this.meta();
    if (!stateOf(meta).current) return out;
    for (const [name, value] of Object.entries(meta)) {
      if (name.startsWith(COUNT_PREFIX) && value.N !== undefined)
        out[name.slice(COUNT_PREFIX.length)] = Number(value.N);
    }
    return out;
  }

  /**
   * Deletes this log's index items, the size and counts first (so the index holds 0 leaves
   * before any row goes). A scan of the table: meant for the rare rebuild at start, not for
   * a hot path. Replicas meanwhile find fewer entries, never wrong ones.
   */
  async clear(): Promise<void> {
    await this.deleteItem(this.metaKey());
    this.scopesWritten.clear();
    let start: Record<string, { S: string }> | undefined;
    do {
      this.stats.reads++;
      const page = await this.client.send(
        new ScanCommand({
          TableName: this.table,
          ConsistentRead: true,
          FilterExpression: 'begins_with(pk, :ns)',
          ExpressionAttributeValues: { ':ns': { S: `${this.ns}#` } },
          ProjectionExpression: 'pk, sk',
          ExclusiveStartKey: start,
        }),
      );
      await Promise.all(
        (page.Items ?? []).map((item) =>
          this.limit(() => this.deleteItem({ pk: { S: item.pk!.S! }, sk: { S: item.sk!.S! } })),
        ),
      );
      start = page.LastEvaluatedKey as typeof start;
    } while (start);
  }

  private async deleteItem(key: { pk: { S: string }; sk: { S: string } }): Promise<void> {
    this.stats.writes++;
    await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: key }));
  }

  async close(): Promise<void> {
    if (this.ownsClient) this.client.destroy();
  }
}
