// SequencerLock on DynamoDB: one item per log, replaced only by a conditional PutItem on
// its version attribute (the pattern static-CT logs use), so two sequencers can never both
// extend the same tree size. Every read is strongly consistent.
//
// Single-table layout shared with DynamoIndex (partition key `pk`, sort key `sk`, both S):
//   pk = "lock#<log>"  sk = "lock"   state (S, LockState JSON), version (S), size (N), updated (S)
import { randomBytes } from 'node:crypto';
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { type LockState, type SequencerLock, parseLockState } from '../store/lock.js';
import { VersionConflictError } from '../store/store.js';
import { reportUnreachable } from '../store/unreachable.js';

export interface DynamoConnectionOptions {
  readonly region?: string;
  /** A DynamoDB-compatible endpoint (default: AWS for the region). */
  readonly endpoint?: string;
  readonly credentials?: DynamoDBClientConfig['credentials'];
  /** SDK attempts per request, first included (default 6). */
  readonly maxAttempts?: number;
  readonly clientConfig?: DynamoDBClientConfig;
}

export function createDynamoClient(o: DynamoConnectionOptions = {}): DynamoDBClient {
  const region = o.region ?? process.env.AWS_REGION ?? 'us-east-1';
  const client = new DynamoDBClient({
    region,
    ...(o.endpoint ? { endpoint: o.endpoint } : {}),
    ...(o.credentials ? { credentials: o.credentials } : {}),
    maxAttempts: o.maxAttempts ?? 6,
    retryMode: 'standard',
    requestHandler: { connectionTimeout: 5_000, requestTimeout: 10_000 },
    ...o.clientConfig,
  });
  // A network failure names the endpoint and its setting (src/store/unreachable.ts).
  return o.endpoint
    ? reportUnreachable(client, `the DynamoDB endpoint ${o.endpoint}`, 'STELE_DYNAMO_ENDPOINT')
    : reportUnreachable(client, `AWS DynamoDB in ${region}`, 'AWS_REGION');
}

export interface DynamoLockOptions extends DynamoConnectionOptions {
  readonly table: string;
  /** The log this lock belongs to (its origin); one table can hold several logs. */
  readonly log: string;
  readonly client?: DynamoDBClient;
}

export interface DynamoStats {
  reads: number;
  writes: number;
  /** Conditional writes refused by DynamoDB (each is still billed as a write). */
  conditionFailures: number;
}

export class DynamoLock implements SequencerLock {
  readonly stats: DynamoStats = { reads: 0, writes: 0, conditionFailures: 0 };
  readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly key: { pk: { S: string }; sk: { S: string } };

  constructor(options: DynamoLockOptions) {
    this.client = options.client ?? createDynamoClient(options);
    this.table = options.table;
    this.key = { pk: { S: `lock#${options.log}` }, sk: { S: 'lock' } };
  }

  async read(): Promise<{ state: LockState; version: string } | null> {
    this.stats.reads++;
    const res = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: this.key, ConsistentRead: true }),
    );
    const item = res.Item;
    if (!item) return null;
    const state = item.state?.S;
    const version = item.version?.S;
    if (state === undefined || version === undefined)
      throw new Error(`lock item in ${this.table} lacks state or version`);
    return { state: parseLockState(Buffer.from(state, 'utf8')), version };
  }

  async swap(expected: string | null, next: LockState): Promise<string> {
    // A fresh random version per write: if the SDK retries a PutItem whose first attempt
    // landed, the condition fails, and reading the item back shows our own version.
    const version = `${next.size}-${randomBytes(12).toString('hex')}`;
    this.stats.writes++;
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: {
            ...this.key,
            state: { S: JSON.stringify(next) },
            version: { S: version },
            size: { N: String(next.size) },
            updated: { S: new Date().toISOString() },
          },
          ...(expected === null
            ? { ConditionExpression: 'attribute_not_exists(pk)' }
            : {
                ConditionExpression: '#v = :expected',
                ExpressionAttributeNames: { '#v': 'version' },
                ExpressionAttributeValues: { ':expected': { S: expected } },
              }),
        }),
      );
      return version;
    } catch (e) {
      if (!(e instanceof ConditionalCheckFailedException) && (e as Error).name !== 'ConditionalCheckFailedException')
        throw e;
      this.stats.conditionFailures++;
      const current = await this.read();
      if (current?.version === version) return version;
      throw new VersionConflictError(`dynamodb:${this.table}/${this.key.pk.S}`);
    }
  }
}

/**
 * A number in the table that only ever grows (e.g. the tree size up to which partial
 * tiles were swept): pk = "mark#<log>#<name>", sk = "mark", value (N).
 */
export class DynamoMark {
  private readonly key: { pk: { S: string }; sk: { S: string } };

  constructor(
    private readonly client: DynamoDBClient,
    private readonly table: string,
    log: string,
    name: string,
  ) {
    this.key = { pk: { S: `mark#${log}#${name}` }, sk: { S: 'mark' } };
  }

  async get(): Promise<number> {
    const res = await this.client.send(
      new GetItemCommand({ TableName: this.table, Key: this.key, ConsistentRead: true }),
    );
    return Number(res.Item?.value?.N ?? 0);
  }

  /** Raises the mark to `value` (no-op if it is already there or beyond). */
  async advance(value: number): Promise<void> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: this.key,
          UpdateExpression: 'SET #v = :v',
          ConditionExpression: 'attribute_not_exists(#v) OR #v < :v',
          ExpressionAttributeNames: { '#v': 'value' },
          ExpressionAttributeValues: { ':v': { N: String(value) } },
        }),
      );
    } catch (e) {
      if ((e as Error).name !== 'ConditionalCheckFailedException') throw e;
    }
  }
}
