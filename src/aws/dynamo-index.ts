// LookupIndex on DynamoDB, shared by every API replica; written by the sequencer as a
// BatchListener (fed through indexFeeder, which fills gaps from the record bundles).
//
// Items (single table, pk/sk as DynamoLock):
//   pk = "idx#<log>#d#<digest>"    sk = "leaf"  leaf (N): earliest leaf with that digest
//   pk = "idx#<log>#a#<artifactId>" sk = "leaf" leaf (N): latest leaf with that artifact
//   pk = "idx#<log>#k#<identity>"  sk = "leaf" leaf (N): earliest anchor with that identity
//   pk = "idx#<log>#n#<label key>" sk = <artifact id>  leaf (N): latest leaf of that artifact
//                                  (one partition per label: a Query lists its artifact ids)
//   pk = "idx#<log>#meta"          sk = "meta"  size (N): leaves 0..size-1 indexed;
//                                               "count:<type>" (N): entries by type;
//                                               schema (N): INDEX_SCHEMA of the rows
// So an entry adds at most three items (a new digest, a new artifact and its label row), one
// when its artifact is known, none when its digest is too.
// Every write is idempotent or conditional, so replays, retries and two indexers racing
// (a catch-up beside the live feed) converge on the same items:
//   - digest (and anchor) leaves change only to a smaller leaf, artifact ones only to a larger;
//   - counts and the indexed size move together in one conditional UpdateItem
//     (ADD counts, SET size = end, if size = start), so each leaf is counted exactly once,
//     and only after its digest and artifact items are written.
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import pLimit from 'p-limit';
import { anchorIdentity } from '../core/duplicates.js';
import { labelKey } from '../index/keys.js';
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

/** The digest item's attribute for an anchor identity: 64 bits of it (its entry is checked anyway). */
const anchorAttribute = (identity: string) => `k${identity.slice(0, 16)}`;

export class DynamoIndex implements LookupIndex {
  readonly stats: DynamoStats = { reads: 0, writes: 0, conditionFailures: 0 };
  readonly client: DynamoDBClient;
  private readonly ownsClient: boolean;
  private readonly table: string;
  private readonly ns: string;
  private readonly limit: ReturnType<typeof pLimit>;

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
    let indexed = await this.indexedSize();
    if (end <= indexed) return;
    if (batch.fromSize > indexed)
      throw new IndexGapError(`index holds ${indexed} leaves; batch starts at ${batch.fromSize}`);

    const start = indexed;
    const digests = new Map<string, number>();
    const artifacts = new Map<string, number>();
    const anchors = new Map<string, { digest: string; seq: number }>();
    const labels = new Map<string, { label: string; artifactId: string; seq: number }>();
    for (let seq = start; seq < end; seq++) {
      const e = batch.entryAt(seq);
      const digest = e.digest.toLowerCase();
      if (!digests.has(digest)) digests.set(digest, seq);
      const identity = anchorIdentity(e);
      if (identity !== undefined && !anchors.has(identity)) anchors.set(identity, { digest, seq });
      if (e.artifactId) {
        artifacts.set(e.artifactId, seq);
        if (e.artifact !== undefined)
          labels.set(e.artifactId, { label: labelKey(e.artifact), artifactId: e.artifactId, seq });
      }
    }
    await Promise.all([
      ...[...digests].map(([d, seq]) => this.limit(() => this.setLeaf(`d#${d}`, seq, '>'))),
      ...[...artifacts].map(([a, seq]) => this.limit(() => this.setLeaf(`a#${a}`, seq, '<'))),
      ...[...anchors].map(([k, { digest, seq }]) =>
        this.limit(() => this.setLeaf(`d#${digest}`, seq, '>', 'leaf', anchorAttribute(k))),
      ),
      ...[...labels.values()].map((l) => this.limit(() => this.setLeaf(`n#${l.label}`, l.seq, '<', l.artifactId))),
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
        ':schema': { N: String(INDEX_SCHEMA) },
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
        const now = await this.indexedSize();
        if (now >= end) return;
        if (now < start) throw new Error(`index size went back from ${indexed} to ${now}`);
        indexed = now;
      }
    }
  }

  /** Sets attribute `attr` of item `id` to `leaf` unless it already holds one `op` than `leaf` allows. */
  private async setLeaf(id: string, leaf: number, op: '>' | '<', sk = 'leaf', attr = 'leaf'): Promise<void> {
    this.stats.writes++;
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: { pk: { S: `${this.ns}#${id}` }, sk: { S: sk } },
          UpdateExpression: 'SET #l = :l',
          ConditionExpression: `attribute_not_exists(#l) OR #l ${op} :l`,
          ExpressionAttributeNames: { '#l': attr },
          ExpressionAttributeValues: { ':l': { N: String(leaf) } },
        }),
      );
    } catch (e) {
      if (!isConditionFailure(e)) throw e;
      this.stats.conditionFailures++; // already earlier (digest) or later (artifact)
    }
  }

  private async getLeaf(id: string, attr = 'leaf'): Promise<number | undefined> {
    this.stats.reads++;
    const res = await this.client.send(
      // Strongly consistent: an acknowledged anchor is findable at once on every replica.
      new GetItemCommand({
        TableName: this.table,
        Key: { pk: { S: `${this.ns}#${id}` }, sk: { S: 'leaf' } },
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
    return this.confirmed(this.getLeaf(`d#${digest.toLowerCase()}`), confirm);
  }

  findByArtifact(artifactId: string, confirm: Confirm): Promise<number | undefined> {
    return this.confirmed(this.getLeaf(`a#${artifactId}`), confirm);
  }

  findAnchor(identity: string, digest: string, confirm: Confirm): Promise<number | undefined> {
    return this.confirmed(this.getLeaf(`d#${digest.toLowerCase()}`, anchorAttribute(identity)), confirm);
  }

  async searchArtifact(
    label: string,
    limit: number,
    after: string | undefined,
    confirm: (artifactId: string, seq: number) => Promise<boolean>,
  ): Promise<ArtifactPage> {
    const matches: ArtifactMatch[] = [];
    let start: Record<string, AttributeValue> | undefined;
    // One more than asked tells whether more follow; an item whose entry does not carry the
    // label (stale) is skipped, and the next page read when the one read falls short.
    do {
      this.stats.reads++;
      const res = await this.client.send(
        new QueryCommand({
          TableName: this.table,
          ConsistentRead: true,
          KeyConditionExpression: after === undefined ? 'pk = :pk' : 'pk = :pk AND sk > :after',
          ExpressionAttributeValues: {
            ':pk': { S: `${this.ns}#n#${labelKey(label)}` },
            ...(after === undefined ? {} : { ':after': { S: after } }),
          },
          Limit: limit + 1 - matches.length,
          ExclusiveStartKey: start,
        }),
      );
      for (const item of res.Items ?? []) {
        const artifactId = item.sk!.S!;
        const seq = Number(item.leaf!.N);
        if (await confirm(artifactId, seq)) matches.push({ artifactId, seq });
      }
      start = res.LastEvaluatedKey;
    } while (start && matches.length <= limit);
    return { matches: matches.slice(0, limit), more: matches.length > limit };
  }

  async outdated(): Promise<boolean> {
    const meta = await this.meta();
    return meta.size !== undefined && Number(meta.schema?.N ?? 1) !== INDEX_SCHEMA;
  }

  private async meta() {
    this.stats.reads++;
    const res = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: this.metaKey(), ConsistentRead: true }),
    );
    return res.Item ?? {};
  }

  async indexedSize(): Promise<number> {
    return Number((await this.meta()).size?.N ?? 0);
  }

  async countsByType(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const [name, value] of Object.entries(await this.meta())) {
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
